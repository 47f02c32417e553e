//! Each hop's span in the trace: [`link`] continues the caller's W3C trace
//! context (the `traceparent` header, see [`crate::context`]) on a span, or starts
//! a trace, and records the trace id on the span (`trace_id` field), so logs of one
//! answer can be followed across processes. With the `otlp` feature the exported
//! span joins the same trace ([`crate::otlp`]).

use std::fmt;

pub use crate::context::{TRACEPARENT, TraceContext};

/// Gives `span` its place in the trace: the caller's `traceparent` value
/// (`remote`, if valid) continued, else a new trace. Returns the context of
/// `span` itself (what to send on in `traceparent` headers) and records its trace
/// id in the span's `trace_id` field (declare it `tracing::field::Empty`).
///
/// With OTLP export on (feature `otlp`), the exported span is made a child of the
/// caller's span and its own ids are the ones returned, so a collector shows the
/// same trace the headers carry.
pub fn link(span: &tracing::Span, remote: Option<&str>) -> TraceContext {
    let remote = remote.and_then(TraceContext::parse);
    let local = || remote.map_or_else(TraceContext::new_root, |r| r.child());
    #[cfg(feature = "otlp")]
    let own = crate::otlp::imp::link(span, remote.as_ref()).unwrap_or_else(local);
    #[cfg(not(feature = "otlp"))]
    let own = local();
    span.record("trace_id", tracing::field::display(&HexId(own.trace_id)));
    own
}

/// Lowercase hex of an id, written without allocating.
struct HexId([u8; 16]);

impl fmt::Display for HexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
