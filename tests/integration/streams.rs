//! `GET /v1/events`: an organisation's CloudEvents over SSE, in stream order,
//! filtered by task and type, resumable with `Last-Event-ID`, never another
//! organisation's (README "Event streams for consumers"). Also the SSE reader the A2A stream tests use.

use std::time::Duration;

use holdpoint_domain::{Event, SessionMode};
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::common::*;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    /// `id:`.
    pub id: Option<String>,
    /// `event:`.
    pub event: Option<String>,
    /// `data:` (lines joined with `\n`).
    pub data: String,
}

impl Frame {
    /// The data as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("SSE data is JSON")
    }
}

/// What [`SseReader::next`] found.
#[derive(Debug)]
pub(crate) enum Next {
    /// An event.
    Frame(Frame),
    /// The server ended the stream.
    End,
    /// Nothing within the wait.
    Quiet,
}

/// Reads an SSE response frame by frame, skipping comments (keep-alives).
pub(crate) struct SseReader {
    resp: reqwest::Response,
    buf: String,
    /// The response status.
    pub status: u16,
    /// The response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl SseReader {
    /// Sends `req` and keeps the response open.
    pub async fn open(req: reqwest::RequestBuilder) -> SseReader {
        let resp = req.send().await.expect("http");
        SseReader {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            resp,
            buf: String::new(),
        }
    }

    /// True when the response is an event stream.
    pub fn is_stream(&self) -> bool {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
    }

    /// The whole body as JSON (for a response that is not a stream).
    pub async fn body_json(self) -> Value {
        let bytes = self.resp.bytes().await.expect("body");
        serde_json::from_slice(&bytes).expect("JSON body")
    }

    /// The next frame, waiting at most `wait`.
    pub async fn next(&mut self, wait: Duration) -> Next {
        let end = Instant::now() + wait;
        loop {
            while let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut frame = Frame {
                    id: None,
                    event: None,
                    data: String::new(),
                };
                let mut has_data = false;
                for line in block.lines() {
                    let (key, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match key {
                        "" => {}
                        "id" => frame.id = Some(value.to_owned()),
                        "event" => frame.event = Some(value.to_owned()),
                        "data" => {
                            if has_data {
                                frame.data.push('\n');
                            }
                            frame.data.push_str(value);
                            has_data = true;
                        }
                        _ => {}
                    }
                }
                if has_data {
                    return Next::Frame(frame);
                }
            }
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.resp.chunk()).await {
                Err(_) => return Next::Quiet,
                Ok(Ok(Some(chunk))) => self
                    .buf
                    .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
                Ok(Ok(None)) => return Next::End,
                Ok(Err(e)) => panic!("SSE read failed: {e}"),
            }
        }
    }

    /// The next frame within `wait`; panics naming `what` otherwise.
    pub async fn expect(&mut self, wait: Duration, what: &str) -> Frame {
        match self.next(wait).await {
            Next::Frame(f) => f,
            other => panic!("waiting for {what}: {other:?}"),
        }
    }
}

/// How long a test waits for an event it expects.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

fn events_request(app: &TestApp, org: &str, query: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .get(format!("{}/v1/events{query}", app.base))
        .header("X-Holdpoint-Org", org)
        .header("X-Holdpoint-Person", "ana")
}

/// Reads exactly `n` frames, checking each is the CloudEvent of its `id:`.
async fn read_n(r: &mut SseReader, n: usize) -> Vec<(u64, Event)> {
    let mut out = Vec::new();
    for i in 0..n {
        let f = r.expect(WAIT, &format!("event {i} of {n}")).await;
        let seq: u64 = f.id.as_deref().expect("id").parse().expect("numeric id");
        let e: Event = serde_json::from_str(&f.data).expect("a CloudEvent");
        assert_eq!(
            f.event.as_deref(),
            Some(e.name()),
            "event: is the short name"
        );
        out.push((seq, e));
    }
    out
}

fn ids(events: &[(u64, Event)]) -> Vec<String> {
    events.iter().map(|(_, e)| e.id.clone()).collect()
}

