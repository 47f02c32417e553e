//! The `holdpoint` command.
//!
//! - [`Cli`]: the verbs, and [`run`], which carries one out. `up` runs everything
//!   locally (a nats-server of its own unless `--nats-url` is given, the ingress,
//!   the worker and the notifier in one process); `ingress`, `worker` and
//!   `notifier` run one service each against an existing NATS; `demo` brings
//!   everything up, plays a runtime and a person, and prints each event.
//! - [`args`]: the services' arguments (clap). Nested as the configuration is,
//!   they serialize to its keys and are its top layer.
//! - [`config`]: the services' configuration ([`config::Config`]): defaults, a TOML
//!   file, `HOLDPOINT_*` environment variables, flags; validated at start;
//!   `holdpoint config` prints it with secrets redacted.
//! - [`compose`]: the configuration turned into each service's own (topology,
//!   ingress, worker, notifier, identity).
//! - [`serve`]: `up`, `ingress`, `worker`, `notifier`, the shutdown signals, logs.
//! - [`localnats`]: finds and starts a local nats-server.
//! - [`demo`]: the demo script.
//! - [`devtoken`]: `holdpoint dev-token`, a local signing key and tokens for the
//!   quick start.
//! - [`runtime_cmd`]: `holdpoint runtime …`, the runtime's side from a shell.
//! - [`operator`]: `holdpoint pending | show | answer | approve | rules | audit |
//!   tail`, a person's and an operator's side over the HTTP API.
//! - [`webhooks_cmd`]: `holdpoint webhooks …`, an organisation's webhook endpoints
//!   over the HTTP API; `holdpoint notifier` runs the deliveries
//!   (`holdpoint_notifier`), and `up` runs them too.
//! - [`natsconfig`]: `holdpoint nats-config`, the NATS user of one organisation's
//!   runtime or events reader.
//! - [`status`]: `holdpoint status`, streams, partitions and their workers,
//!   backlogs and dead letters, by the topology's names.
//! - [`health`]: `holdpoint health`, a service's readiness from its admin listener
//!   (the container image's health check).
//! - [`terminal`]: what is printed never holds a raw control character.
//!
//! `main.rs` only parses arguments and calls [`run`].

pub mod args;
pub mod backup;
pub mod compose;
pub mod config;
pub mod demo;
pub mod devtoken;
pub mod health;
pub mod localnats;
pub mod migrate_cmd;
pub mod natsconfig;
pub mod operator;
pub mod runtime_cmd;
pub mod serve;
pub mod status;
pub mod terminal;
pub mod webhooks_cmd;

use clap::{Parser, Subcommand};

use crate::args::{
    DemoArgs, DevTokenArgs, IngressArgs, NotifierArgs, SetupArgs, UpArgs, WorkerArgs,
};
use crate::config::Service;
use crate::serve::init_tracing;

