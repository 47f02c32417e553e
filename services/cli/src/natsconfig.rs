//! `holdpoint nats-config --org <org> --role runtime|events`: prints a NATS user
//! for one organisation, to add to the `HOLDPOINT` account's users in the
//! servers' configuration (`ops/nats/holdpoint.conf`).
//!
//! - `runtime`: that organisation's agent runtime may open and close sessions and
//!   interactions, report tool results and turns and move deadlines for its own
//!   organisation only (`hp.cmd.<org>.*.<runtime verb>`), read its own records and
//!   follow its own events; never answer (no person's verb), never `expire`.
//! - `events`: that organisation's streaming consumer reads its own events only.
//!
//! The permissions come from [`holdpoint_bus::permissions`], built from the
//! topology's names. `tests/integration/nats_permissions.rs` runs a nats-server
//! with the blocks this prints for `acme` (they are in `ops/nats/holdpoint.conf`,
//! and a test keeps them equal to this output) and proves what they stop.

use std::fmt::Write as _;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use holdpoint_bus::Topology;
use holdpoint_bus::permissions::Permissions;
use holdpoint_domain::OrgId;

/// Which of an organisation's users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrgRole {
    /// The organisation's agent runtime (holdpoint-client, `holdpoint runtime`).
    Runtime,
    /// A streaming consumer of the organisation's events.
    Events,
}

/// `holdpoint nats-config`.
#[derive(Debug, Clone, Args)]
pub struct NatsConfigArgs {
    /// The organisation (its id, as the identity provider's claim names it).
    #[arg(long)]
    pub org: String,
    /// Which user: `runtime` or `events`.
    #[arg(long, value_enum)]
    pub role: OrgRole,
    /// The user's name (default `runtime-<org>` or `events-<org>`, with the
    /// organisation's subject token).
    #[arg(long)]
    pub user: Option<String>,
    /// The password (default: a random one, printed in the block; bcrypt it for
    /// production, see ops/nats/README.md).
    #[arg(long, env = "HOLDPOINT_NATS_USER_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
}

/// The user block for `args`.
///
/// # Errors
/// When the organisation is not a valid id or no random password can be made.
pub fn run(args: &NatsConfigArgs) -> anyhow::Result<String> {
    let org = OrgId::parse(args.org.clone()).context("--org")?;
    let password = match &args.password {
        Some(p) => p.clone(),
        None => random_password()?,
    };
    Ok(render(
        &Topology::default(),
        &org,
        args.role,
        args.user.as_deref(),
        &password,
    ))
}

/// 24 random bytes as base64url (32 characters, no padding).
fn random_password() -> anyhow::Result<String> {
    use base64::Engine as _;
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("no randomness for a password"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The default user name of `role` for `org`.
pub fn default_user(org: &OrgId, role: OrgRole) -> String {
    match role {
        OrgRole::Runtime => format!("runtime-{}", org.token()),
        OrgRole::Events => format!("events-{}", org.token()),
    }
}

/// The NATS configuration block of `org`'s `role` user, with comments saying what
/// it may do and how its client connects.
pub fn render(
    topo: &Topology,
    org: &OrgId,
    role: OrgRole,
    user: Option<&str>,
    password: &str,
) -> String {
    let (perms, what) = match role {
        OrgRole::Runtime => (
            topo.org_runtime_permissions(org),
            "agent runtime: its own organisation's runtime commands, records and events; never an answer",
        ),
        OrgRole::Events => (
            topo.org_events_permissions(org),
            "events reader: its own organisation's events, nothing else",
        ),
    };
    let user = user.map_or_else(|| default_user(org, role), str::to_owned);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# organisation {}'s {what}.",
        quote_comment(org.as_str())
    );
    let _ = writeln!(
        out,
        "# Made by `holdpoint nats-config --org {} --role {}`; its client connects with",
        shell_word(org.as_str()),
        match role {
            OrgRole::Runtime => "runtime",
            OrgRole::Events => "events",
        }
    );
    let _ = writeln!(
        out,
        "# the inbox prefix {} (holdpoint-client sets it itself).",
        perms.inbox_prefix
    );
    out.push_str("{\n");
    let _ = writeln!(out, "  user: {}", conf_string(&user));
    let _ = writeln!(out, "  password: {}", conf_string(password));
    out.push_str("  permissions: {\n");
    write_permissions(&mut out, &perms);
    out.push_str("  }\n}\n");
    out
}

fn write_permissions(out: &mut String, p: &Permissions) {
    out.push_str("    publish: {\n");
    write_list(out, "allow", &p.publish_allow);
    if !p.publish_deny.is_empty() {
        write_list(out, "deny", &p.publish_deny);
    }
    out.push_str("    }\n    subscribe: {\n");
    write_list(out, "allow", &p.subscribe_allow);
    out.push_str("    }\n");
}

fn write_list(out: &mut String, key: &str, items: &[String]) {
    let _ = writeln!(out, "      {key}: [");
    for item in items {
        let _ = writeln!(out, "        {}", conf_string(item));
    }
    out.push_str("      ]\n");
}

/// A double-quoted string of the NATS configuration format (`"` and `\` escaped;
/// subjects and tokens never hold control characters).
fn conf_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An organisation id as it may stand in a comment line (no line breaks).
fn quote_comment(s: &str) -> String {
    crate::terminal::lines(s).replace(['\n', '\r'], " ")
}

/// An organisation id as one shell word (single-quoted unless it is plain).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", quote_comment(s).replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_names_the_user_the_prefix_and_only_its_organisations_subjects() {
        let acme = OrgId::parse("acme").expect("org");
        let block = render(&Topology::default(), &acme, OrgRole::Runtime, None, "pw\"x");
        assert!(block.contains("user: \"runtime-acme\""), "{block}");
        assert!(block.contains("password: \"pw\\\"x\""), "{block}");
        assert!(block.contains("_INBOX.org-acme"), "{block}");
        assert!(block.contains("\"hp.cmd.acme.*.open\""), "{block}");
        assert!(!block.contains("answer\""), "{block}");
        assert!(!block.contains("hp.cmd.*"), "{block}");
    }

    #[test]
    fn an_odd_organisation_id_is_its_subject_token_and_a_quoted_word() {
        let odd = OrgId::parse("acme/corp").expect("org");
        let block = render(&Topology::default(), &odd, OrgRole::Events, None, "pw");
        assert!(block.contains("--org 'acme/corp'"), "{block}");
        assert!(
            block.contains(&format!("hp.evt.{}.>", odd.token())),
            "{block}"
        );
        assert!(
            block.contains(&format!("events-{}", odd.token())),
            "{block}"
        );
    }
}
