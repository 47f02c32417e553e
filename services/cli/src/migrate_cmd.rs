//! `holdpoint migrate`: brings a store of an older format to this release's
//! ([`holdpoint_bus::migrate`] says what it does, step by step).

use clap::Args;
use holdpoint_bus::migrate::{Migration, migrate};

use crate::status::StoreArgs;

/// `holdpoint migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Where the store is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the migration and prints what it did.
///
/// # Errors
/// When NATS cannot be reached, a worker is still running, or the migration
/// fails (it is safe to run again).
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let client = holdpoint_bus::connect(&args.store.nats_url, "holdpoint-migrate").await?;
    let done = migrate(client.clone(), args.store.topology()).await?;
    client.flush().await?;
    let text = match &done {
        Migration::NoStore => "migrate: no Holdpoint store here; nothing to do".to_owned(),
        Migration::Current => format!(
            "migrate: the store has format {} already; nothing to do",
            holdpoint_bus::STORE_FORMAT
        ),
        Migration::Migrated(r) if args.json => {
            crate::terminal::json_pretty(&serde_json::json!({"migrated": r}))
        }
        Migration::Migrated(r) => format!(
            "migrate: the store has format {}: {} records written ({} were already), \
             {} owed effects committed ({} were stored already), {} deadline schedules and {} \
             waiting commands moved; \
             the format-1 buckets HP_INTERACTIONS, HP_TASKS, HP_SESSIONS, HP_RULES and \
             HP_CHECKPOINTS are no longer read: delete them once you have checked the store",
            holdpoint_bus::STORE_FORMAT,
            r.records,
            r.already,
            r.effects,
            r.already_stored,
            r.schedules,
            r.commands
        ),
    };
    println!("{text}");
    Ok(())
}
