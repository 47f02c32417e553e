//! Optional OTLP span export (cargo feature `otlp`).
//!
//! Without the feature Holdpoint still carries the W3C trace context end to end
//! and records `trace_id` on its spans; with it, [`crate::logs::init`] given an
//! endpoint also exports the spans to an OpenTelemetry collector over OTLP/HTTP
//! (protobuf), and [`crate::trace::link`] makes each `request` / `command` span a
//! child of the caller's span, so the trace a collector shows is the one the
//! `traceparent` headers carry.

/// Whether this build can export spans over OTLP.
pub const AVAILABLE: bool = cfg!(feature = "otlp");

/// Why span export could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// This build has no OTLP support.
    #[error("telemetry.otlp_endpoint needs a holdpoint built with `--features otlp`")]
    NotBuilt,
    /// The exporter could not be built.
    #[error("telemetry.otlp_endpoint: {0}")]
    Exporter(String),
}

/// The OTLP/HTTP traces URL for `endpoint`: a base such as
/// `http://collector:4318` gets `/v1/traces`; a URL that already ends with it is
/// kept.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Flushes and stops span export (at exit). Does nothing when export is off.
pub fn shutdown() {
    #[cfg(feature = "otlp")]
    imp::shutdown();
}

#[cfg(feature = "otlp")]
pub(crate) mod imp {
    use std::sync::OnceLock;

    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        TracerProvider as _,
    };
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    use super::OtlpError;
    use crate::context::TraceContext;

    static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

    /// The tracing layer exporting to `endpoint`; remembers the provider for
    /// [`shutdown`] and [`link`].
    pub(crate) fn layer<S>(
        endpoint: &str,
        service_name: &str,
    ) -> Result<
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
        OtlpError,
    >
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(super::traces_url(endpoint))
            .with_timeout(std::time::Duration::from_secs(5))
            .build()
            .map_err(|e| OtlpError::Exporter(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(service_name.to_owned())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("holdpoint");
        let _ = PROVIDER.set(provider);
        Ok(tracing_opentelemetry::layer().with_tracer(tracer))
    }

    pub(crate) fn shutdown() {
        if let Some(p) = PROVIDER.get()
            && let Err(e) = p.shutdown()
        {
            eprintln!("holdpoint: flushing spans failed: {e}");
        }
    }

    /// With export on: makes `span` a child of `remote` and returns the span's
    /// own context (the one to send on). `None` when export is off or the span is
    /// not recorded.
    pub(crate) fn link(
        span: &tracing::Span,
        remote: Option<&TraceContext>,
    ) -> Option<TraceContext> {
        PROVIDER.get()?;
        if let Some(r) = remote {
            let parent = SpanContext::new(
                TraceId::from_bytes(r.trace_id),
                SpanId::from_bytes(r.parent_id),
                TraceFlags::new(r.flags),
                true,
                TraceState::default(),
            );
            let cx = opentelemetry::Context::new().with_remote_span_context(parent);
            span.set_parent(cx).ok()?;
        }
        let cx = span.context();
        let own = cx.span().span_context().clone();
        if !own.is_valid() {
            return None;
        }
        Some(TraceContext {
            trace_id: own.trace_id().to_bytes(),
            parent_id: own.span_id().to_bytes(),
            flags: own.trace_flags().to_u8(),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(
            super::traces_url("http://c:4318"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            super::traces_url("http://c:4318/"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            super::traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
