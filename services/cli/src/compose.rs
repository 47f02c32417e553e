//! Composition: the services' own configurations made from one [`Config`]: the
//! NATS [`Topology`], the ingress's [`IngressConfig`] (with its [`IdentityMode`]),
//! the worker's [`WorkerConfig`], the notifier's
//! [`NotifierConfig`](holdpoint_notifier::NotifierConfig), and which admin
//! listener each service opens. The sections' units (`*_ms`, `*_secs`, MiB) become
//! `Duration`s and bytes here ([`crate::config::DeadlinesSection::policy`] aside).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_bus::Topology;
use holdpoint_ingress::{IdentityMode, IngressConfig, LocalIdentity};
use holdpoint_telemetry::Metrics;
use holdpoint_worker::{Failpoint, WorkerConfig};

use crate::config::{Config, DEFAULT_ADMIN_LISTEN, Service};
use crate::devtoken;

impl Config {
    /// The admin listener of `service`: `admin.listen`, else
    /// [`DEFAULT_ADMIN_LISTEN`] for `up` and `ingress` and none for `worker`.
    pub fn admin_listen(&self, service: Service) -> Option<SocketAddr> {
        match (self.admin.listen, service) {
            (Some(a), _) => Some(a),
            (None, Service::Worker | Service::Notifier) => None,
            (None, _) => DEFAULT_ADMIN_LISTEN.parse().ok(),
        }
    }

    /// The NATS topology.
    pub fn topology(&self) -> Topology {
        Topology {
            replicas: self.nats.replicas,
            duplicate_window: Duration::from_secs(self.nats.duplicate_window_secs),
            ack_wait: Duration::from_millis(self.nats.ack_wait_ms),
            partitions: self.nats.partitions,
            priority_timeout: Duration::from_millis(self.nats.priority_timeout_ms),
            webhook_ack_wait: Duration::from_secs(self.webhooks.timeout_secs + 2),
            audit_max_age: Duration::from_secs(
                self.nats.audit_retention_days.saturating_mul(86_400),
            ),
            ..Topology::default()
        }
    }

    /// Whether webhooks run in local mode for `service` (`webhooks.local_mode`,
    /// else on for `up` only).
    pub fn webhooks_local(&self, service: Service) -> bool {
        self.webhooks.local_mode.unwrap_or(service == Service::Up)
    }

    /// The notifier's settings for `service`, counting into `metrics`.
    pub fn notifier_config(
        &self,
        service: Service,
        metrics: Arc<Metrics>,
    ) -> holdpoint_notifier::NotifierConfig {
        let w = &self.webhooks;
        holdpoint_notifier::NotifierConfig {
            local_mode: self.webhooks_local(service),
            timeout: Duration::from_secs(w.timeout_secs),
            schedule: w
                .retry_schedule_secs
                .iter()
                .copied()
                .map(Duration::from_secs)
                .collect(),
            disable_after: w.disable_after,
            body_cap: w.body_cap_bytes,
            metrics,
            ..holdpoint_notifier::NotifierConfig::default()
        }
    }

    /// Builds the identity mode (loads the JWKS once).
    ///
    /// # Errors
    /// When the key set cannot be set up or the local user has no usable name.
    pub async fn identity(&self) -> anyhow::Result<IdentityMode> {
        use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier, parse_algorithm};
        let a = &self.auth;
        let mut mode = IdentityMode {
            insecure_dev_headers: a.insecure_dev_identity,
            ..IdentityMode::default()
        };
        let (issuer, source, audience) = if a.dev_jwt {
            let key = devtoken::DevKey::load_or_create(&devtoken::default_dir())?;
            (
                Some(devtoken::DEV_ISSUER.to_owned()),
                Some(JwksSource::File(key.jwks)),
                Some(devtoken::DEV_AUDIENCE.to_owned()),
            )
        } else {
            let source = match (&a.jwks_url, &a.jwks_file) {
                (Some(u), _) => Some(JwksSource::Url(u.clone())),
                (None, Some(f)) => Some(JwksSource::File(f.clone())),
                (None, None) => None,
            };
            (a.jwt_issuer.clone(), source, a.jwt_audience.clone())
        };
        if let (Some(issuer), Some(source)) = (issuer, source) {
            let mut cfg = AuthConfig::new(issuer, source);
            cfg.audience = audience;
            cfg.org_claim = a.org_claim.clone();
            cfg.groups_claim = a.groups_claim.clone();
            cfg.algorithms = a
                .jwt_algorithms
                .iter()
                .map(|a| parse_algorithm(a.trim()))
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow::anyhow!("auth.jwt_algorithms: {e}"))?;
            cfg.leeway_secs = a.jwt_leeway_secs;
            cfg.jwks_ttl = Duration::from_secs(a.jwks_ttl_secs.max(1));
            cfg.refetch_cooldown = Duration::from_secs(a.jwks_cooldown_secs);
            mode.jwt = Some(
                Verifier::new(cfg)
                    .await
                    .map_err(|e| anyhow::anyhow!("auth: {e}"))?,
            );
        }
        if self.socket.path.is_some() && self.socket.local_user {
            let org = holdpoint_domain::OrgId::parse(self.socket.org.clone())
                .map_err(|e| anyhow::anyhow!("socket.org: {e}"))?;
            mode.local =
                Some(LocalIdentity::current(org).map_err(|e| anyhow::anyhow!("local user: {e}"))?);
        }
        Ok(mode)
    }

    /// The ingress's settings, counting into `metrics`.
    ///
    /// # Errors
    /// As [`Config::identity`].
    pub async fn ingress_config(
        &self,
        service: Service,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<IngressConfig> {
        Ok(IngressConfig {
            webhooks_local_mode: self.webhooks_local(service),
            outcome_timeout: Duration::from_millis(self.http.outcome_timeout_ms),
            identity: self.identity().await?,
            public_url: self.http.public_url.clone(),
            metrics,
            max_streams_per_caller: self.http.max_streams_per_caller,
            max_in_flight: self.http.max_in_flight,
            a2a_missing_version_is_1_0: self.http.a2a_missing_version_is_1_0,
            ..IngressConfig::default()
        })
    }

    /// The worker's settings, counting into `metrics`.
    pub fn worker_config(
        &self,
        metrics: Arc<Metrics>,
        failpoint: Option<Failpoint>,
    ) -> WorkerConfig {
        WorkerConfig {
            batch: self.worker.batch,
            cache_bytes: self.worker.cache_mb.saturating_mul(1024 * 1024),
            worker_id: self.worker.id.clone(),
            failpoint,
            metrics,
            consumer_poll: Duration::from_millis(self.worker.consumer_poll_ms),
            deadlines: self.deadlines.policy(),
            ..WorkerConfig::default()
        }
    }
}
