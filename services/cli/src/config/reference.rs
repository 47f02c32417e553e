//! The configuration's reference: one row per key, with its flag, its variable and
//! its default, rendered as the README's tables ([`markdown`]).
//!
//! Nothing here repeats what the code already says: the variable and the verbs a
//! flag belongs to come from clap ([`crate::Cli`]), the default from
//! [`Config::default`]. [`SETTINGS`] adds only what neither knows: which key a flag
//! sets (proved by the tests: each flag, given its sample value, changes exactly
//! its key), how an unset default reads, and one line on what the key is for.
//! `tests/integration/docs.rs` keeps README.md's tables equal to [`markdown`].

use clap::CommandFactory as _;

use super::Config;

/// One configuration key.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The dotted file key (`nats.replicas`).
    pub key: &'static str,
    /// The flag that sets it (`--replicas`), if any.
    pub flag: Option<&'static str>,
    /// A valid value other than the default, for the tests (`--flag=<sample>`).
    pub sample: &'static str,
    /// How the default reads when [`Config::default`] leaves the key unset, or
    /// says more than the value alone.
    pub default: Option<&'static str>,
    /// What it is for (Markdown).
    pub about: &'static str,
}

const fn s(
    key: &'static str,
    flag: Option<&'static str>,
    sample: &'static str,
    default: Option<&'static str>,
    about: &'static str,
) -> Setting {
    Setting {
        key,
        flag,
        sample,
        default,
        about,
    }
}

