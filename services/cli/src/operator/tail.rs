//! `holdpoint tail`: follows `GET /v1/events` (Server-Sent Events) and prints each
//! event, once.
//!
//! The stream is read as bytes (`reqwest`'s `bytes_stream`) and parsed by the
//! `eventsource-stream` crate, which joins a character split across chunks and
//! follows the SSE grammar (fields, comments, `\r\n`, multi-line `data:`). Each
//! event's `id:` is its sequence in the events stream (`services/ingress/src/sse.rs`);
//! after a dropped connection `tail` connects again, pausing as
//! [`Backoff::HTTP_STREAM`], with `Last-Event-ID` set to the last sequence printed,
//! so the server starts right after it. An event whose sequence is not above the
//! last one printed is skipped, so nothing is printed twice.
//!
//! The first connection must succeed (a wrong `--url` or token fails at once);
//! afterwards a lost connection, a stream silent for three keep-alive periods, or
//! a `5xx` / `429` answer is retried, and any other refusal ends `tail` with the
//! refusal's code. Every text printed goes through [`crate::terminal`].

use std::fmt::Display;
use std::io::Write;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use anyhow::{Context as _, anyhow};
use eventsource_stream::{Event, Eventsource as _};
use futures::{Stream, StreamExt as _};
use holdpoint_bus::backoff::Backoff;
use serde_json::Value;

use super::{Client, TailArgs, json_or_error, paint, segment};
use crate::terminal;

/// How long a connection may stay silent (no event, no keep-alive comment) before
/// it is taken for dead: three of the server's keep-alive periods.
const IDLE: Duration = Duration::from_secs(3 * holdpoint_ingress::sse::KEEP_ALIVE.as_secs());

/// `holdpoint tail`: follows `GET /v1/events` (SSE) and prints each event (see the
/// module docs).
///
/// # Errors
/// When the first connection fails, when the API refuses with a `4xx` other than
/// `429`, or when stdout cannot be written.
pub async fn tail(args: TailArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.api)?;
    let mut printed = Printed::new(args.api.json);
    printed.limit = args.count;
    let mut out = std::io::stdout();
    let mut connected = false;
    let mut attempt: i64 = 0;
    loop {
        let lost = match connect(&c, &args, printed.last).await {
            Ok(resp) => {
                connected = true;
                let before = printed.count;
                let lost = print_events(resp.bytes_stream(), IDLE, &mut printed, &mut out).await?;
                if printed.done() {
                    return Ok(());
                }
                if printed.count > before {
                    attempt = 0;
                }
                lost
            }
            Err(Failure::Retry(e)) if connected => e,
            Err(Failure::Retry(e) | Failure::Fatal(e)) => return Err(e),
        };
        attempt = attempt.saturating_add(1);
        let pause = Backoff::HTTP_STREAM.delay(attempt);
        eprintln!(
            "tail: {}; connecting again in {} ms",
            terminal::line(&format!("{lost:#}")),
            pause.as_millis()
        );
        tokio::time::sleep(pause).await;
    }
}

/// Why a connection attempt failed.
enum Failure {
    /// Worth another attempt: no connection, a `5xx`, a `429`.
    Retry(anyhow::Error),
    /// A refusal another attempt would meet again (`401`, `400`, …).
    Fatal(anyhow::Error),
}

/// Opens the stream: after the last sequence printed (`Last-Event-ID`), else from
/// `--from-start` (`after=0`) or new events only.
async fn connect(
    c: &Client,
    args: &TailArgs,
    last: Option<u64>,
) -> Result<reqwest::Response, Failure> {
    let mut query = Vec::new();
    if let Some(t) = &args.task {
        query.push(format!("task={}", segment(t)));
    }
    if let Some(t) = &args.event_type {
        query.push(format!("type={}", segment(t)));
    }
    if args.from_start {
        query.push("after=0".to_owned());
    }
    let url = format!("{}/v1/events?{}", args.api.url, query.join("&"));
    let mut req = c.http.get(&url).header("Accept", "text/event-stream");
    if let Some(seq) = last {
        req = req.header("Last-Event-ID", seq);
    }
    let resp = c
        .req(req)
        .send()
        .await
        .with_context(|| format!("cannot reach {}", args.api.url))
        .map_err(Failure::Retry)?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let retry = status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
    let refusal = match json_or_error(resp).await {
        Err(e) => e,
        Ok(_) => anyhow!("unexpected status {status}"),
    };
    Err(if retry {
        Failure::Retry(refusal)
    } else {
        Failure::Fatal(refusal)
    })
}