/// Holdpoint: people answer AI agents; each answer resolves exactly once.
#[derive(Debug, Parser)]
#[command(name = "holdpoint", version, about)]
pub struct Cli {
    /// The verb.
    #[command(subcommand)]
    pub command: Verb,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Run everything locally: nats-server (unless --nats-url), ingress and worker.
    Up(UpArgs),
    /// Run the HTTP ingress against an existing NATS.
    Ingress(IngressArgs),
    /// Run a worker against an existing NATS (run as many as you like).
    Worker(WorkerArgs),
    /// Create or update every stream, bucket and consumer Holdpoint uses (with a
    /// NATS user allowed to: `setup` in ops/nats/holdpoint.conf), then exit. Run it
    /// once per deploy that changes the topology; the services only bind.
    Setup(SetupArgs),
    /// Run the webhook notifier against an existing NATS (deliver signed events to
    /// registered endpoints; run one or more).
    Notifier(NotifierArgs),
    /// Manage your organisation's webhook endpoints (HTTP, with --token).
    Webhooks(webhooks_cmd::WebhooksArgs),
    /// Print the effective configuration (defaults, file, environment, flags) as
    /// TOML, secrets redacted; fails like `up` would on an invalid one.
    Config(UpArgs),
    /// The main job: bring everything up, open an approval, a question and a
    /// connection, answer them over HTTP, and print every event.
    Demo(DemoArgs),
    /// Act as a runtime: open sessions and interactions, close them, report results.
    Runtime(runtime_cmd::RuntimeArgs),
    /// Local quick start only: create a development signing key and JWKS (once) and
    /// print a token for a person of an organisation.
    DevToken(DevTokenArgs),
    /// List the pending interactions you can answer (HTTP, with --token).
    Pending(operator::PendingArgs),
    /// Show one interaction: its questions and options, or the held call.
    Show(operator::ShowArgs),
    /// Answer a question: one --answer per question, e.g. --answer 0 --answer "2:text".
    Answer(operator::AnswerArgs),
    /// Approve a held call (or --deny it, with --reason).
    Approve(operator::ApproveArgs),
    /// Answer with a JSON value: a form's fields, a connection, a free value.
    Respond(operator::RespondArgs),
    /// List your organisation's remembered approval rules, or `rules revoke <id>`.
    Rules(operator::RulesArgs),
    /// Print your organisation's decision audit (approval decisions, rule changes).
    Audit(operator::AuditArgs),
    /// Follow your organisation's events as they happen (optionally one task or type).
    Tail(operator::TailArgs),
    /// Show the streams, the command partitions and their workers, consumer
    /// backlogs and dead letters (what the `nats` CLI would show, by Holdpoint's
    /// names).
    Status(status::StatusArgs),
    /// Print a NATS user for one organisation (its agent runtime, or its events
    /// reader) to add to the servers' configuration.
    NatsConfig(natsconfig::NatsConfigArgs),
    /// Bring a store written by an older release (store format 1: KV buckets with
    /// outboxes) to this release's format, with every Holdpoint process stopped;
    /// safe to run again.
    Migrate(migrate_cmd::MigrateArgs),
    /// Save every stream and bucket of the topology (JetStream snapshots, with a
    /// checksummed manifest) into a directory; take it with the services stopped.
    Backup(backup::BackupArgs),
    /// Put a `backup` back into a JetStream that has none of Holdpoint's streams.
    Restore(backup::RestoreArgs),
    /// Ask a running service's admin listener whether it is ready (GET /readyz):
    /// exit 0 when it is (the container image's health check).
    Health(health::HealthArgs),
}

/// Runs the parsed command line.
///
/// # Errors
/// Whatever the verb fails with.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Verb::Up(args) => serve::up(args).await,
        Verb::Ingress(args) => serve::ingress(args.config()?).await,
        Verb::Worker(args) => {
            let failpoint = args.worker.failpoint;
            serve::worker(args.config()?, failpoint).await
        }
        Verb::Notifier(args) => serve::notifier(args.config()?).await,
        Verb::Setup(args) => serve::setup(args.config()?).await,
        Verb::Webhooks(args) => webhooks_cmd::run(args).await,
        Verb::Config(args) => {
            print!("{}", args.config(Service::Up)?.to_toml()?);
            Ok(())
        }
        Verb::DevToken(args) => {
            let dir = args.dir.clone().unwrap_or_else(devtoken::default_dir);
            let key = devtoken::DevKey::load_or_create(&dir)?;
            println!(
                "{}",
                key.token(&args.org, &args.person, &args.org_claim, args.ttl_secs)?
            );
            eprintln!(
                "dev-token: signed with {} (JWKS {}); `holdpoint up --dev-jwt` verifies it",
                dir.join("signing-key.pk8").display(),
                key.jwks.display()
            );
            Ok(())
        }
        Verb::Pending(args) => operator::pending(args).await,
        Verb::Show(args) => operator::show(args).await,
        Verb::Answer(args) => operator::answer(args).await,
        Verb::Approve(args) => operator::approve(args).await,
        Verb::Respond(args) => operator::respond(args).await,
        Verb::Tail(args) => operator::tail(args).await,
        Verb::Rules(args) => operator::rules(args).await,
        Verb::Audit(args) => operator::audit(args).await,
        Verb::Health(args) => health::run(args).await,
        Verb::Backup(args) => backup::backup(args).await,
        Verb::Restore(args) => backup::restore(args).await,
        Verb::Status(args) => status::run(args).await,
        Verb::Migrate(args) => migrate_cmd::run(args).await,
        Verb::NatsConfig(args) => {
            print!("{}", natsconfig::run(&args)?);
            Ok(())
        }
        Verb::Runtime(args) => {
            init_tracing("warn");
            runtime_cmd::run(args).await
        }
        Verb::Demo(args) => {
            init_tracing("warn");
            demo::run(args).await
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn every_subcommand_is_a_valid_clap_command() {
        // clap checks a subcommand's arguments (unique names, valid groups) only
        // when that subcommand is parsed; this checks them all at once, so a flag
        // added to a shared group cannot break another verb unnoticed.
        super::Cli::command().debug_assert();
    }
}
