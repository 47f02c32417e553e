//! [`Config::validate`]: the whole configuration checked at start, each problem
//! named by its key (`nats.replicas must be 1, 3 or 5 (got 2)`).

use super::{Config, ConfigError, Service, invalid};
use holdpoint_bus::redact_url;

impl Config {
    /// Checks the whole configuration for `service`.
    ///
    /// # Errors
    /// The first problem, naming the key.
    pub fn validate(&self, service: Service) -> Result<(), ConfigError> {
        let n = &self.nats;
        match &n.url {
            Some(url) => check_nats_url(url)?,
            None if service != Service::Up => {
                return Err(invalid(
                    "nats.url",
                    "is required (--nats-url, HOLDPOINT_NATS_URL or [nats] url)",
                ));
            }
            None => {}
        }
        if ![1, 3, 5].contains(&n.replicas) {
            return Err(invalid(
                "nats.replicas",
                format!("must be 1, 3 or 5 (got {})", n.replicas),
            ));
        }
        if n.duplicate_window_secs == 0 {
            return Err(invalid("nats.duplicate_window_secs", "must be positive"));
        }
        if !(1..=1024).contains(&n.partitions) {
            return Err(invalid(
                "nats.partitions",
                format!("must be 1 to 1024 (got {})", n.partitions),
            ));
        }
        if n.priority_timeout_ms < 200 {
            return Err(invalid(
                "nats.priority_timeout_ms",
                format!("must be at least 200 (got {})", n.priority_timeout_ms),
            ));
        }
        if n.ack_wait_ms < 100 {
            return Err(invalid(
                "nats.ack_wait_ms",
                format!("must be at least 100 (got {})", n.ack_wait_ms),
            ));
        }
        if self.http.outcome_timeout_ms == 0 {
            return Err(invalid("http.outcome_timeout_ms", "must be positive"));
        }
        if self.http.max_streams_per_caller == 0 {
            return Err(invalid("http.max_streams_per_caller", "must be at least 1"));
        }
        if self.http.max_in_flight == 0 {
            return Err(invalid("http.max_in_flight", "must be at least 1"));
        }
        if let Some(u) = &self.http.public_url {
            check_http_url("http.public_url", u)?;
        }
        if service != Service::Worker
            && self.http.listen.port() != 0
            && self.admin_listen(service) == Some(self.http.listen)
        {
            return Err(invalid(
                "admin.listen",
                format!("must differ from http.listen ({})", self.http.listen),
            ));
        }
        self.validate_auth()?;
        if let Some(path) = &self.socket.path
            && path.as_os_str().is_empty()
        {
            return Err(invalid("socket.path", "must not be empty"));
        }
        holdpoint_domain::OrgId::parse(self.socket.org.clone())
            .map_err(|e| invalid("socket.org", format!("is not a valid organisation id: {e}")))?;
        if !(1..=4096).contains(&self.worker.batch) {
            return Err(invalid(
                "worker.batch",
                format!("must be 1 to 4096 (got {})", self.worker.batch),
            ));
        }
        if let Some(id) = &self.worker.id
            && !holdpoint_bus::partitions::is_worker_id(id)
        {
            return Err(invalid("worker.id", "must be 1 to 64 of [A-Za-z0-9_-]"));
        }
        if self.worker.consumer_poll_ms < 100 {
            return Err(invalid(
                "worker.consumer_poll_ms",
                format!(
                    "must be at least 100 (got {})",
                    self.worker.consumer_poll_ms
                ),
            ));
        }
        let d = &self.deadlines;
        let max = holdpoint_domain::MAX_EXPIRES_IN_SECS;
        for (field, v) in [
            ("deadlines.default_secs", d.default_secs),
            ("deadlines.max_secs", d.max_secs),
            ("deadlines.warning_secs", d.warning_secs),
        ] {
            if let Some(v) = v
                && !(1..=max).contains(&v)
            {
                return Err(invalid(field, format!("must be 1 to {max} (got {v})")));
            }
        }
        if let (Some(default), Some(limit)) = (d.default_secs, d.max_secs)
            && default > limit
        {
            return Err(invalid(
                "deadlines.default_secs",
                format!("must not exceed deadlines.max_secs ({default} > {limit})"),
            ));
        }
        let w = &self.webhooks;
        if !(1..=60).contains(&w.timeout_secs) {
            return Err(invalid(
                "webhooks.timeout_secs",
                format!("must be 1 to 60 (got {})", w.timeout_secs),
            ));
        }
        if w.retry_schedule_secs.len() > 32 {
            return Err(invalid(
                "webhooks.retry_schedule_secs",
                "lists at most 32 delays",
            ));
        }
        if w.retry_schedule_secs.iter().any(|d| *d > 7 * 24 * 3600) {
            return Err(invalid(
                "webhooks.retry_schedule_secs",
                "delays are at most 604800 (7 days)",
            ));
        }
        if w.disable_after == 0 {
            return Err(invalid("webhooks.disable_after", "must be at least 1"));
        }
        if !(256..=16 * 1024 * 1024).contains(&w.body_cap_bytes) {
            return Err(invalid(
                "webhooks.body_cap_bytes",
                format!("must be 256 to 16777216 (got {})", w.body_cap_bytes),
            ));
        }
        holdpoint_telemetry::logs::check_level(&self.log.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            check_http_url("telemetry.otlp_endpoint", endpoint)?;
            if !holdpoint_telemetry::otlp::AVAILABLE {
                return Err(invalid(
                    "telemetry.otlp_endpoint",
                    "needs a holdpoint built with `--features otlp`",
                ));
            }
        }
        Ok(())
    }

