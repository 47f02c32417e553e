//! NATS permissions for one organisation's own users, built from the topology's
//! names so they follow it: what `holdpoint nats-config --org <org> --role …`
//! prints and `ops/nats/holdpoint.conf`'s tenant blocks hold.
//!
//! Two roles, both scoped by the organisation's subject token
//! ([`holdpoint_domain::subject_token`]):
//!
//! - [`Topology::org_runtime_permissions`]: an agent runtime of that organisation
//!   (`holdpoint-client`): publishes only the runtime verbs ([`RUNTIME_VERBS`]) on
//!   `hp.cmd.<org>.>`, reads its own interaction and session records, stored
//!   outcomes, and follows only `hp.evt.<org>.>`. Never a person's verb (`answer`,
//!   `message`) nor `expire`, which only the server's schedules send.
//! - [`Topology::org_events_permissions`]: a streaming consumer of that
//!   organisation's events, nothing else.
//!
//! How read scoping holds: a consumer on the events stream may only be created
//! through the named form `$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`
//! with the organisation's filter in the subject (nats-server 2.10+ refuses a
//! request whose body's filter differs from the subject's, and one with several
//! filters); the unnamed form, `DURABLE.CREATE` and foreign filters match no
//! permission. Pulling (`MSG.NEXT`) names a consumer, not a filter, and NATS
//! permissions cannot match part of a token, so it is allowed on any consumer of
//! the events stream except the known durables, which are denied by name (the
//! notifier's reads every organisation's events); every other consumer is an
//! ephemeral one with a random name. Replies come on the organisation's own
//! inbox prefix ([`org_inbox_prefix`]); the worker replies to no other
//! organisation's prefix ([`reply_allowed`]).

use holdpoint_domain::OrgId;

use crate::Topology;

/// The command verbs a runtime sends (`hp.cmd.<org>.<key>.<verb>`): sessions,
/// interactions, tool results, turns, deadlines, reassignments. Not `answer` or `message` (a
/// person's, through the ingress) and not `expire` (the server's schedules').
pub const RUNTIME_VERBS: [&str; 10] = [
    "session-open",
    "session-close",
    "session-end",
    "open",
    "close",
    "tool-result",
    "turn-start",
    "turn-finish",
    "deadline",
    "reassign",
];

/// One NATS user's permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// Subjects it may publish to (JetStream API calls are publishes).
    pub publish_allow: Vec<String>,
    /// Subjects it may not publish to even where an allow matches.
    pub publish_deny: Vec<String>,
    /// Subjects it may subscribe to.
    pub subscribe_allow: Vec<String>,
    /// The inbox prefix its client must connect with (async-nats
    /// `ConnectOptions::custom_inbox_prefix`, nats.go `nats.CustomInboxPrefix`).
    pub inbox_prefix: String,
}

/// `_INBOX.org-<org token>`: the inbox prefix of an organisation's own users, under
/// which its runtime's replies arrive. The services' inboxes are `_INBOX.<nuid>`,
/// whose second token never holds a `-`, so no organisation's prefix is theirs.
pub fn org_inbox_prefix(org: &OrgId) -> String {
    format!("_INBOX.org-{}", org.token())
}

/// Whether the worker may reply a command of `org` to `reply` (its `Hp-Reply-To`):
/// an inbox (`_INBOX.…`), and, when it is an organisation's own prefix
/// (`_INBOX.org-…`), that organisation's. So a runtime cannot have the worker
/// write into a stream, nor into another organisation's inbox.
pub fn reply_allowed(reply: &str, org: &OrgId) -> bool {
    let Some(rest) = reply.strip_prefix("_INBOX.") else {
        return false;
    };
    let first = rest.split('.').next().unwrap_or("");
    if first.starts_with("org-") {
        let own = org_inbox_prefix(org);
        return reply
            .strip_prefix(own.as_str())
            .is_some_and(|tail| tail.starts_with('.') && tail.len() > 1);
    }
    !first.is_empty()
}

impl Topology {
    /// Every stream Holdpoint keeps, buckets' streams (`KV_<bucket>`) included:
    /// what [`Bus::setup`](crate::Bus::setup) and [`Bus::attach`](crate::Bus::attach)
    /// look up.
    pub fn stream_names(&self) -> Vec<String> {
        let mut names = vec![
            self.commands_stream(),
            self.events_stream(),
            self.lanes_stream(),
            self.audit_stream(),
        ];
        for bucket in [
            self.state_bucket(),
            self.outcomes_bucket(),
            self.presence_bucket(),
            self.webhooks_bucket(),
            self.webhook_delivered_bucket(),
        ] {
            names.push(format!("KV_{bucket}"));
        }
        names.push(self.webhook_queue_stream());
        names.push(self.webhook_attempts_stream());
        names
    }

    /// The durable consumers of the events stream, which an organisation's users
    /// may neither pull from nor create or update: the notifier's.
    pub fn events_durables(&self) -> Vec<String> {
        vec![self.notifier_consumer()]
    }

