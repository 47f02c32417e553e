//! The connection under the API: what a client sees besides the handlers'
//! responses.
//!
//! - [`close_unread`]: a response sent before the request's body was read to its
//!   end (an early `401`, a `415`, a `413`, a `404`…) says `Connection: close`, so
//!   a keep-alive client opens a new connection instead of writing its next request
//!   into one the server is about to drop.
//! - [`Listener`] and [`Conn`]: hyper answers a request it cannot parse by itself,
//!   before any Holdpoint code runs (`400` for a raw `>` in the path or a control
//!   byte in a header value, `414` for an overlong target, `431` for headers over
//!   its buffer), with an empty body. `Conn` replaces each such answer with the
//!   same status, the `{code, title, message}` body ([`ErrorBody`]) of
//!   `NRY-0001`, `NRY-0016` or `NRY-0015`, and `Connection: close` (hyper closes
//!   the connection after it anyway).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use holdpoint_domain::{ErrorBody, ErrorCode, Rejection};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A request body that records when it has been read to its end.
struct Tracked {
    inner: Body,
    done: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || this.inner.is_end_stream() {
            this.done.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The layer that adds `Connection: close` to an HTTP/1 response when the
/// request's body was not read to its end (see the module docs).
pub async fn close_unread(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let http1 = parts.version < Version::HTTP_2;
    let done = Arc::new(AtomicBool::new(body.is_end_stream()));
    let tracked = Body::new(Tracked {
        inner: body,
        done: done.clone(),
    });
    let mut resp = next.run(Request::from_parts(parts, tracked)).await;
    if http1 && !done.load(Ordering::Acquire) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A listener whose connections are [`Conn`]s (see the module docs).
#[derive(Debug)]
pub struct Listener<L>(pub L);

impl<L: axum::serve::Listener> axum::serve::Listener for Listener<L> {
    type Io = Conn<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.0.accept().await;
        (Conn::new(io), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// One connection: reads pass through; a write that is hyper's automatic answer to
/// an unparsable request is replaced by the same answer with an error body.
#[derive(Debug)]
pub struct Conn<IO> {
    io: IO,
    /// Bytes of a replacement not yet written.
    out: Vec<u8>,
    sent: usize,
}

impl<IO> Conn<IO> {
    /// Wraps `io`.
    pub fn new(io: IO) -> Self {
        Conn {
            io,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// The wrapped connection (the Unix socket's peer credentials are read there).
    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

/// What hyper writes, alone and at the start of a write, when it cannot parse a
/// request: a `400`, `414` or `431` head with `content-length: 0` and no
/// `content-type` (every answer of Holdpoint's own has a JSON body). Returns the
/// replacement: the same head with the error body.
fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    let end = written.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if end != written.len() {
        return None;
    }
    let head = std::str::from_utf8(&written[..end - 4]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let (version, rest) = status_line.split_once(' ')?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let (code, message) = match rest.split(' ').next()? {
        "400" => (
            ErrorCode::InvalidRequest,
            "the request could not be read: its request line or a header is malformed \
             (for example a raw `>`, `<` or space in the path, or a control character in \
             a header value)",
        ),
        "414" => (
            ErrorCode::UriTooLong,
            "the request's path and query are longer than the server reads",
        ),
        "431" => (
            ErrorCode::HeadersTooLarge,
            "the request's headers are larger than the server reads",
        ),
        _ => return None,
    };
    let mut kept = Vec::new();
    let mut empty = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => return None,
            "content-length" => empty = value.trim() == "0",
            "connection" => {}
            _ => kept.push(line),
        }
    }
    if !empty {
        return None;
    }
    let body = serde_json::to_vec(&ErrorBody::from(&Rejection::new(code, message))).ok()?;
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for line in kept {
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(&body);
    Some(out)
}

impl<IO: AsyncWrite + Unpin> Conn<IO> {
    /// Writes what is left of a replacement.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Takes `buf` as written when it is hyper's automatic answer (queueing its
    /// replacement); `None` otherwise.
    fn intercept(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Option<Poll<io::Result<usize>>> {
        let replaced = replacement(buf)?;
        self.out = replaced;
        self.sent = 0;
        Some(match self.poll_drain(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // What is left is written by the next write, flush or shutdown.
            _ => Poll::Ready(Ok(buf.len())),
        })
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Conn<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Conn<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if let Some(done) = this.intercept(cx, buf) {
            return done;
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && let Some(done) = this.intercept(cx, first)
        {
            return done;
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_error_heads_are_replaced() {
        let auto = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        let r = String::from_utf8(replacement(auto).expect("replaced")).expect("utf-8");
        assert!(
            r.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{r}"
        );
        assert!(
            r.contains("content-type: application/json\r\n") && r.contains("connection: close\r\n")
        );
        assert!(r.contains("date: Thu, 01 Jan 2026"), "{r}");
        let (head, body) = r.split_once("\r\n\r\n").expect("head");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|n| n.parse().ok())
            .expect("length");
        assert_eq!(len, body.len());
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["code"], "NRY-0015");
        let bad = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        let r = String::from_utf8(replacement(bad).expect("replaced")).expect("utf-8");
        assert!(r.contains(r#""code":"NRY-0001""#), "{r}");
        // Holdpoint's own answers, bodies, other statuses: untouched.
        for keep in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"data: HTTP/1.1 400\r\n\r\n",
            b"{\"code\":\"NRY-0001\"}",
        ] {
            assert!(replacement(keep).is_none(), "{:?}", String::from_utf8_lossy(keep));
        }
    }
}