    fn validate_auth(&self) -> Result<(), ConfigError> {
        let a = &self.auth;
        if a.jwks_url.is_some() && a.jwks_file.is_some() {
            return Err(ConfigError::Exclusive("auth.jwks_url", "auth.jwks_file"));
        }
        if a.dev_jwt {
            if a.jwt_issuer.is_some() {
                return Err(ConfigError::Exclusive("auth.dev_jwt", "auth.jwt_issuer"));
            }
            if a.jwks_url.is_some() || a.jwks_file.is_some() {
                let other = if a.jwks_url.is_some() {
                    "auth.jwks_url"
                } else {
                    "auth.jwks_file"
                };
                return Err(ConfigError::Exclusive("auth.dev_jwt", other));
            }
        }
        let source = a.jwks_url.is_some() || a.jwks_file.is_some();
        match (&a.jwt_issuer, source) {
            (Some(issuer), true) if issuer.trim().is_empty() => {
                return Err(invalid("auth.jwt_issuer", "must not be empty"));
            }
            (Some(_), false) => {
                return Err(invalid(
                    "auth.jwt_issuer",
                    "needs auth.jwks_url or auth.jwks_file",
                ));
            }
            (None, true) => {
                return Err(invalid(
                    "auth.jwks_url",
                    "(or auth.jwks_file) needs auth.jwt_issuer",
                ));
            }
            _ => {}
        }
        if let Some(u) = &a.jwks_url {
            check_http_url("auth.jwks_url", u)?;
        }
        if a.org_claim.trim().is_empty() {
            return Err(invalid("auth.org_claim", "must not be empty"));
        }
        if a.groups_claim.as_ref().is_some_and(|c| c.trim().is_empty()) {
            return Err(invalid("auth.groups_claim", "must not be empty when set"));
        }
        if a.jwt_algorithms.is_empty() {
            return Err(invalid("auth.jwt_algorithms", "must name at least one"));
        }
        for alg in &a.jwt_algorithms {
            holdpoint_ingress::identity::jwt::parse_algorithm(alg.trim())
                .map_err(|e| invalid("auth.jwt_algorithms", e))?;
        }
        if a.jwks_ttl_secs == 0 {
            return Err(invalid("auth.jwks_ttl_secs", "must be positive"));
        }
        Ok(())
    }
}

fn check_nats_url(url: &str) -> Result<(), ConfigError> {
    let parts: Vec<&str> = url
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(invalid("nats.url", "must not be empty"));
    }
    for part in parts {
        part.parse::<async_nats::ServerAddr>().map_err(|e| {
            invalid(
                "nats.url",
                format!("has an invalid server address {}: {e}", redact_url(part)),
            )
        })?;
    }
    Ok(())
}

fn check_http_url(field: &'static str, url: &str) -> Result<(), ConfigError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace) => {
            Ok(())
        }
        _ => Err(invalid(
            field,
            format!(
                "must be an http:// or https:// URL (got {:?})",
                redact_http_url(url)
            ),
        )),
    }
}

/// An HTTP URL with its user info's password and its query hidden (either may
/// hold a credential).
pub(super) fn redact_http_url(url: &str) -> String {
    let shown = redact_url(url);
    match shown.split_once('?') {
        Some((base, _)) => format!("{base}?***"),
        None => shown,
    }
}
