//! `holdpoint runtime …`: the runtime's side from a shell, through the client
//! library, for trying Holdpoint out with curl and for operators. Each verb prints
//! the id it opened (or the outcome) and exits non-zero on a refusal.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use holdpoint_client::{AgentManifest, Expiry, HoldCall, Placement, Runtime};
use holdpoint_domain::{Assignees, CallResult, CloseReason, OnExpiry, QuestionSpec, SessionMode};

/// Where and as whom the runtime acts.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// The NATS server to publish commands to (`nats://host:port`).
    #[arg(
        long,
        env = "HOLDPOINT_NATS_URL",
        default_value = "nats://127.0.0.1:4290"
    )]
    pub nats_url: String,
    /// The organisation the runtime acts in (1 to 128 printable ASCII characters).
    #[arg(long, env = "HOLDPOINT_ORG", default_value = "acme")]
    pub org: String,
    /// What to do.
    #[command(subcommand)]
    pub verb: RuntimeVerb,
}

/// Where an interaction lives.
#[derive(Debug, Clone, Args)]
pub struct PlaceArgs {
    /// The session the interaction waits in (1 to 128 printable ASCII characters).
    #[arg(long)]
    pub session: String,
    /// The session's lane the interaction is on.
    #[arg(long, default_value = "main")]
    pub lane: String,
    /// A2A task id.
    #[arg(long)]
    pub task: String,
    /// A2A context id.
    #[arg(long, default_value = "ctx-1")]
    pub context: String,
    /// The blocked tool call's id.
    #[arg(long)]
    pub call: String,
    /// Deadline as RFC 3339 (`2026-05-01T12:00:00Z`); refused on a nats-server
    /// without message schedules.
    #[arg(long, conflicts_with = "expires_in")]
    pub expires_at: Option<String>,
    /// Deadline in seconds from the opening.
    #[arg(long)]
    pub expires_in: Option<u64>,
    /// What the deadline decides: `decide` (the kind's default) or `close`.
    #[arg(long, default_value = "decide")]
    pub on_expiry: String,
    #[command(flatten)]
    pub assign: AssignArgs,
    /// A person added to the assignees at the deadline's warning stage (README
    /// "Escalation"); repeat for more (at most 32). Needs a deadline.
    #[arg(long = "escalate-person", value_name = "SUB")]
    pub escalate_people: Vec<String>,
    /// A group added to the assignees at the deadline's warning stage; repeat for
    /// more (at most 32). Needs a deadline.
    #[arg(long = "escalate-group", value_name = "GROUP")]
    pub escalate_groups: Vec<String>,
}

/// Who may answer (README "Assignees"); neither option: anyone of the organisation.
#[derive(Debug, Clone, Default, Args)]
pub struct AssignArgs {
    /// A person who may answer (a token's `sub`); repeat for more (at most 32).
    #[arg(long = "assign-person", value_name = "SUB")]
    pub people: Vec<String>,
    /// A group who may answer (from the configured groups claim); repeat for more
    /// (at most 32).
    #[arg(long = "assign-group", value_name = "GROUP")]
    pub groups: Vec<String>,
}

impl AssignArgs {
    /// The assignees these options name; `None` when they name nobody.
    ///
    /// # Errors
    /// A name that is not a person id or a group name.
    pub fn assignees(&self) -> anyhow::Result<Option<Assignees>> {
        if self.people.is_empty() && self.groups.is_empty() {
            return Ok(None);
        }
        let people: Vec<&str> = self.people.iter().map(String::as_str).collect();
        let groups: Vec<&str> = self.groups.iter().map(String::as_str).collect();
        Ok(Some(
            Assignees::of(&people, &groups).context("--assign-person / --assign-group")?,
        ))
    }
}

