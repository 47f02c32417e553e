//! One JSON-RPC client for the A2A tests: [`Rpc`] builds the request (identity,
//! `A2A-Version: 1.0` unless the test names another, the extension header for
//! [`Rpc::call`]), sends it and reads the reply into an [`RpcReply`], whose
//! `result`, `assert_error` and `assert_code` are the assertions every A2A test
//! makes. Hand-built envelopes go through [`Rpc::raw`].

use holdpoint_client::Placement;
use holdpoint_tests::app::TestApp;
use serde_json::{Value, json};

use crate::streams::SseReader;

/// The interactions/v1 extension the A2A tests activate.
pub(crate) const URI: &str = holdpoint_domain::EXTENSION_URI;

/// One person of one organisation talking JSON-RPC to `/a2a`.
pub(crate) struct Rpc {
    http: reqwest::Client,
    base: String,
    org: String,
    person: String,
}

/// A JSON-RPC answer: HTTP status, headers, body.
pub(crate) struct RpcReply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl RpcReply {
    /// Sends `request` and reads status, headers and body (`Null` when the body is
    /// not JSON).
    async fn read(request: reqwest::RequestBuilder) -> RpcReply {
        let resp = request.send().await.expect("http");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        RpcReply {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn result(&self) -> &Value {
        assert!(
            self.body.get("error").is_none(),
            "unexpected error: {}",
            self.body
        );
        &self.body["result"]
    }

    pub(crate) fn error_code(&self) -> i64 {
        self.body["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error: {}", self.body))
    }

    /// The Holdpoint code in `error.data[ErrorInfo].metadata.code`.
    pub(crate) fn holdpoint(&self) -> &str {
        self.body["error"]["data"][0]["metadata"]["code"]
            .as_str()
            .unwrap_or("")
    }

    /// Asserts the reply is JSON-RPC error `code` carrying Holdpoint code
    /// `holdpoint` (the body shows on failure).
    #[track_caller]
    pub(crate) fn assert_error(&self, code: i64, holdpoint: &str) {
        self.assert_error_for("", code, holdpoint);
    }

    /// [`assert_error`](Self::assert_error), saying `what` was sent on failure.
    #[track_caller]
    pub(crate) fn assert_error_for(&self, what: &str, code: i64, holdpoint: &str) {
        assert_eq!(
            (self.error_code(), self.holdpoint()),
            (code, holdpoint),
            "{what}: {}",
            self.body
        );
    }

    /// Asserts the reply is a task whose state is `TASK_STATE_WORKING` (what a
    /// taken answer returns).
    #[track_caller]
    pub(crate) fn assert_working(&self) {
        self.assert_working_for("");
    }

    /// [`assert_working`](Self::assert_working), saying `what` was sent on failure.
    #[track_caller]
    pub(crate) fn assert_working_for(&self, what: &str) {
        assert_eq!(
            self.result()["task"]["status"]["state"],
            "TASK_STATE_WORKING",
            "{what}: {}",
            self.body
        );
    }

    /// Asserts the reply is JSON-RPC error `code` (the body shows on failure).
    #[track_caller]
    pub(crate) fn assert_code(&self, code: i64) {
        assert_eq!(self.error_code(), code, "{}", self.body);
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Rpc {
    pub(crate) fn new(app: &TestApp, org: &str, person: &str) -> Rpc {
        Rpc {
            http: reqwest::Client::new(),
            base: app.base.clone(),
            org: org.into(),
            person: person.into(),
        }
    }

    pub(crate) fn request(
        &self,
        method: &str,
        params: Value,
        headers: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(format!("{}/a2a", self.base))
            .header("X-Holdpoint-Org", &self.org)
            .header("X-Holdpoint-Person", &self.person)
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        // A2A v1.0 clients name their version (the official SDKs do); a test that
        // means another gives its own.
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("a2a-version"))
        {
            r = r.header("A2A-Version", "1.0");
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r
    }

    pub(crate) async fn call_with(
        &self,
        method: &str,
        params: Value,
        headers: &[(&str, &str)],
    ) -> RpcReply {
        RpcReply::read(self.request(method, params, headers)).await
    }

    /// Posts `body` as it is (a hand-built envelope, maybe not JSON at all) with the
    /// identity and exactly `headers`: no `A2A-Version` unless given.
    pub(crate) async fn raw(&self, body: impl Into<String>, headers: &[(&str, &str)]) -> RpcReply {
        let mut r = self
            .http
            .post(format!("{}/a2a", self.base))
            .header("X-Holdpoint-Org", &self.org)
            .header("X-Holdpoint-Person", &self.person)
            .header("Content-Type", "application/json")
            .body(body.into());
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        RpcReply::read(r).await
    }

    /// With the extension activated.
    pub(crate) async fn call(&self, method: &str, params: Value) -> RpcReply {
        self.call_with(method, params, &[("A2A-Extensions", URI)])
            .await
    }

    /// `SendMessage` with the extension activated.
    pub(crate) async fn send(&self, params: Value) -> RpcReply {
        self.call("SendMessage", params).await
    }

    /// `SendMessage` without the extension.
    pub(crate) async fn send_plain(&self, params: Value) -> RpcReply {
        self.plain("SendMessage", params).await
    }

    /// Without the extension.
    pub(crate) async fn plain(&self, method: &str, params: Value) -> RpcReply {
        self.call_with(method, params, &[]).await
    }

    pub(crate) async fn stream(&self, method: &str, params: Value) -> SseReader {
        SseReader::open(self.request(method, params, &[("A2A-Extensions", URI)])).await
    }
}

/// `SendMessage` params answering `at`'s task.
pub(crate) fn answer(at: &Placement, message_id: &str, parts: Value, meta: Option<Value>) -> Value {
    let mut message = json!({
        "role": "ROLE_USER",
        "messageId": message_id,
        "taskId": at.task_id.as_str(),
        "contextId": at.context_id.as_str(),
        "parts": parts,
    });
    if let Some(m) = meta {
        message["extensions"] = json!([URI]);
        message["metadata"] = json!({ URI: m });
    }
    json!({ "message": message })
}

pub(crate) fn get(at: &Placement) -> Value {
    json!({"id": at.task_id.as_str()})
}