/// Parses `bytes` as Server-Sent Events and prints each new one to `out`, until the
/// stream ends, fails, or stays silent for `idle`.
///
/// # Errors
/// `Ok` holds why the stream stopped (worth connecting again); `Err` is a failure
/// to write to `out`.
async fn print_events<S, B, E>(
    bytes: S,
    idle: Duration,
    printed: &mut Printed,
    out: &mut impl Write,
) -> anyhow::Result<anyhow::Error>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Display,
{
    let events = bytes.eventsource();
    futures::pin_mut!(events);
    loop {
        match tokio::time::timeout(idle, events.next()).await {
            Err(_) => return Ok(anyhow!("no data for {} s", idle.as_secs())),
            Ok(None) => return Ok(anyhow!("the server closed the stream")),
            Ok(Some(Err(e))) => return Ok(anyhow!("the stream broke: {e}")),
            Ok(Some(Ok(event))) => {
                printed.print(&event, out)?;
                if printed.done() {
                    return Ok(anyhow!("printed {} events", printed.count));
                }
            }
        }
    }
}

/// What has been printed so far.
#[derive(Debug)]
struct Printed {
    /// The sequence (`id:`) of the last event printed.
    last: Option<u64>,
    /// Events printed.
    count: u64,
    /// `--json`: one CloudEvent per line instead of text.
    json: bool,
    /// `--count`: stop once this many events are printed.
    limit: Option<u64>,
}

impl Printed {
    fn new(json: bool) -> Self {
        Printed {
            last: None,
            count: 0,
            json,
            limit: None,
        }
    }

    /// Whether `--count` events are printed.
    fn done(&self) -> bool {
        self.limit.is_some_and(|n| self.count >= n)
    }

    /// Prints `event` unless its sequence is not above the last one printed (or it
    /// carries no data: nothing to show).
    fn print(&mut self, event: &Event, out: &mut impl Write) -> std::io::Result<()> {
        let seq = event.id.trim().parse::<u64>().ok();
        if let (Some(seq), Some(last)) = (seq, self.last)
            && seq <= last
        {
            return Ok(());
        }
        if event.data.is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        writeln!(out, "{}", render(&value, self.json))?;
        out.flush()?;
        if seq.is_some() {
            self.last = seq;
        }
        self.count += 1;
        Ok(())
    }
}