/// What the runtime can do from a shell: the commands `holdpoint-client` sends.
#[derive(Debug, Clone, Subcommand)]
pub enum RuntimeVerb {
    /// Open a session.
    Session {
        /// The session's id (1 to 128 printable ASCII characters).
        #[arg(long)]
        session: String,
        /// `blocking` or `product`.
        #[arg(long, default_value = "blocking")]
        mode: String,
    },
    /// Hold a tool call for approval.
    Hold {
        /// Placement.
        #[command(flatten)]
        at: PlaceArgs,
        /// Effect id (the interaction id).
        #[arg(long)]
        effect: String,
        /// The MCP server of the held call (a one-line name, at most 200 characters).
        #[arg(long)]
        server: String,
        /// The tool of the held call (a one-line name, at most 200 characters).
        #[arg(long)]
        tool: String,
        /// Arguments as JSON.
        #[arg(long, default_value = "{}")]
        arguments: String,
        /// Why it is held.
        #[arg(long)]
        reason: Option<String>,
        /// The agent whose call this is (printable ASCII, no spaces): rules
        /// remembered with scope `agent` match on it, in any session.
        #[arg(long)]
        agent: Option<String>,
        /// Let the person edit the arguments before approving (README "Edit, then
        /// approve"): only for an executor that runs the released arguments.
        #[arg(long)]
        editable: bool,
        /// How many distinct people must approve before the call is released, 2 to
        /// 5 (README "Two-person approvals"); left out, one person decides.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
        approvals: Option<u8>,
    },
    /// ask_user: questions as JSON, e.g. `[{"text":"Which?","options":["a","b"]}]`.
    Ask {
        /// Placement.
        #[command(flatten)]
        at: PlaceArgs,
        /// The questions (JSON array of {text, options, multiple?, allowText?}).
        #[arg(long)]
        questions: String,
        /// The question id (a UUID; default: a new one).
        #[arg(long)]
        id: Option<uuid::Uuid>,
    },
    /// request_connection for the agent described by an AGENT.md.
    Connect {
        /// Placement.
        #[command(flatten)]
        at: PlaceArgs,
        /// The agent's AGENT.md (connections must be on).
        #[arg(long)]
        agent: PathBuf,
        /// The app the agent wants connected (cut at 80 characters).
        #[arg(long)]
        app: String,
        /// Why the agent wants it (cut at 280 characters).
        #[arg(long)]
        reason: String,
    },
    /// Close a pending interaction (the turn was interrupted).
    Close {
        /// The interaction to close.
        id: String,
    },
    /// Set, move or clear (neither option) a pending interaction's deadline.
    Deadline {
        /// The interaction whose deadline changes.
        id: String,
        /// New deadline as RFC 3339.
        #[arg(long, conflicts_with = "expires_in")]
        expires_at: Option<String>,
        /// New deadline in seconds from now.
        #[arg(long)]
        expires_in: Option<u64>,
    },
    /// Change who may answer a pending interaction (neither option: anyone of the
    /// organisation again).
    Reassign {
        /// The interaction whose assignees change.
        id: String,
        #[command(flatten)]
        assign: AssignArgs,
    },
    /// Report a released call's result (JSON output).
    ToolResult {
        /// The released call's effect id (its approval's interaction id).
        id: String,
        /// Output as JSON.
        #[arg(long, default_value = "null")]
        output: String,
    },
}

fn place(a: &PlaceArgs) -> anyhow::Result<Placement> {
    let on_expiry = match a.on_expiry.as_str() {
        "decide" => OnExpiry::Decide,
        "close" => OnExpiry::Close,
        other => anyhow::bail!("--on-expiry is decide or close, not {other:?}"),
    };
    let expiry = Expiry {
        expires_at: parse_time(a.expires_at.as_deref())?,
        expires_in: a.expires_in,
        on_expiry,
    };
    let placement = Placement::new(&a.session, &a.lane, &a.task, &a.context)?.with_expiry(expiry);
    let placement = match a.assign.assignees()? {
        Some(assignees) => placement.assigned_to(assignees),
        None => placement,
    };
    if a.escalate_people.is_empty() && a.escalate_groups.is_empty() {
        return Ok(placement);
    }
    let people: Vec<&str> = a.escalate_people.iter().map(String::as_str).collect();
    let groups: Vec<&str> = a.escalate_groups.iter().map(String::as_str).collect();
    let escalation =
        Assignees::of(&people, &groups).context("--escalate-person / --escalate-group")?;
    Ok(placement.escalate_to(escalation))
}