/// Every key of [`Config`], in the README's order.
pub const SETTINGS: &[Setting] = &[
    s(
        "nats.url",
        Some("--nats-url"),
        "nats://n:4222",
        Some("(up: a local server)"),
        "comma-separated for a cluster; `nats://user:password@host:4222`",
    ),
    s(
        "nats.replicas",
        Some("--replicas"),
        "3",
        None,
        "1, 3 or 5 (3 in a cluster)",
    ),
    s(
        "nats.duplicate_window_secs",
        Some("--duplicate-window-secs"),
        "60",
        None,
        "the commands and events streams' duplicate window",
    ),
    s(
        "nats.ack_wait_ms",
        Some("--ack-wait-ms"),
        "500",
        None,
        "partition consumers' `ack_wait`: how soon a dead worker's command is delivered again",
    ),
    s(
        "nats.partitions",
        Some("--partitions"),
        "4",
        None,
        "command partitions, 1 to 1024; fixed once `HP_COMMANDS` exists",
    ),
    s(
        "nats.priority_timeout_ms",
        Some("--priority-timeout-ms"),
        "300",
        None,
        "how long a silent worker keeps a partition",
    ),
    s(
        "nats.audit_retention_days",
        None,
        "30",
        None,
        "days `HP_AUDIT` keeps a record (0: forever)",
    ),
    s(
        "http.listen",
        Some("--listen"),
        "127.0.0.1:9180",
        None,
        "API",
    ),
    s(
        "http.outcome_timeout_ms",
        Some("--outcome-timeout-ms"),
        "700",
        None,
        "then 503",
    ),
    s(
        "http.public_url",
        Some("--public-url"),
        "https://hp.example",
        Some("from `Host`"),
        "the agent card's base URL",
    ),
    s(
        "http.max_streams_per_caller",
        Some("--max-streams-per-caller"),
        "3",
        None,
        "open event streams per caller; then 429",
    ),
    s(
        "http.max_in_flight",
        Some("--max-in-flight"),
        "9",
        None,
        "API requests at once (about 50 KiB each while waiting); then 503 `NRY-0050` with `Retry-After`",
    ),
    s(
        "http.a2a_missing_version_is_1_0",
        Some("--a2a-missing-version-is-1-0"),
        "true",
        None,
        "compatibility: A2A requests without `A2A-Version` read as 1.0",
    ),
    s(
        "admin.listen",
        Some("--admin-listen"),
        "127.0.0.1:9181",
        Some("up, ingress: 127.0.0.1:8081; worker, notifier: none"),
        "`/healthz`, `/readyz`, `/metrics`",
    ),
    s(
        "auth.jwt_issuer",
        Some("--jwt-issuer"),
        "idp",
        Some(""),
        "the exact `iss`",
    ),
    s(
        "auth.jwks_url",
        Some("--jwks-url"),
        "https://idp.example/jwks.json",
        Some(""),
        "the key set's URL (or `--jwks-file`)",
    ),
    s(
        "auth.jwks_file",
        Some("--jwks-file"),
        "/tmp/jwks.json",
        Some(""),
        "the key set in a file",
    ),
    s(
        "auth.jwt_audience",
        Some("--jwt-audience"),
        "aud",
        Some("not checked"),
        "the required `aud`",
    ),
    s(
        "auth.org_claim",
        Some("--org-claim"),
        "tenant",
        None,
        "claim naming the organisation (a string id)",
    ),
    s(
        "auth.groups_claim",
        Some("--groups-claim"),
        "groups",
        Some("none"),
        "claim naming the person's groups (a string array), matched by group assignees",
    ),
    s(
        "auth.jwt_algorithms",
        Some("--jwt-algorithms"),
        "EdDSA",
        None,
        "also RS384/512, PS256/384/512, ES384",
    ),
    s(
        "auth.jwt_leeway_secs",
        Some("--jwt-leeway-secs"),
        "5",
        None,
        "clock skew for `exp`/`nbf`",
    ),
    s(
        "auth.jwks_ttl_secs",
        Some("--jwks-ttl-secs"),
        "60",
        None,
        "how long a fetched set is used",
    ),
    s(
        "auth.jwks_cooldown_secs",
        Some("--jwks-cooldown-secs"),
        "7",
        None,
        "least time between fetches for unknown `kid`s",
    ),
    s(
        "auth.dev_jwt",
        Some("--dev-jwt"),
        "true",
        None,
        "verify `holdpoint dev-token` tokens (development)",
    ),
    s(
        "auth.insecure_dev_identity",
        Some("--insecure-dev-identity"),
        "true",
        None,
        "trust `X-Holdpoint-Org` / `X-Holdpoint-Person` (development only)",
    ),
    s(
        "socket.path",
        Some("--socket"),
        "/tmp/hp.sock",
        Some("off"),
        "also serve the API on this Unix socket",
    ),
    s(
        "socket.org",
        Some("--socket-org"),
        "acme",
        None,
        "organisation of the socket's local user",
    ),
    s(
        "socket.local_user",
        Some("--socket-no-local-user"),
        "true",
        None,
        "`--socket-no-local-user`: tokens only on the socket",
    ),
    s(
        "worker.batch",
        Some("--batch"),
        "16",
        None,
        "commands decided together",
    ),
    s(
        "worker.cache_mb",
        Some("--cache-mb"),
        "8",
        None,
        "memory for records kept between batches, MiB",
    ),
    s(
        "worker.id",
        Some("--worker-id"),
        "w-1",
        Some("random"),
        "this worker's id among the live workers",
    ),
    s(
        "worker.consumer_poll_ms",
        Some("--consumer-poll-ms"),
        "250",
        None,
        "backlog gauges' refresh",
    ),
    s(
        "deadlines.default_secs",
        Some("--deadline-default-secs"),
        "60",
        Some("none"),
        "deadline of an opening that names none",
    ),
    s(
        "deadlines.max_secs",
        Some("--deadline-max-secs"),
        "120",
        Some("none"),
        "farthest deadline a runtime may ask for (`NRY-0023`)",
    ),
    s(
        "deadlines.warning_secs",
        Some("--deadline-warning-secs"),
        "10",
        Some("none"),
        "lead of `interaction-expiring`",
    ),
    s(
        "log.format",
        Some("--log-format"),
        "json",
        None,
        "`text` or `json`",
    ),
    s(
        "log.output",
        Some("--log-output"),
        "stdout",
        None,
        "`stderr` or `stdout` (the container image: stdout)",
    ),
    s(
        "log.level",
        Some("--log-level"),
        "debug",
        None,
        "`RUST_LOG` overrides",
    ),
    s(
        "telemetry.otlp_endpoint",
        Some("--otlp-endpoint"),
        "http://c:4318",
        Some("off"),
        "needs `--features otlp`",
    ),
    s(
        "local.store",
        Some("--store"),
        "/tmp/hp-store",
        None,
        "`up`'s own nats-server's store",
    ),
    s(
        "local.nats_port",
        Some("--nats-port"),
        "0",
        None,
        "`up`'s own nats-server's port (0: any)",
    ),
    s(
        "webhooks.local_mode",
        Some("--webhooks-local-mode"),
        "false",
        Some("up: on; else off"),
        "http to loopback and private addresses allowed",
    ),
    s(
        "webhooks.timeout_secs",
        Some("--webhook-timeout-secs"),
        "3",
        None,
        "one request, 1 to 60",
    ),
    s(
        "webhooks.retry_schedule_secs",
        Some("--webhook-retry-schedule-secs"),
        "1,2,3",
        None,
        "delays before each retry",
    ),
    s(
        "webhooks.disable_after",
        Some("--webhook-disable-after"),
        "4",
        None,
        "failed attempts in a row",
    ),
    s(
        "webhooks.body_cap_bytes",
        Some("--webhook-body-cap-bytes"),
        "1024",
        None,
        "answer bytes read",
    ),
];

