//! The W3C trace context (<https://www.w3.org/TR/trace-context/>): the
//! `traceparent` header, `00-<trace-id>-<parent-id>-<flags>`.
//!
//! The ingress takes a valid `traceparent` from the request (or starts a trace),
//! gives its own span a fresh id under the same trace ([`TraceContext::child`]),
//! and sends that as the command's `traceparent` NATS header; the worker continues
//! the trace the same way and puts its own context on every event it publishes. So
//! every hop shares the trace id, and each hop's parent id names the hop before it.
//! [`crate::trace::link`] records the trace id on the spans (`trace_id` field), so
//! logs of one answer can be followed across processes.

use std::fmt;

/// The header (HTTP and NATS) carrying the trace context.
pub const TRACEPARENT: &str = "traceparent";

/// A W3C trace context: the trace, the span that sent it, and the flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace id (16 bytes, never all zero).
    pub trace_id: [u8; 16],
    /// The id of the span this context was sent from (8 bytes, never all zero).
    pub parent_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceContext({self})")
    }
}

impl fmt::Display for TraceContext {
    /// The `traceparent` value (version `00`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.parent_id),
            self.flags
        )
    }
}

/// Decodes exactly `N` bytes of lowercase hex (W3C forbids upper case).
fn lower_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

impl TraceContext {
    /// Parses a `traceparent` value. Version `00` must be exactly 55 characters;
    /// a later version may carry more fields after a `-` (read as version 00, as the
    /// specification asks); `ff`, upper-case hex, and all-zero ids are invalid.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        if value.len() < 55 || !value.is_ascii() {
            return None;
        }
        let version = lower_hex::<1>(&value[..2])?[0];
        if version == 0xff || (version == 0 && value.len() != 55) {
            return None;
        }
        if value.len() > 55 && value.as_bytes()[55] != b'-' {
            return None;
        }
        let b = value.as_bytes();
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let trace_id = lower_hex::<16>(&value[3..35])?;
        let parent_id = lower_hex::<8>(&value[36..52])?;
        let flags = lower_hex::<1>(&value[53..55])?[0];
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            parent_id,
            flags: if version == 0 { flags } else { flags & 0x01 },
        })
    }

    /// A new trace (random ids), sampled.
    pub fn new_root() -> Self {
        TraceContext {
            trace_id: random_id(),
            parent_id: random_span_id(),
            flags: 0x01,
        }
    }

    /// The same trace, from a new span (a fresh parent id).
    pub fn child(&self) -> Self {
        TraceContext {
            parent_id: random_span_id(),
            ..*self
        }
    }

    /// `value` parsed, else a new trace: what a hop that receives an optional
    /// `traceparent` continues from.
    pub fn continue_or_start(value: Option<&str>) -> Self {
        value
            .and_then(Self::parse)
            .map_or_else(Self::new_root, |c| c.child())
    }

    /// The trace id as 32 lowercase hex characters.
    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    /// The `traceparent` header value.
    pub fn header_value(&self) -> String {
        self.to_string()
    }
}

/// 16 random bytes, never all zero.
fn random_id() -> [u8; 16] {
    loop {
        let id = *uuid::Uuid::new_v4().as_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

/// 8 random bytes, never all zero (the random half of a v4 UUID, re-randomising the
/// variant bits with the other half).
fn random_span_id() -> [u8; 8] {
    loop {
        let u = *uuid::Uuid::new_v4().as_bytes();
        let mut id = [0u8; 8];
        for (i, b) in id.iter_mut().enumerate() {
            *b = u[i] ^ u[i + 8];
        }
        if id != [0; 8] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_formats_the_specification_example() {
        let c = TraceContext::parse(EXAMPLE).expect("valid");
        assert_eq!(c.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(c.parent_id), "00f067aa0ba902b7");
        assert_eq!(c.flags, 1);
        assert_eq!(c.to_string(), EXAMPLE);
    }

    #[test]
    fn refuses_invalid_values() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn later_versions_are_read_as_version_zero() {
        let v = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-ever";
        let c = TraceContext::parse(v).expect("forward compatible");
        assert_eq!(c.flags, 1);
        assert_eq!(
            c.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(
            TraceContext::parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),
            None
        );
    }

    #[test]
    fn children_keep_the_trace_and_change_the_span() {
        let c = TraceContext::parse(EXAMPLE).expect("valid");
        let child = c.child();
        assert_eq!(child.trace_id, c.trace_id);
        assert_eq!(child.flags, c.flags);
        assert_ne!(child.parent_id, c.parent_id);
        let root = TraceContext::continue_or_start(Some("garbage"));
        assert_ne!(root.trace_id, c.trace_id);
        assert_eq!(TraceContext::parse(&root.to_string()), Some(root));
        assert_eq!(
            TraceContext::continue_or_start(Some(EXAMPLE)).trace_id,
            c.trace_id
        );
    }
}