    /// Following `org`'s events: create named consumers filtered to its events,
    /// pull from them; never the durables.
    fn follow_grants(&self, org: &OrgId) -> (Vec<String>, Vec<String>) {
        let events = self.events_stream();
        let allow = vec![
            format!(
                "$JS.API.CONSUMER.CREATE.{events}.*.{}",
                self.org_events_filter(org)
            ),
            format!("$JS.API.CONSUMER.MSG.NEXT.{events}.*"),
        ];
        let mut deny = Vec::new();
        for durable in self.events_durables() {
            deny.push(format!("$JS.API.CONSUMER.CREATE.{events}.{durable}.>"));
            deny.push(format!("$JS.API.CONSUMER.MSG.NEXT.{events}.{durable}"));
        }
        (allow, deny)
    }

    /// An agent runtime of `org` (see the module docs).
    pub fn org_runtime_permissions(&self, org: &OrgId) -> Permissions {
        let token = org.token();
        let sp = &self.subject_prefix;
        let mut allow: Vec<String> = RUNTIME_VERBS
            .iter()
            .map(|verb| format!("{sp}.cmd.{token}.*.{verb}"))
            .collect();
        // Bus::attach looks every stream up (it creates none: refused).
        allow.extend(
            self.stream_names()
                .into_iter()
                .map(|s| format!("$JS.API.STREAM.INFO.{s}")),
        );
        // Its own records, read by key with the key in the subject (direct get):
        // an interaction's task, to route a close or a tool result; a session or
        // lane, for a recorded outcome.
        let state = self.state_bucket();
        for kind in ["int", "ses"] {
            allow.push(format!(
                "$JS.API.DIRECT.GET.KV_{state}.$KV.{state}.{kind}.{token}.>"
            ));
        }
        // Stored outcomes of duplicate publishes, by command id (a digest naming
        // the organisation; the key holds no organisation token to scope by).
        let outcomes = self.outcomes_bucket();
        allow.push(format!("$JS.API.DIRECT.GET.KV_{outcomes}.$KV.{outcomes}.*"));
        let (follow, deny) = self.follow_grants(org);
        allow.extend(follow);
        let inbox_prefix = org_inbox_prefix(org);
        Permissions {
            publish_allow: allow,
            publish_deny: deny,
            subscribe_allow: vec![format!("{inbox_prefix}.>")],
            inbox_prefix,
        }
    }

    /// A streaming consumer of `org`'s events: core subscriptions on
    /// `hp.evt.<org>.>`, or consumers of the events stream filtered to it.
    pub fn org_events_permissions(&self, org: &OrgId) -> Permissions {
        let (allow, deny) = self.follow_grants(org);
        let inbox_prefix = org_inbox_prefix(org);
        Permissions {
            publish_allow: allow,
            publish_deny: deny,
            subscribe_allow: vec![self.org_events_filter(org), format!("{inbox_prefix}.>")],
            inbox_prefix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(s: &str) -> OrgId {
        OrgId::parse(s).expect("org")
    }

    #[test]
    fn replies_go_to_inboxes_and_to_no_other_organisations_prefix() {
        let acme = org("acme");
        assert!(reply_allowed("_INBOX.abcDEF123.7", &acme));
        assert!(reply_allowed("_INBOX.org-acme.abc.7", &acme));
        assert!(!reply_allowed("_INBOX.org-beta.abc.7", &acme));
        assert!(!reply_allowed("_INBOX.org-acmex.abc.7", &acme));
        assert!(!reply_allowed("_INBOX.org-acme", &acme));
        assert!(!reply_allowed("_INBOX.", &acme));
        assert!(!reply_allowed("hp.cmd.acme.t.open", &acme));
        assert!(!reply_allowed("$KV.HP_INTERACTIONS.acme.x", &acme));
        // An id that is no plain token has its base64url token in the prefix.
        let odd = org("acme/corp");
        assert!(reply_allowed(
            &format!("{}.x.1", org_inbox_prefix(&odd)),
            &odd
        ));
        assert!(!reply_allowed("_INBOX.org-acme/corp.x.1", &odd));
    }

    #[test]
    fn a_runtime_publishes_its_organisations_runtime_verbs_only() {
        let p = Topology::default().org_runtime_permissions(&org("acme"));
        let cmds: Vec<_> = p
            .publish_allow
            .iter()
            .filter(|s| s.starts_with("hp.cmd."))
            .collect();
        assert_eq!(cmds.len(), RUNTIME_VERBS.len());
        assert!(cmds.iter().all(|s| s.starts_with("hp.cmd.acme.*.")));
        for person in ["answer", "message", "expire"] {
            assert!(
                !p.publish_allow
                    .iter()
                    .any(|s| s.ends_with(&format!(".{person}"))),
                "{person} granted"
            );
        }
        assert!(
            !p.publish_allow
                .iter()
                .any(|s| s.contains('>') && s.starts_with("hp."))
        );
        assert!(
            p.publish_allow
                .contains(&"$JS.API.CONSUMER.CREATE.HP_EVENTS.*.hp.evt.acme.>".to_owned())
        );
        assert!(
            p.publish_deny
                .contains(&"$JS.API.CONSUMER.MSG.NEXT.HP_EVENTS.HP_NOTIFIER".to_owned())
        );
        assert_eq!(p.subscribe_allow, vec!["_INBOX.org-acme.>".to_owned()]);
    }
}
