//! Holdpoint's telemetry, shared by the ingress, the worker and the `holdpoint`
//! command.
//!
//! - [`metrics`]: the Prometheus metrics ([`Metrics`]): one registry per process
//!   (or per test), plain atomic counters on the hot path, encoded on scrape for the
//!   admin listener's `/metrics`.
//! - [`context`]: the W3C trace context ([`TraceContext`], the `traceparent`
//!   header): parsed from HTTP requests (or started), carried in NATS headers from
//!   the ingress to the worker and out on events. A leaf: [`trace`] and [`otlp`]
//!   both use it.
//! - [`trace`]: [`trace::link`] puts a hop's span into the trace (re-exports
//!   [`TraceContext`] and [`trace::TRACEPARENT`] too).
//! - [`logs`]: the one tracing subscriber setup ([`logs::init`]), text or JSON.
//! - [`otlp`]: optional span export (feature `otlp`).

pub mod context;
pub mod logs;
pub mod metrics;
pub mod otlp;
pub mod trace;

pub use context::TraceContext;
pub use logs::{LogFormat, LogOutput};
pub use metrics::Metrics;