/// The service verbs whose flags make the configuration.
pub const SERVICE_VERBS: [&str; 4] = ["up", "ingress", "worker", "notifier"];

/// `key`'s value in [`Config::default`], as the tables show it: plain text,
/// `on`/`off` for booleans, lists comma-separated; `None` when unset.
pub fn default_of(key: &str) -> Option<String> {
    let table: toml::Table = toml::to_string(&Config::default()).ok()?.parse().ok()?;
    let (section, name) = key.split_once('.')?;
    let value = table.get(section)?.as_table()?.get(name)?;
    Some(show(value))
}

fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::Boolean(true) => "on".into(),
        toml::Value::Boolean(false) => "off".into(),
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => items.iter().map(show).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The verbs among [`SERVICE_VERBS`] that take `flag`, and its variable.
pub fn flag_info(flag: &str) -> (Vec<&'static str>, Option<String>) {
    let cli = crate::Cli::command();
    let long = flag.trim_start_matches("--");
    let mut verbs = Vec::new();
    let mut env = None;
    for verb in SERVICE_VERBS {
        let Some(cmd) = cli.find_subcommand(verb) else {
            continue;
        };
        if let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(long)) {
            verbs.push(verb);
            env = env.or_else(|| arg.get_env().map(|e| e.to_string_lossy().into_owned()));
        }
    }
    (verbs, env)
}

fn cell_code(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("`{s}`")
    }
}

fn default_cell(setting: &Setting) -> String {
    match (setting.default, default_of(setting.key)) {
        (Some(note), _) => note.to_owned(),
        (None, Some(value)) => value,
        (None, None) => "unset".to_owned(),
    }
}

fn flag_cell(setting: &Setting) -> (String, String) {
    let Some(flag) = setting.flag else {
        return (String::new(), String::new());
    };
    let (verbs, env) = flag_info(flag);
    let mut cell = cell_code(flag);
    if !verbs.is_empty() && verbs.len() < SERVICE_VERBS.len() {
        cell.push_str(&format!(" ({})", verbs.join(", ")));
    }
    (cell, env.as_deref().map(cell_code).unwrap_or_default())
}

/// Whether a key is an identity setting (`[auth]`, `[socket]`): the README's
/// identity section has its own table of them.
pub fn is_identity(key: &str) -> bool {
    key.starts_with("auth.") || key.starts_with("socket.")
}

/// The README's tables: `"config"` (every key but the identity ones: flag,
/// variable, file key, default, what) or `"identity"` (flag, variable, default,
/// what).
///
/// # Panics
/// Never for these two names; any other name is a programming error.
pub fn markdown(table: &str) -> String {
    let mut out = String::new();
    match table {
        "config" => {
            out.push_str("| flag | env | file key | default | |\n|---|---|---|---|---|\n");
            out.push_str(
                "| `--config` | `HOLDPOINT_CONFIG` | | | the TOML file (also `holdpoint config`) |\n",
            );
            for st in SETTINGS.iter().filter(|st| !is_identity(st.key)) {
                let (flag, env) = flag_cell(st);
                out.push_str(&format!(
                    "| {flag} | {env} | `{}` | {} | {} |\n",
                    st.key,
                    default_cell(st),
                    st.about
                ));
            }
        }
        "identity" => {
            out.push_str("| flag | env | file key | default | |\n|---|---|---|---|---|\n");
            for st in SETTINGS.iter().filter(|st| is_identity(st.key)) {
                let (flag, env) = flag_cell(st);
                out.push_str(&format!(
                    "| {flag} | {env} | `{}` | {} | {} |\n",
                    st.key,
                    default_cell(st),
                    st.about
                ));
            }
        }
        other => panic!("no table {other:?}"),
    }
    out
}

#[cfg(test)]
mod tests;