fn accepted_word(a: holdpoint_domain::Accepted) -> &'static str {
    match a {
        holdpoint_domain::Accepted::Unchanged => "unchanged",
        _ => "reassigned",
    }
}

fn parse_time(s: Option<&str>) -> anyhow::Result<Option<time::OffsetDateTime>> {
    s.map(|s| {
        holdpoint_domain::timestamp::parse(s)
            .with_context(|| format!("--expires-at {s:?} is not an RFC 3339 time"))
    })
    .transpose()
}

/// Runs a runtime verb.
///
/// # Errors
/// When NATS is unreachable, the input is invalid, or the worker refuses.
pub async fn run(args: RuntimeArgs) -> anyhow::Result<()> {
    let rt = Runtime::connect(&args.nats_url, &args.org).await?;
    match args.verb {
        RuntimeVerb::Session { session, mode } => {
            let mode = match mode.as_str() {
                "blocking" => SessionMode::Blocking,
                "product" => SessionMode::Product,
                other => anyhow::bail!("--mode is blocking or product, not {other}"),
            };
            rt.open_session(&session, mode).await?;
            println!("{session}");
        }
        RuntimeVerb::Hold {
            at,
            effect,
            server,
            tool,
            arguments,
            reason,
            agent,
            editable,
            approvals,
        } => {
            let arguments = serde_json::from_str(&arguments).context("--arguments is not JSON")?;
            let mut placement = place(&at)?;
            if let Some(agent) = &agent {
                placement = placement
                    .for_agent(agent)
                    .with_context(|| format!("--agent {agent:?}"))?;
            }
            let id = rt
                .hold_for_approval(
                    &placement,
                    HoldCall {
                        effect_id: effect,
                        call_id: at.call.clone(),
                        server,
                        tool,
                        arguments,
                        reason,
                        editable,
                        approvals,
                    },
                )
                .await?;
            println!("{id}");
        }
        RuntimeVerb::Ask { at, questions, id } => {
            let questions: Vec<QuestionSpec> = serde_json::from_str(&questions)
                .context("--questions is not a JSON array of questions")?;
            let id = rt.ask_user(&place(&at)?, &at.call, questions, id).await?;
            println!("{id}");
        }
        RuntimeVerb::Connect {
            at,
            agent,
            app,
            reason,
        } => {
            let manifest = AgentManifest::from_path(&agent)?;
            let id = rt
                .request_connection(&manifest, &place(&at)?, &at.call, &app, &reason, None)
                .await?;
            println!("{id}");
        }
        RuntimeVerb::Close { id } => {
            rt.close_interaction(&id, CloseReason::Interrupted).await?;
            println!("closed {id}");
        }
        RuntimeVerb::Deadline {
            id,
            expires_at,
            expires_in,
        } => {
            let expiry = Expiry {
                expires_at: parse_time(expires_at.as_deref())?,
                expires_in,
                on_expiry: OnExpiry::Decide,
            };
            rt.set_deadline(&id, expiry).await?;
            println!("deadline set for {id}");
        }
        RuntimeVerb::Reassign { id, assign } => {
            let accepted = rt.reassign(&id, assign.assignees()?).await?;
            println!("{} {id}", accepted_word(accepted));
        }
        RuntimeVerb::ToolResult { id, output } => {
            let output = serde_json::from_str(&output).context("--output is not JSON")?;
            rt.report_tool_result(&id, CallResult::Ok { output })
                .await?;
            println!("finished {id}");
        }
    }
    Ok(())
}
