//! The tracing subscriber: one setup for every `holdpoint` verb.
//!
//! Logs go to stderr (the default) or stdout ([`LogOutput`]), as text (the default,
//! for people) or JSON lines (for log collectors: one object per event with its
//! span's fields, `trace_id` included). `RUST_LOG` overrides the configured level.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?} (text, json)")),
        }
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// Where log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogOutput {
    /// Standard error (the default: a verb's own output stays alone on stdout).
    #[default]
    Stderr,
    /// Standard output (containers, whose runtimes collect stdout).
    Stdout,
}

impl FromStr for LogOutput {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stderr" => Ok(LogOutput::Stderr),
            "stdout" => Ok(LogOutput::Stdout),
            other => Err(format!("unknown log output {other:?} (stderr, stdout)")),
        }
    }
}

impl std::fmt::Display for LogOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogOutput::Stderr => "stderr",
            LogOutput::Stdout => "stdout",
        })
    }
}

/// The writer of [`LogOutput`], a `tracing_subscriber` `MakeWriter`.
#[derive(Debug, Clone, Copy)]
struct Writer(LogOutput);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = Box<dyn std::io::Write + 'a>;
    fn make_writer(&'a self) -> Self::Writer {
        match self.0 {
            LogOutput::Stderr => Box::new(std::io::stderr()),
            LogOutput::Stdout => Box::new(std::io::stdout()),
        }
    }
}

/// Why the subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The level (filter directive) does not parse.
    #[error("log.level {level:?} is not a valid filter: {message}")]
    Level {
        /// The directive.
        level: String,
        /// Human-readable text for the model or a person; no internals.
        message: String,
    },
}

/// Checks a filter directive (`info`, `holdpoint_worker=debug,warn`).
///
/// # Errors
/// [`LogError::Level`] naming the directive.
pub fn check_level(level: &str) -> Result<(), LogError> {
    tracing_subscriber::EnvFilter::try_new(level)
        .map(|_| ())
        .map_err(|e| LogError::Level {
            level: level.to_owned(),
            message: e.to_string(),
        })
}

/// Span export settings for [`init`].
#[derive(Debug, Clone, Copy)]
pub struct Export<'a> {
    /// The OTLP/HTTP endpoint (`http://collector:4318`).
    pub otlp_endpoint: &'a str,
    /// The `service.name` the spans carry.
    pub service_name: &'a str,
}

/// Why the subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The level does not parse.
    #[error(transparent)]
    Level(#[from] LogError),
    /// Span export could not start.
    #[error(transparent)]
    Otlp(#[from] crate::otlp::OtlpError),
}

/// Installs the global subscriber: `format` on `output`, filtered by `RUST_LOG`
/// if set, else by `level`; with `export`, spans also go to an OTLP collector (a
/// build with the `otlp` feature). A second call does nothing (tests, the demo).
///
/// # Errors
/// When `level` does not parse, or export is asked of a build without it.
pub fn init(
    format: LogFormat,
    output: LogOutput,
    level: &str,
    export: Option<Export<'_>>,
) -> Result<(), InitError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    check_level(level)?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .map_err(|e| LogError::Level {
            level: level.to_owned(),
            message: e.to_string(),
        })?;
    let terminal = match output {
        LogOutput::Stderr => std::io::IsTerminal::is_terminal(&std::io::stderr()),
        LogOutput::Stdout => std::io::IsTerminal::is_terminal(&std::io::stdout()),
    };
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(terminal)
            .with_writer(Writer(output))
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(Writer(output))
    });
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json);
    #[cfg(feature = "otlp")]
    {
        let otel = match export {
            Some(e) => Some(crate::otlp::imp::layer(e.otlp_endpoint, e.service_name)?),
            None => None,
        };
        let _ = registry.with(otel).try_init();
    }
    #[cfg(not(feature = "otlp"))]
    {
        if export.is_some() {
            return Err(crate::otlp::OtlpError::NotBuilt.into());
        }
        let _ = registry.try_init();
    }
    Ok(())
}