#[tokio::test]
async fn org_stream_is_ordered_filtered_resumable_and_isolated() {
    let app = TestApp::start().await;
    let acme = app.runtime("acme").await;
    let globex = app.runtime("globex").await;
    let (a_at, _a) = open_approval(&acme).await;
    let (_q_at, q) = open_question(&acme, SessionMode::Blocking).await;
    let (_g_at, _g) = open_approval(&globex).await;
    let r = answer_example(&app.person("acme", "ana"), &q).await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_idle().await;
    let stored = app.events("acme").await;
    assert!(stored.len() >= 6, "{stored:?}");

    // Everything, from the start (after=0), in stream order.
    let mut all = SseReader::open(events_request(&app, "acme", "?after=0")).await;
    assert_eq!(all.status, 200);
    assert!(all.is_stream());
    let got = read_n(&mut all, stored.len()).await;
    assert_eq!(
        ids(&got),
        stored.iter().map(|e| e.id.clone()).collect::<Vec<_>>()
    );
    assert!(
        got.windows(2).all(|w| w[0].0 < w[1].0),
        "sequences increase"
    );
    assert!(got.iter().all(|(_, e)| e.orgid.as_str() == "acme"));

    // Live: a globex event first, then an acme one; the acme stream shows only the
    // acme one, and it is the very next frame.
    let before = stored.len();
    let (_g2_at, _g2) = open_approval(&globex).await;
    let (_a2_at, a2) = open_approval(&acme).await;
    app.wait_idle().await;
    let stored = app.events("acme").await;
    let next = read_n(&mut all, stored.len() - before).await;
    assert_eq!(
        ids(&next),
        stored[before..]
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>()
    );
    assert!(next.iter().any(|(_, e)| e.subject == a2), "{next:?}");
    assert!(next.iter().all(|(_, e)| e.orgid.as_str() == "acme"));

    // Filters: one task; one type; both.
    let task = a_at.task_id.as_str();
    for (query, keep) in [
        (
            format!("?after=0&task={task}"),
            Box::new(|e: &Event| e.taskid.as_ref().is_some_and(|t| t.as_str() == task))
                as Box<dyn Fn(&Event) -> bool>,
        ),
        (
            "?after=0&type=task-status".to_owned(),
            Box::new(|e: &Event| e.name() == "task-status"),
        ),
        (
            format!("?after=0&task={task}&type=approval-requested"),
            Box::new(|e: &Event| {
                e.name() == "approval-requested"
                    && e.taskid.as_ref().is_some_and(|t| t.as_str() == task)
            }),
        ),
    ] {
        let want: Vec<String> = stored
            .iter()
            .filter(|e| keep(e))
            .map(|e| e.id.clone())
            .collect();
        assert!(!want.is_empty(), "{query}");
        let mut r = SseReader::open(events_request(&app, "acme", &query)).await;
        assert_eq!(r.status, 200, "{query}");
        let got = read_n(&mut r, want.len()).await;
        assert_eq!(ids(&got), want, "{query}");
        // Nothing else matches: the next frame (if any arrives) is not from before.
        if let Next::Frame(f) = r.next(Duration::from_millis(300)).await {
            panic!("{query}: unexpected extra event {f:?}");
        }
    }

    // Resume: read half, reconnect with Last-Event-ID, get the rest: no repeats,
    // no gaps.
    let half = stored.len() / 2;
    let mut first = SseReader::open(events_request(&app, "acme", "?after=0")).await;
    let head = read_n(&mut first, half).await;
    drop(first);
    let last = head.last().expect("some").0;
    let mut resumed =
        SseReader::open(events_request(&app, "acme", "").header("Last-Event-ID", last.to_string()))
            .await;
    let tail = read_n(&mut resumed, stored.len() - half).await;
    let mut joined = ids(&head);
    joined.extend(ids(&tail));
    assert_eq!(
        joined,
        stored.iter().map(|e| e.id.clone()).collect::<Vec<_>>()
    );
    assert!(tail[0].0 > last);

    // Another organisation's stream never shows acme's events.
    let mut g = SseReader::open(events_request(&app, "globex", "?after=0")).await;
    let gstored = app.events("globex").await;
    let got = read_n(&mut g, gstored.len()).await;
    assert!(got.iter().all(|(_, e)| e.orgid.as_str() == "globex"));
    if let Next::Frame(f) = g.next(Duration::from_millis(300)).await {
        panic!("globex saw an extra event {f:?}");
    }
}

#[tokio::test]
async fn org_stream_starts_with_new_events_without_a_resume_point() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    let (_at, old) = open_approval(&rt).await;
    app.wait_idle().await;
    let mut live =
        SseReader::open(events_request(&app, "acme", "?type=interaction-resolved")).await;
    assert_eq!(live.status, 200);
    let r = app
        .person("acme", "ana")
        .post(
            &format!("/v1/interactions/{old}/approve"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let f = live.expect(WAIT, "interaction-resolved").await;
    assert_eq!(f.event.as_deref(), Some("interaction-resolved"));
    assert_eq!(f.json()["data"]["interactionId"], old.as_str());
}

#[tokio::test]
async fn org_stream_validates_its_query_and_needs_an_identity() {
    let app = TestApp::start().await;
    let ana = app.person("acme", "ana");
    for q in [
        "?type=bogus",
        "?task=a%20b",
        "?color=red",
        "?after=-1",
        "?after=x",
    ] {
        let r = ana.get(&format!("/v1/events{q}")).await;
        assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{q}: {r:?}");
    }
    let r = ana
        .get_with(
            "/v1/events",
            &[
                ("X-Holdpoint-Org", "acme"),
                ("X-Holdpoint-Person", "ana"),
                ("Last-Event-ID", "nope"),
            ],
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "NRY-0001"), "{r:?}");
    let r = ana.get_with("/v1/events", &[]).await;
    assert_eq!((r.status, r.code()), (401, "NRY-0011"), "{r:?}");
}