/// One line for a CloudEvent: its JSON with `--json`, else time, short type,
/// subject and data, every part made safe for a terminal.
fn render(event: &Value, json: bool) -> String {
    if json {
        return terminal::json(event);
    }
    let name = terminal::line(
        event["type"]
            .as_str()
            .unwrap_or("?")
            .trim_start_matches("dev.holdpoint."),
    )
    .into_owned();
    let style = match name.as_str() {
        "tool-call-finished" => AnsiColor::Green.on_default().bold(),
        "task-status" => AnsiColor::Blue.on_default(),
        "dead-letter" => AnsiColor::Red.on_default().bold(),
        _ => Style::new().bold(),
    };
    format!(
        "{} {:<22} {} {}",
        paint(
            AnsiColor::BrightBlack.on_default(),
            &terminal::line(event["time"].as_str().unwrap_or(""))
        ),
        paint(style, &name),
        terminal::line(event["subject"].as_str().unwrap_or("")),
        terminal::json(&event["data"])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte stream made of `chunks`, as the network may cut it.
    fn chunked(chunks: Vec<Vec<u8>>) -> impl Stream<Item = Result<Vec<u8>, std::io::Error>> {
        futures::stream::iter(chunks.into_iter().map(Ok))
    }

    async fn printed(chunks: Vec<Vec<u8>>, p: &mut Printed) -> String {
        let mut out = Vec::new();
        let why = print_events(chunked(chunks), Duration::from_secs(5), p, &mut out)
            .await
            .expect("written");
        assert_eq!(why.to_string(), "the server closed the stream");
        String::from_utf8(out).expect("utf-8 out")
    }

    fn frame(id: u64, subject: &str) -> Vec<u8> {
        format!(
            "id: {id}\nevent: task-status\ndata: {}\n\n",
            serde_json::json!({"type": "dev.holdpoint.task-status", "subject": subject, "data": {}})
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_comes_out_whole() {
        let bytes = frame(7, "café ☕");
        // Cut inside `é` (2 bytes) and inside `☕` (3 bytes).
        let e = bytes.windows(2).position(|w| w == [0xc3, 0xa9]).expect("é") + 1;
        let cup = bytes
            .windows(3)
            .position(|w| w == [0xe2, 0x98, 0x95])
            .expect("☕")
            + 2;
        let chunks = vec![
            bytes[..e].to_vec(),
            bytes[e..cup].to_vec(),
            bytes[cup..].to_vec(),
        ];
        for json in [false, true] {
            let mut p = Printed::new(json);
            let out = printed(chunks.clone(), &mut p).await;
            assert!(out.contains("café ☕"), "{out:?}");
            assert!(!out.contains('\u{fffd}'), "{out:?}");
            assert_eq!(p.last, Some(7));
        }
    }

    #[tokio::test]
    async fn after_a_reconnect_nothing_is_printed_twice() {
        let mut p = Printed::new(true);
        let first = printed(vec![frame(1, "a"), frame(2, "b")], &mut p).await;
        // The next connection starts at or before the last sequence printed.
        let second = printed(vec![frame(2, "b"), frame(3, "c")], &mut p).await;
        let subjects = |s: &str| -> Vec<String> {
            s.lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("json")["subject"].to_string())
                .collect()
        };
        assert_eq!(subjects(&first), ["\"a\"", "\"b\""]);
        assert_eq!(subjects(&second), ["\"c\""]);
        assert_eq!(p.last, Some(3));
    }

    #[tokio::test]
    async fn control_characters_never_reach_the_terminal() {
        let mut p = Printed::new(false);
        let out = printed(vec![frame(1, "evil\u{1b}[2J\rover\u{202e}")], &mut p).await;
        assert!(
            !out.chars().any(|c| c != '\n' && terminal::is_unsafe(c)),
            "{out:?}"
        );
        assert!(out.contains("\\u{1b}[2J"), "{out:?}");
        let mut p = Printed::new(true);
        let out = printed(vec![frame(1, "evil\u{1b}\u{9b}")], &mut p).await;
        assert!(
            !out.chars().any(|c| c != '\n' && terminal::is_unsafe(c)),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn comments_and_crlf_are_sse_not_events() {
        let mut p = Printed::new(true);
        let mut bytes = b":keep-alive\r\n\r\n".to_vec();
        bytes.extend(
            String::from_utf8(frame(4, "x"))
                .expect("utf-8")
                .replace('\n', "\r\n")
                .bytes(),
        );
        let out = printed(vec![bytes], &mut p).await;
        assert_eq!(out.lines().count(), 1, "{out:?}");
        assert_eq!(p.last, Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_stream_is_given_up() {
        let mut p = Printed::new(true);
        let mut out = Vec::new();
        let silent = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
        let why = print_events(silent, IDLE, &mut p, &mut out)
            .await
            .expect("nothing to write");
        assert!(why.to_string().starts_with("no data for 45 s"), "{why}");
    }
}
