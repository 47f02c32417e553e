//! Tenant isolation on the NATS side: `ops/nats/holdpoint.conf` gives each role a
//! user allowed only the subjects it needs. These tests run a nats-server with that
//! very file and prove that (a) the whole flow works with the role users (setup
//! creates the topology, the others only bind) and causes no permission violation
//! at all, (b, c) a tenant's streaming user reads its own organisation's events and
//! nothing else: no other organisation's events, no consumer without its
//! organisation's filter, no KV bucket, no shared inbox, no command; (d) an
//! organisation's runtime user (`holdpoint nats-config --role runtime`, whose
//! output the file holds, checked here too) runs its own interactions and cannot
//! open, close or finish another organisation's, read its events or records, nor
//! answer anything; and a service that finds a stream it may not update binds to
//! it as it is.
//!
//! A publish NATS refuses is dropped by the server, which tells the client with an
//! asynchronous `-ERR 'Permissions Violation …'`; a request then simply gets no
//! answer. So a refusal is checked twice: the violation arrives (naming the exact
//! subject), and nothing happened: no answer (where `setup` gets one), no consumer,
//! no stored message, no delivery before a later marker message.

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::{FutureExt as _, StreamExt as _};
use holdpoint_bus::{Bus, Topology};
use holdpoint_client::{EventFilter, Runtime};
use holdpoint_domain::{CallResult, Event, EventData, InteractionId, OrgId, SessionMode, State};
use holdpoint_ingress::{AppState, IdentityMode, IngressConfig};
use holdpoint_tests::nats::{
    NatsServer, NatsServerOptions, NatsUser, wait_bus_sourced, wait_for, workspace_root,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::{example_answer, hold_call, open_approval, open_question};

/// How long a refused request is given to (not) answer.
const REFUSED_WAIT: Duration = Duration::from_secs(1);
/// Deadline of everything that must happen.
const DEADLINE: Duration = Duration::from_secs(20);

fn config_file() -> PathBuf {
    workspace_root().join("ops/nats/holdpoint.conf")
}

/// A user of ops/nats/holdpoint.conf (development passwords are `<user>-dev-only`).
fn role(user: &str) -> NatsUser {
    NatsUser::new(user, format!("{user}-dev-only"))
}

/// A nats-server with ops/nats/holdpoint.conf; the harness probes it as `setup`.
async fn start_server() -> NatsServer {
    NatsServer::start_with(
        NatsServerOptions::default()
            .config_file(config_file())
            .user(role("setup")),
    )
    .await
}

/// The same topology for every role: their `Bus::setup` must find the streams as
/// `setup` made them, with nothing to update.
fn topo() -> Topology {
    Topology {
        ack_wait: Duration::from_secs(2),
        ..Topology::default()
    }
}

/// Connects as `user` through `holdpoint_bus::connect` (credentials in the URL).
async fn client_as(server: &NatsServer, user: &str) -> async_nats::Client {
    holdpoint_bus::connect(&server.url_as(&role(user)), &format!("holdpoint-{user}"))
        .await
        .unwrap_or_else(|e| panic!("connect as {user}: {e}"))
}

/// Connects as `user` and runs `Bus::setup`, as every Holdpoint process does.
async fn bus_as(server: &NatsServer, user: &str) -> Bus {
    Bus::setup(client_as(server, user).await, topo())
        .await
        .unwrap_or_else(|e| panic!("Bus::setup as {user}: {e}"))
}

/// The lines of the server log about permission violations, from byte `from` on.
fn violations(server: &NatsServer, from: usize) -> Vec<String> {
    let log = server.log_contents();
    log.get(from..)
        .unwrap_or("")
        .lines()
        .filter(|l| l.contains("Violation"))
        .map(str::to_owned)
        .collect()
}

struct Worker {
    token: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl Worker {
    fn start(bus: Bus) -> Worker {
        let token = CancellationToken::new();
        let handle = tokio::spawn(holdpoint_worker::run(
            bus,
            holdpoint_worker::WorkerConfig::default(),
            token.clone(),
        ));
        Worker { token, handle }
    }

    async fn stop(self) {
        self.token.cancel();
        self.handle
            .await
            .expect("worker task")
            .expect("worker ran without error");
    }
}

/// Runs the HTTP ingress (API and admin listeners) on `bus`; returns the base URLs
/// and the token that stops it.
async fn start_ingress(bus: Bus) -> (String, String, CancellationToken) {
    let state = AppState::new(
        bus,
        IngressConfig {
            identity: IdentityMode::insecure_dev_headers(),
            ..IngressConfig::default()
        },
    )
    .await
    .expect("ingress state");
    let token = CancellationToken::new();
    let (base, admin_base) = holdpoint_tests::app::serve_ingress(state, &token).await;
    (base, admin_base, token)
}

/// A request as person `ana` of `acme` (development identity headers).
async fn ana(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = http
        .request(method, url)
        .header("X-Holdpoint-Org", "acme")
        .header("X-Holdpoint-Person", "ana");
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.expect("http");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Every event of `filter` in HP_EVENTS, read by `setup` (the reference).
async fn events_as_setup(admin: &Bus, filter: &str) -> Vec<(String, Event)> {
    let stream = admin
        .js
        .get_stream(admin.topo.events_stream())
        .await
        .expect("events stream");
    let c: consumer::Consumer<consumer::pull::OrderedConfig> = stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter.to_owned(),
            ..Default::default()
        })
        .await
        .expect("consumer");
    read_consumer(c).await
}

/// Reads an ordered consumer to its end (as pending said at creation).
async fn read_consumer(
    c: consumer::Consumer<consumer::pull::OrderedConfig>,
) -> Vec<(String, Event)> {
    let pending = c.cached_info().num_pending;
    let mut out = Vec::new();
    if pending == 0 {
        return out;
    }
    let mut messages = c.messages().await.expect("messages");
    while let Some(m) = tokio::time::timeout(DEADLINE, messages.next())
        .await
        .expect("read timed out")
    {
        let m = m.expect("message");
        out.push((
            m.subject.to_string(),
            serde_json::from_slice(&m.payload).expect("an event"),
        ));
        if m.info().map(|i| i.pending).unwrap_or(0) == 0 {
            break;
        }
    }
    out
}

/// The server errors a client received (permission violations among them).
struct ServerErrors(mpsc::UnboundedReceiver<String>);

impl ServerErrors {
    /// Waits until the violation for `kind` (`Publish` or `Subscription`) to exactly
    /// `subject` arrives; panics at the deadline.
    async fn expect(&mut self, kind: &str, subject: &str) {
        let wanted = format!("permissions violation for {kind} to \"{subject}\"");
        let found = tokio::time::timeout(DEADLINE, async {
            while let Some(e) = self.0.recv().await {
                if e.to_lowercase().contains(&wanted.to_lowercase()) {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(found, Ok(true)),
            "no \"{wanted}\" error arrived in time"
        );
    }
}

/// Connects as `user` with its own inbox prefix (if any), collecting server errors.
async fn raw_client(
    server: &NatsServer,
    user: &str,
    inbox_prefix: Option<&str>,
) -> (async_nats::Client, ServerErrors) {
    let (tx, rx) = mpsc::unbounded_channel();
    let r = role(user);
    let mut options = async_nats::ConnectOptions::with_user_and_password(r.user, r.password)
        .request_timeout(Some(REFUSED_WAIT))
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                if let async_nats::Event::ServerError(e) = event {
                    let _ = tx.send(e.to_string());
                }
            }
        });
    if let Some(p) = inbox_prefix {
        options = options.custom_inbox_prefix(p);
    }
    let client = options.connect(server.url()).await.expect("connect");
    (client, ServerErrors(rx))
}

/// A JetStream publish that must get no PubAck.
async fn assert_publish_refused(js: &jetstream::Context, subject: &str) {
    let body = json!({"org": "acme", "command": {"type": "answer"}}).to_string();
    let result = match js.publish(subject.to_owned(), body.into()).await {
        Ok(ack) => tokio::time::timeout(REFUSED_WAIT * 2, ack)
            .await
            .ok()
            .and_then(Result::ok),
        Err(_) => None,
    };
    assert!(
        result.is_none(),
        "{subject}: JetStream acknowledged a publish that must be refused: {result:?}"
    );
}

/// `last_sequence` of a stream, as `setup` sees it.
async fn last_sequence(admin: &Bus, stream: &str) -> u64 {
    let mut s = admin.js.get_stream(stream).await.expect("stream");
    s.info().await.expect("stream info").state.last_sequence
}

/// (name, filter) of every consumer of a stream, as `setup` sees them.
async fn consumer_configs(admin: &Bus, stream: &str) -> Vec<(String, String)> {
    let s = admin.js.get_stream(stream).await.expect("stream");
    let infos: Vec<_> = s.consumers().collect().await;
    infos
        .into_iter()
        .map(|i| {
            let i = i.expect("consumer info");
            (i.name, i.config.filter_subject)
        })
        .collect()
}

#[tokio::test]
async fn each_role_runs_its_part_of_the_flow_without_a_single_violation() {
    let server = start_server().await;

    // No anonymous access.
    let anonymous = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(server.url())
        .await;
    assert!(anonymous.is_err(), "an anonymous client was let in");
    // A wrong password is refused too.
    let wrong = async_nats::ConnectOptions::with_user_and_password("worker".into(), "nope".into())
        .connection_timeout(Duration::from_secs(2))
        .connect(server.url())
        .await;
    assert!(wrong.is_err(), "a wrong password was accepted");
    // holdpoint_bus::connect takes the credentials from the URL, also in a
    // comma-separated list (async-nats alone ignores them).
    let listed = format!("{},{}", server.url_as(&role("worker")), server.url());
    let client = holdpoint_bus::connect(&listed, "holdpoint-test")
        .await
        .expect("connect with credentials in a URL list");
    assert!(client.server_info().auth_required);
    drop(client);

    // Only setup may create the topology: a service's Bus::setup on an empty server
    // fails instead of creating streams.
    let refused = Bus::setup(client_as(&server, "ingress").await, topo()).await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("create state stream")),
        "the ingress role set the topology up: {refused:?}"
    );
    assert!(
        violations(&server, 0)
            .iter()
            .any(|l| l.contains("$JS.API.STREAM.CREATE.KV_HP_STATE")),
        "no violation logged for the ingress's stream create:\n{}",
        server.log_contents()
    );

    // From here on, the roles do what they are meant to: nothing may be refused.
    let mark = server.log_contents().len();
    let admin = bus_as(&server, "setup").await;
    let ingress = bus_as(&server, "ingress").await;
    let worker = Worker::start(bus_as(&server, "worker").await);
    let rt = Runtime::with_bus(bus_as(&server, "runtime").await, "acme")
        .await
        .expect("runtime")
        .with_timeout(Duration::from_secs(10));
    let mut finished = rt
        .follow(EventFilter {
            name: Some("tool-call-finished".into()),
            ..EventFilter::default()
        })
        .await
        .expect("follow");
    let (base, admin_base, stop_ingress) = start_ingress(ingress).await;
    let http = reqwest::Client::new();
    // A person follows acme's events over server-sent events (the ingress's
    // consumer on HP_EVENTS).
    let mut sse = http
        .get(format!("{base}/v1/events"))
        .header("X-Holdpoint-Org", "acme")
        .header("X-Holdpoint-Person", "ana")
        .send()
        .await
        .expect("sse");
    assert_eq!(sse.status().as_u16(), 200);

    // A question, answered over HTTP: the worker releases the blocked call.
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let (status, body) = ana(
        &http,
        reqwest::Method::POST,
        format!("{base}/v1/questions/{q}/answer"),
        Some(example_answer()),
    )
    .await;
    assert_eq!(status, 204, "{body}");

    // An approval, approved over HTTP; the runtime's executor reports the result.
    // It is remembered for the session: the worker creates the rule in HP_STATE.
    let (at_approval, effect) = open_approval(&rt).await;
    let (status, body) = ana(
        &http,
        reqwest::Method::POST,
        format!("{base}/v1/interactions/{effect}/approve"),
        Some(json!({"approved": true, "remember": {"scope": "session"}})),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    rt.report_tool_result(
        &effect,
        CallResult::Ok {
            output: json!({"url": "https://example.invalid/pr/1"}),
        },
    )
    .await
    .expect("tool result");

    // The rule decides the next hold (the worker's watch of the rule keys); the ingress
    // lists it, reads it, revokes it twice (the second probes the audit) and pages
    // the audit.
    let by_rule = hold_call(&rt, &at_approval, "create_pull_request", json!({}), None).await;
    let org = OrgId::parse("acme").expect("org");
    let by_rule_id = InteractionId::parse(by_rule.as_str()).expect("id");
    let decided = admin
        .load_interaction(&org, &by_rule_id)
        .await
        .expect("load")
        .value
        .expect("stored");
    assert_eq!(decided.state, State::Resolved, "{decided:?}");
    let (status, body) = ana(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/rules"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rule_id = body["items"][0]["id"].as_str().expect("a rule").to_owned();
    let (status, body) = ana(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/rules/{rule_id}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for _ in 0..2 {
        let (status, body) = ana(
            &http,
            reqwest::Method::DELETE,
            format!("{base}/v1/rules/{rule_id}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = ana(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/audit?after=0&limit=50"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(4), "{body}");

    // Each blocked call gets its tool-call-finished, as the runtime follows them.
    let mut waiting = vec![q.clone(), effect.clone()];
    while !waiting.is_empty() {
        let next = tokio::time::timeout(DEADLINE, finished.next())
            .await
            .unwrap_or_else(|_| panic!("no tool-call-finished for {waiting:?} in time"))
            .expect("events end")
            .expect("event");
        if let EventData::ToolCallFinished { interaction_id, .. } = &next.event.body {
            waiting.retain(|w| w != interaction_id.as_str());
        }
    }

    // The person's event stream carries both as well.
    let mut seen = String::new();
    tokio::time::timeout(DEADLINE, async {
        while !(seen.contains(&format!("\"{q}\""))
            && seen.contains(&format!("\"{effect}\""))
            && seen.matches("tool-call-finished").count() >= 2)
        {
            let chunk = sse.chunk().await.expect("sse body").expect("sse open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the event stream lacks the two tool-call-finished:\n{seen}"));

    // The ingress reads what it needs: one interaction, the listing, readiness.
    let (status, body) = ana(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/interactions/{q}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = ana(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/interactions?state=all"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed = body["items"].to_string();
    assert!(
        listed.contains(&q) && listed.contains(&effect),
        "listing misses an interaction: {body}"
    );
    let ready = http
        .get(format!("{admin_base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status().as_u16(), 200);

    // A product session: the person's message on the lane becomes a lane message
    // and supersedes the pending question (the worker's follow-up close command).
    let (at, pq) = open_question(&rt, SessionMode::Product).await;
    let (status, body) = ana(
        &http,
        reqwest::Method::POST,
        format!("{base}/v1/sessions/{}/messages", at.session),
        Some(json!({"text": "never mind", "lane": "main", "messageId": "m-1"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let pq_id = InteractionId::parse(pq.as_str()).expect("id");
    wait_for(DEADLINE, "the superseded question to be closed", || {
        let (admin, org, pq_id) = (admin.clone(), org.clone(), pq_id.clone());
        async move {
            let loaded = admin.load_interaction(&org, &pq_id).await.ok()?;
            (loaded.value?.state == State::Closed).then_some(())
        }
    })
    .await;

    wait_bus_sourced(&admin, DEADLINE).await;
    // What was emitted is where it belongs: four audit records (the person's
    // approval, the rule it wrote, the rule's decision, the revocation), one lane
    // message.
    assert_eq!(
        last_sequence(&admin, &admin.topo.audit_stream()).await,
        4,
        "two approval decisions and two rule changes, four audit records"
    );
    assert_eq!(
        last_sequence(&admin, &admin.topo.lanes_stream()).await,
        1,
        "one lane message"
    );

    stop_ingress.cancel();
    worker.stop().await;
    let seen = violations(&server, mark);
    assert!(
        seen.is_empty(),
        "the roles needed subjects ops/nats/holdpoint.conf does not allow:\n{}",
        seen.join("\n")
    );
}

#[tokio::test]
async fn a_tenant_reads_its_own_events_and_nothing_else() {
    let server = start_server().await;
    let admin = bus_as(&server, "setup").await;
    let worker = Worker::start(bus_as(&server, "worker").await);
    let runtime_bus = bus_as(&server, "runtime").await;
    let acme = Runtime::with_bus(runtime_bus.clone(), "acme")
        .await
        .expect("runtime");
    let globex = Runtime::with_bus(runtime_bus, "globex")
        .await
        .expect("runtime");
    let (tenant, mut errors) = raw_client(&server, "events-acme", Some("_INBOX.org-acme")).await;
    let mut tenant_js = jetstream::new(tenant.clone());
    tenant_js.set_timeout(REFUSED_WAIT);
    let worker_js = jetstream::new(client_as(&server, "worker").await);

    // Both organisations have events and an interaction.
    let (_, acme_q) = open_question(&acme, SessionMode::Blocking).await;
    open_question(&globex, SessionMode::Blocking).await;
    wait_bus_sourced(&admin, DEADLINE).await;
    let acme_events = events_as_setup(&admin, "hp.evt.acme.>").await;
    let globex_events = events_as_setup(&admin, "hp.evt.globex.>").await;
    assert!(!acme_events.is_empty() && !globex_events.is_empty());

    // (b) Its own organisation: a core subscription ...
    let mut own = tenant.subscribe("hp.evt.acme.>").await.expect("subscribe");
    // ... and a consumer filtered to hp.evt.acme.> that reads exactly acme's events.
    let name = format!("acme-{}", uuid::Uuid::new_v4().simple());
    let mine: consumer::Consumer<consumer::pull::OrderedConfig> = tenant_js
        .create_consumer_on_stream(
            consumer::pull::OrderedConfig {
                name: Some(name.clone()),
                filter_subject: "hp.evt.acme.>".into(),
                ..Default::default()
            },
            admin.topo.events_stream(),
        )
        .await
        .expect("the tenant creates a consumer filtered to its organisation");
    let read = read_consumer(mine).await;
    let ids = |v: &[(String, Event)]| v.iter().map(|(_, e)| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(&read),
        ids(&acme_events),
        "the tenant's consumer reads acme's events"
    );
    assert!(
        read.iter()
            .all(|(s, e)| s.starts_with("hp.evt.acme.") && e.orgid.as_str() == "acme")
    );

    // (c) Another organisation's events: the subscription is refused, and so is the
    // account-wide inbox, where outcomes and KV reads of every organisation are
    // delivered.
    let mut theirs = tenant
        .subscribe("hp.evt.globex.>")
        .await
        .expect("subscribe");
    let mut inbox = tenant.subscribe("_INBOX.>").await.expect("subscribe");
    // The worker stores a globex event, an inbox message, then an acme event (in
    // the state stream: HP_EVENTS sources them as hp.evt.… and republishes what
    // it stored): once the acme one has arrived, the earlier two
    // would have arrived as well.
    for subject in [
        "hp.fx.evt.globex.t1.evt-probe-1.probe",
        "_INBOX.probe",
        "hp.fx.evt.acme.t1.evt-probe-2.probe",
    ] {
        if subject.starts_with("hp.fx.evt.") {
            worker_js
                .publish(subject, "{}".into())
                .await
                .expect("publish")
                .await
                .expect("stored");
        } else {
            worker_js
                .client()
                .publish(subject, "{}".into())
                .await
                .expect("publish");
        }
    }
    wait_for(
        DEADLINE,
        "the acme probe on the tenant's own subscription",
        || {
            let next = own.next().now_or_never().flatten();
            async move {
                next.filter(|m| m.subject.as_str() == "hp.evt.acme.t1.probe")
                    .map(drop)
            }
        },
    )
    .await;
    assert!(
        !matches!(theirs.next().now_or_never(), Some(Some(_))),
        "the tenant received a globex event"
    );
    assert!(
        !matches!(inbox.next().now_or_never(), Some(Some(_))),
        "the tenant received a message on the shared inbox"
    );
    errors.expect("subscription", "hp.evt.globex.>").await;
    errors.expect("subscription", "_INBOX.>").await;

    // Consumers on HP_EVENTS: with another organisation's filter, or none, or a
    // filter that does not match the one in the subject, no consumer is made.
    for (name, filter) in [
        ("acme-x", "hp.evt.globex.>"),
        ("acme-y", "hp.evt.>"),
        ("acme-z", ""),
    ] {
        let made = tenant_js
            .create_consumer_on_stream(
                consumer::pull::OrderedConfig {
                    name: Some(name.into()),
                    filter_subject: filter.into(),
                    ..Default::default()
                },
                admin.topo.events_stream(),
            )
            .await;
        assert!(
            made.is_err(),
            "consumer {name} with filter {filter:?} was made"
        );
        let subject = if filter.is_empty() {
            format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{name}")
        } else {
            format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{name}.{filter}")
        };
        errors.expect("publish", &subject).await;
    }
    let unnamed = tenant_js
        .create_consumer_on_stream(consumer::pull::OrderedConfig::default(), "HP_EVENTS")
        .await;
    assert!(unnamed.is_err(), "an unfiltered consumer was made");
    errors
        .expect("publish", "$JS.API.CONSUMER.CREATE.HP_EVENTS")
        .await;
    // Through the allowed subject, the server checks the filter in the request.
    for (name, config) in [
        (
            "acme-m1",
            json!({"name": "acme-m1", "filter_subject": "hp.evt.globex.>"}),
        ),
        ("acme-m2", json!({"name": "acme-m2"})),
        (
            "acme-m3",
            json!({"name": "acme-m3", "filter_subjects": ["hp.evt.globex.>"]}),
        ),
    ] {
        let reply = tenant
            .request(
                format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{name}.hp.evt.acme.>"),
                json!({"stream_name": "HP_EVENTS", "config": config})
                    .to_string()
                    .into(),
            )
            .await
            .expect("JetStream answers the allowed subject");
        let body: Value = serde_json::from_slice(&reply.payload).expect("json");
        assert!(body["error"].is_object(), "{config} was accepted: {body}");
    }
    let made = consumer_configs(&admin, &admin.topo.events_stream()).await;
    assert!(
        made.iter().any(|(n, _)| n == &name),
        "the tenant's own consumer is missing"
    );
    for (n, filter) in &made {
        assert!(
            ![
                "acme-x", "acme-y", "acme-z", "acme-m1", "acme-m2", "acme-m3"
            ]
            .contains(&n.as_str()),
            "refused consumer {n} exists"
        );
        assert!(
            !filter.is_empty(),
            "consumer {n} on HP_EVENTS has no filter"
        );
    }

    // KV: neither a subscription on the interactions bucket's subjects nor a direct
    // get of acme's own interaction (which setup can read).
    let key_subject = format!("$KV.HP_STATE.int.acme.{acme_q}");
    let direct = format!("$JS.API.DIRECT.GET.KV_HP_STATE.{key_subject}");
    let reference = admin
        .client
        .request(direct.clone(), "".into())
        .await
        .expect("setup reads the interaction");
    assert!(String::from_utf8_lossy(&reference.payload).contains(&acme_q));
    let _kv_sub = tenant.subscribe("$KV.HP_STATE.>").await.expect("subscribe");
    errors.expect("subscription", "$KV.HP_STATE.>").await;
    assert!(
        tenant.request(direct.clone(), "".into()).await.is_err(),
        "the tenant read an interaction record"
    );
    errors.expect("publish", &direct).await;
    assert!(
        tenant_js.get_key_value("HP_STATE").await.is_err(),
        "the tenant bound the state bucket"
    );
    errors
        .expect("publish", "$JS.API.STREAM.INFO.KV_HP_STATE")
        .await;

    // Commands: none, for either organisation. HP_COMMANDS does not grow.
    let commands = last_sequence(&admin, &admin.topo.commands_stream()).await;
    for subject in ["hp.cmd.globex.t1.answer", "hp.cmd.acme.t1.answer"] {
        assert_publish_refused(&tenant_js, subject).await;
        errors.expect("publish", subject).await;
    }
    // A push consumer's deliver subject is in the request body, where permissions
    // do not reach: the tenant can make one that delivers its events to
    // hp.cmd.acme.t1.answer. JetStream delivers only while something subscribes to
    // that subject, and a stream's capture does not count: nothing reaches
    // HP_COMMANDS while it lives (it goes away after 1 s without interest).
    let reply = tenant
        .request(
            "$JS.API.CONSUMER.CREATE.HP_EVENTS.acme-push.hp.evt.acme.>",
            json!({"stream_name": "HP_EVENTS", "config": {
                "name": "acme-push", "filter_subject": "hp.evt.acme.>",
                "deliver_subject": "hp.cmd.acme.t1.answer", "ack_policy": "none",
                "inactive_threshold": 1_000_000_000u64}})
            .to_string()
            .into(),
        )
        .await
        .expect("JetStream answers");
    let body: Value = serde_json::from_slice(&reply.payload).expect("json");
    assert_eq!(body["name"], "acme-push", "{body}");
    wait_for(DEADLINE, "the idle push consumer to go away", || {
        let admin = admin.clone();
        async move {
            let names = consumer_configs(&admin, "HP_EVENTS").await;
            (!names.iter().any(|(n, _)| n == "acme-push")).then_some(())
        }
    })
    .await;

    // Role boundaries inside Holdpoint: the runtime cannot answer (no agent
    // approves its own held call), the ingress cannot open interactions.
    let (runtime_raw, mut runtime_errors) = raw_client(&server, "runtime", None).await;
    assert_publish_refused(&jetstream::new(runtime_raw), "hp.cmd.acme.t1.answer").await;
    runtime_errors
        .expect("publish", "hp.cmd.acme.t1.answer")
        .await;
    let (ingress_raw, mut ingress_errors) = raw_client(&server, "ingress", None).await;
    assert_publish_refused(&jetstream::new(ingress_raw), "hp.cmd.acme.t1.open").await;
    ingress_errors
        .expect("publish", "hp.cmd.acme.t1.open")
        .await;
    assert_eq!(
        last_sequence(&admin, &admin.topo.commands_stream()).await,
        commands,
        "a refused command reached HP_COMMANDS"
    );

    worker.stop().await;
}

#[tokio::test]
async fn a_service_binds_to_streams_it_may_not_update() {
    let server = start_server().await;
    // setup made HP_EVENTS keep one day of events; the ingress is configured for
    // the default seven.
    let one_day = Topology {
        event_max_age: Duration::from_secs(24 * 3600),
        ..topo()
    };
    let admin = Bus::setup(client_as(&server, "setup").await, one_day)
        .await
        .expect("setup");
    let max_age = |admin: Bus| async move {
        let mut s = admin
            .js
            .get_stream(admin.topo.events_stream())
            .await
            .expect("stream");
        s.info().await.expect("info").config.max_age
    };
    assert_eq!(max_age(admin.clone()).await, Duration::from_secs(24 * 3600));
    let mark = server.log_contents().len();

    // The ingress may not update it: its update is refused, and it starts anyway,
    // bound to the stream as it is.
    let ingress = bus_as(&server, "ingress").await;
    assert_eq!(max_age(admin.clone()).await, Duration::from_secs(24 * 3600));
    let seen = violations(&server, mark);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(
        seen[0].contains("$JS.API.STREAM.UPDATE.HP_EVENTS"),
        "{seen:#?}"
    );
    assert!(ingress.js.get_stream("HP_EVENTS").await.is_ok());

    // setup may: with the same settings as the ingress, it updates the stream.
    Bus::setup(client_as(&server, "setup").await, topo())
        .await
        .expect("setup");
    assert_eq!(max_age(admin).await, topo().event_max_age);
}

#[tokio::test]
async fn a_reply_header_cannot_make_the_worker_write_into_a_stream() {
    let server = start_server().await;
    let admin = bus_as(&server, "setup").await;
    let worker = Worker::start(bus_as(&server, "worker").await);
    let rt = Runtime::with_bus(bus_as(&server, "runtime").await, "acme")
        .await
        .expect("runtime");
    let (_, q) = open_question(&rt, SessionMode::Blocking).await;
    let org = OrgId::parse("acme").expect("org");
    let q_id = InteractionId::parse(q.as_str()).expect("id");

    // The worker may publish into the buckets; a command whose reply header names
    // a bucket subject (here: the question's own record) must not make it write
    // the outcome there.
    let env = holdpoint_domain::CommandEnvelope {
        org: org.clone(),
        command: holdpoint_domain::Command::SessionOpen {
            session: holdpoint_domain::SessionId::parse("s-reply").expect("id"),
            mode: SessionMode::Blocking,
            lane_capacity: None,
        },
    };
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        holdpoint_bus::REPLY_HEADER,
        format!("$KV.HP_STATE.int.acme.{q}").as_str(),
    );
    rt.bus()
        .publish_command(&env, &env.command_id(), headers)
        .await
        .expect("published");
    // Once the command is acked its reply (sent before the ack) is out; a later
    // write by the same worker into the same bucket is then stored after it.
    wait_for(DEADLINE, "the worker to ack the command", || {
        let js = admin.js.clone();
        async move {
            // A work queue: acked commands leave the stream.
            let mut s = js.get_stream("HP_COMMANDS").await.ok()?;
            let state = s.info().await.ok()?.state.clone();
            (state.messages == 0 && state.last_sequence >= 3).then_some(())
        }
    })
    .await;
    open_question(&rt, SessionMode::Blocking).await;
    let record = admin.load_interaction(&org, &q_id).await;
    assert!(
        matches!(&record, Ok(l) if l.value.as_ref().is_some_and(|i| i.id == q_id)),
        "the question's record was overwritten: {record:?}"
    );
    worker.stop().await;
}

/// The blocks `holdpoint nats-config` prints for organisation acme are the ones in
/// ops/nats/holdpoint.conf (between `# nats-config:start <role> acme` and
/// `# nats-config:end`, indented), so the file the tests run is the command's
/// output.
#[test]
fn the_configs_organisation_users_are_the_commands_output() {
    use holdpoint_cli::natsconfig::{OrgRole, render};
    let conf = std::fs::read_to_string(config_file()).expect("holdpoint.conf");
    let acme = OrgId::parse("acme").expect("org");
    for (role, name) in [(OrgRole::Runtime, "runtime"), (OrgRole::Events, "events")] {
        let start = format!("# nats-config:start {name} acme\n");
        let from = conf
            .find(&start)
            .unwrap_or_else(|| panic!("no {start:?} in holdpoint.conf"))
            + start.len();
        let to = from + conf[from..].find("# nats-config:end").expect("end marker");
        let have: String = conf[from..to]
            .lines()
            .map(|l| format!("{}\n", l.strip_prefix("      ").unwrap_or(l)))
            .collect::<String>();
        let want = render(
            &Topology::default(),
            &acme,
            role,
            None,
            &format!("{name}-acme-dev-only"),
        );
        assert_eq!(
            have.trim_end(),
            want.trim_end(),
            "holdpoint.conf's {name} block for acme differs from `holdpoint nats-config \
             --org acme --role {name} --password {name}-acme-dev-only`"
        );
    }
}

/// Waits until the worker acked the commands stored at `sequences` (HP_COMMANDS
/// is a work queue: an acked command leaves it; its deadline schedules stay).
async fn acked(admin: &Bus, sequences: &[u64]) {
    wait_for(DEADLINE, "the worker to ack the commands", || {
        let js = admin.js.clone();
        async move {
            let stream = js.get_stream_no_info("HP_COMMANDS").await.ok()?;
            for seq in sequences {
                if stream.get_raw_message(*seq).await.is_ok() {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
}

/// A command envelope of `org` closing interaction `id` of `task`.
fn close_envelope(org: &str, id: &str, task: &str) -> holdpoint_domain::CommandEnvelope {
    holdpoint_domain::CommandEnvelope {
        org: OrgId::parse(org).expect("org"),
        command: holdpoint_domain::Command::Close {
            interaction_id: InteractionId::parse(id).expect("id"),
            reason: holdpoint_domain::CloseReason::Canceled,
            by_message: None,
            task_id: Some(holdpoint_domain::TaskId::parse(task).expect("task")),
        },
    }
}

#[tokio::test]
async fn an_organisations_runtime_reaches_its_own_interactions_and_nothing_else() {
    let server = start_server().await;
    let admin = bus_as(&server, "setup").await;
    // The notifier's durable reads every organisation's events.
    admin.notifier_consumer().await.expect("notifier durable");
    let worker = Worker::start(bus_as(&server, "worker").await);
    let (base, _admin_base, stop_ingress) = start_ingress(bus_as(&server, "ingress").await).await;
    let http = reqwest::Client::new();
    // Organisation B (globex) runs on the shared runtime user.
    let globex = Runtime::with_bus(bus_as(&server, "runtime").await, "globex")
        .await
        .expect("runtime");
    let (globex_at, globex_effect) = open_approval(&globex).await;
    let (globex_q_at, globex_q) = open_question(&globex, SessionMode::Blocking).await;

    // (d) Organisation A (acme) runs on its own user, as a runtime connects
    // (Runtime::connect: credentials in the URL, the organisation's inbox prefix).
    let mark = server.log_contents().len();
    let acme = Runtime::connect(&server.url_as(&role("runtime-acme")), "acme")
        .await
        .expect("acme's runtime connects with its own user");
    let mut finished = acme
        .follow(EventFilter {
            name: Some("tool-call-finished".into()),
            ..EventFilter::default()
        })
        .await
        .expect("acme follows its events");
    let (_, effect) = open_approval(&acme).await;
    let (status, body) = ana(
        &http,
        reqwest::Method::POST,
        format!("{base}/v1/interactions/{effect}/approve"),
        Some(json!({"approved": true})),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    acme.report_tool_result(
        &effect,
        CallResult::Ok {
            output: json!({"ok": true}),
        },
    )
    .await
    .expect("acme reports its tool result");
    let (_, own_q) = open_question(&acme, SessionMode::Blocking).await;
    acme.set_deadline(
        &own_q,
        holdpoint_client::Expiry {
            expires_in: Some(600),
            ..holdpoint_client::Expiry::default()
        },
    )
    .await
    .expect("acme moves its own deadline");
    acme.close_interaction(&own_q, holdpoint_domain::CloseReason::Canceled)
        .await
        .expect("acme closes its own question");
    let mut waiting = vec![effect.clone(), own_q.clone()];
    while !waiting.is_empty() {
        let next = tokio::time::timeout(DEADLINE, finished.next())
            .await
            .unwrap_or_else(|_| panic!("no tool-call-finished for {waiting:?} in time"))
            .expect("events end")
            .expect("event");
        assert_eq!(next.event.orgid.as_str(), "acme", "{next:?}");
        if let EventData::ToolCallFinished { interaction_id, .. } = &next.event.body {
            waiting.retain(|w| w != interaction_id.as_str());
        }
    }
    let seen = violations(&server, mark);
    assert!(
        seen.is_empty(),
        "acme's runtime needed subjects `holdpoint nats-config --role runtime` does not grant:\n{}",
        seen.join("\n")
    );

    // Now as a raw client of the same user: every step outside acme is refused.
    let (raw, mut errors) = raw_client(&server, "runtime-acme", Some("_INBOX.org-acme")).await;
    let mut js = jetstream::new(raw.clone());
    js.set_timeout(REFUSED_WAIT);
    let commands = last_sequence(&admin, &admin.topo.commands_stream()).await;
    let (gt, qt) = (globex_at.task_id.as_str(), globex_q_at.task_id.as_str());
    // Open, close or report a result for globex; answer anything, anywhere.
    for subject in [
        format!("hp.cmd.globex.{gt}.open"),
        format!("hp.cmd.globex.{qt}.close"),
        format!("hp.cmd.globex.{gt}.tool-result"),
        format!("hp.cmd.globex.{gt}.answer"),
        format!("hp.cmd.acme.{gt}.answer"),
        format!("hp.cmd.acme.{gt}.message"),
        format!("hp.cmd.acme.{gt}.expire"),
    ] {
        assert_publish_refused(&js, &subject).await;
        errors.expect("publish", &subject).await;
    }
    assert_eq!(
        last_sequence(&admin, &admin.topo.commands_stream()).await,
        commands,
        "a refused command reached HP_COMMANDS"
    );
    // A command on acme's own subject whose body names globex is stored, but the
    // worker decides nothing from it (the body must match the subject).
    let forged = close_envelope("globex", &globex_q, qt);
    let body = serde_json::to_vec(&forged).expect("json");
    let forged_at = js
        .publish(format!("hp.cmd.acme.{qt}.close"), body.into())
        .await
        .expect("publish")
        .await
        .expect("acme's own subject is stored")
        .sequence;
    acked(&admin, &[forged_at]).await;
    let org_b = OrgId::parse("globex").expect("org");
    for id in [&globex_q, &globex_effect] {
        let id = InteractionId::parse(id.as_str()).expect("id");
        let record = admin.load_interaction(&org_b, &id).await.expect("load");
        assert_eq!(
            record.value.map(|i| i.state),
            Some(State::Pending),
            "globex's {id} no longer waits"
        );
    }

    // Globex's events: no core subscription, no consumer with its filter or none,
    // none created through the notifier's durable, no pull from that durable
    // (it reads every organisation's events).
    let _theirs = raw.subscribe("hp.evt.globex.>").await.expect("subscribe");
    errors.expect("subscription", "hp.evt.globex.>").await;
    let _inbox = raw.subscribe("_INBOX.>").await.expect("subscribe");
    errors.expect("subscription", "_INBOX.>").await;
    for (name, filter) in [("x1", "hp.evt.globex.>"), ("x2", "hp.evt.>"), ("x3", "")] {
        let made = js
            .create_consumer_on_stream(
                consumer::pull::OrderedConfig {
                    name: Some(name.into()),
                    filter_subject: filter.into(),
                    ..Default::default()
                },
                "HP_EVENTS",
            )
            .await;
        assert!(made.is_err(), "consumer {name} ({filter:?}) was made");
        let subject = if filter.is_empty() {
            format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{name}")
        } else {
            format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{name}.{filter}")
        };
        errors.expect("publish", &subject).await;
    }
    let unnamed = js
        .create_consumer_on_stream(consumer::pull::OrderedConfig::default(), "HP_EVENTS")
        .await;
    assert!(unnamed.is_err(), "an unnamed consumer was made");
    errors
        .expect("publish", "$JS.API.CONSUMER.CREATE.HP_EVENTS")
        .await;
    // The allowed form with a body that asks for more than the subject says.
    let reply = raw
        .request(
            "$JS.API.CONSUMER.CREATE.HP_EVENTS.x4.hp.evt.acme.>",
            json!({"stream_name": "HP_EVENTS", "config": {"name": "x4", "filter_subject": "hp.evt.globex.>"}})
                .to_string()
                .into(),
        )
        .await
        .expect("JetStream answers the allowed subject");
    let body: Value = serde_json::from_slice(&reply.payload).expect("json");
    assert!(
        body["error"].is_object(),
        "a foreign body filter was accepted: {body}"
    );
    let notifier = admin.topo.notifier_consumer();
    let hijack = format!("$JS.API.CONSUMER.CREATE.HP_EVENTS.{notifier}.hp.evt.acme.>");
    assert!(
        raw.request(hijack.clone(), json!({"stream_name": "HP_EVENTS", "config": {"durable_name": notifier, "filter_subject": "hp.evt.acme.>"}}).to_string().into())
            .await
            .is_err(),
        "the notifier's durable was re-filtered"
    );
    errors.expect("publish", &hijack).await;
    let pull = format!("$JS.API.CONSUMER.MSG.NEXT.HP_EVENTS.{notifier}");
    assert!(
        raw.request(
            pull.clone(),
            json!({"batch": 1, "expires": 500_000_000u64})
                .to_string()
                .into()
        )
        .await
        .is_err(),
        "acme's runtime pulled from the notifier's durable"
    );
    errors.expect("publish", &pull).await;
    let info = admin
        .js
        .get_consumer_from_stream::<consumer::pull::Config, _, _>(&notifier, "HP_EVENTS")
        .await
        .expect("the notifier's durable")
        .cached_info()
        .clone();
    assert_eq!(info.config.filter_subject, "hp.evt.>", "{info:?}");
    assert_eq!(
        info.num_ack_pending, 0,
        "someone pulled from the notifier's durable"
    );

    // Globex's records: neither by key (direct get) nor through the message API.
    let direct = format!("$JS.API.DIRECT.GET.KV_HP_STATE.$KV.HP_STATE.int.globex.{globex_q}");
    assert!(raw.request(direct.clone(), "".into()).await.is_err());
    errors.expect("publish", &direct).await;
    let msg_get = "$JS.API.STREAM.MSG.GET.KV_HP_STATE";
    assert!(
        raw.request(
            msg_get,
            json!({"last_by_subj": format!("$KV.HP_STATE.int.globex.{globex_q}")})
                .to_string()
                .into()
        )
        .await
        .is_err()
    );
    errors.expect("publish", msg_get).await;

    // Replies: the worker sends acme's outcome to acme's prefix, and never to
    // globex's, whatever the command's reply header says.
    let spy = admin
        .client
        .subscribe("_INBOX.org-globex.>")
        .await
        .expect("spy");
    let mut own_inbox = raw.subscribe("_INBOX.org-acme.probe.>").await.expect("own");
    let mut spy = spy;
    let mut probes = Vec::new();
    for (reply_to, n) in [
        ("_INBOX.org-globex.probe.1", "s-probe-1"),
        ("_INBOX.org-acme.probe.1", "s-probe-2"),
    ] {
        let env = holdpoint_domain::CommandEnvelope {
            org: OrgId::parse("acme").expect("org"),
            command: holdpoint_domain::Command::SessionOpen {
                session: holdpoint_domain::SessionId::parse(n).expect("id"),
                mode: SessionMode::Blocking,
                lane_capacity: None,
            },
        };
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(holdpoint_bus::REPLY_HEADER, reply_to);
        headers.insert("Nats-Msg-Id", env.command_id().to_string().as_str());
        let at = js
            .publish_with_headers(
                admin.topo.command_subject(&env),
                headers,
                serde_json::to_vec(&env).expect("json").into(),
            )
            .await
            .expect("publish")
            .await
            .expect("stored")
            .sequence;
        probes.push(at);
    }
    tokio::time::timeout(DEADLINE, own_inbox.next())
        .await
        .expect("acme's own inbox gets its outcome")
        .expect("subscription open");
    // Both acked: the worker replies before it acks, so a reply to globex's prefix
    // would be on the spy's connection before the answer that shows the ack.
    acked(&admin, &probes).await;
    assert!(
        !matches!(spy.next().now_or_never(), Some(Some(_))),
        "the worker replied acme's outcome into globex's inbox"
    );

    stop_ingress.cancel();
    worker.stop().await;
}

/// `holdpoint backup` and `holdpoint restore` run as the `setup` user of the
/// shipped configuration (the JetStream API and `$JS.SNAPSHOT.>`), without a
/// permission violation, from one server into another.
#[tokio::test]
async fn the_setup_user_backs_up_and_restores_without_a_violation() {
    let source = start_server().await;
    let admin = bus_as(&source, "setup").await;
    let worker = Worker::start(bus_as(&source, "worker").await);
    let rt = Runtime::with_bus(bus_as(&source, "runtime").await, "acme")
        .await
        .expect("runtime");
    rt.open_session("s-backup", holdpoint_domain::SessionMode::Blocking)
        .await
        .expect("a session");
    worker.stop().await;
    let target = start_server().await;
    let (from_source, from_target) = (source.log_contents().len(), target.log_contents().len());
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("b");
    let run = |args: Vec<String>| {
        let o = std::process::Command::new(holdpoint_tests::app::holdpoint_binary())
            .args(args)
            .output()
            .expect("run holdpoint");
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let setup = role("setup");
    run(vec![
        "backup".into(),
        "--nats-url".into(),
        source.url_as(&setup),
        "--out".into(),
        out.display().to_string(),
    ]);
    run(vec![
        "restore".into(),
        "--nats-url".into(),
        target.url_as(&setup),
        "--from".into(),
        out.display().to_string(),
    ]);
    assert_eq!(violations(&source, from_source), Vec::<String>::new());
    assert_eq!(violations(&target, from_target), Vec::<String>::new());
    let restored = bus_as(&target, "setup").await;
    let sessions = restored.topo.state_bucket();
    assert_eq!(
        last_sequence(&restored, &format!("KV_{sessions}")).await,
        last_sequence(&admin, &format!("KV_{sessions}")).await
    );
    assert!(last_sequence(&restored, &format!("KV_{sessions}")).await > 0);
}
