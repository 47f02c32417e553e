//! A test identity provider: Ed25519 and P-256 keys generated per test (ring), the
//! RSA test key from `tests/fixtures`, a JWKS served over HTTP from a document the
//! test can change (key rotation) with a count of fetches, and token signing with
//! any header and claims.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{self, KeyPair as _};
use serde_json::{Value, json};
use tokio::sync::RwLock;

use crate::nats::workspace_root;

/// The issuer tokens name by default.
pub const ISSUER: &str = "https://idp.test";
/// The audience tokens name by default.
pub const AUDIENCE: &str = "holdpoint";

/// A signing key and its public JWK.
#[derive(Clone)]
pub struct TestKey {
    /// Algorithm.
    pub alg: Algorithm,
    /// `kid`.
    pub kid: String,
    encoding: EncodingKey,
    /// The public JWK (with `kid`, `use: sig`).
    pub jwk: Value,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKey")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .finish()
    }
}

impl TestKey {
    /// A new Ed25519 key.
    pub fn ed25519(kid: &str) -> TestKey {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = signature::Ed25519KeyPair::generate_pkcs8(&rng).expect("keygen");
        let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("key");
        TestKey {
            alg: Algorithm::EdDSA,
            kid: kid.into(),
            encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "use": "sig", "kid": kid,
                        "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref())}),
        }
    }

    /// A new P-256 key (ES256).
    pub fn p256(kid: &str) -> TestKey {
        let rng = ring::rand::SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("keygen");
        let pair = signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("key");
        let public = pair.public_key().as_ref();
        TestKey {
            alg: Algorithm::ES256,
            kid: kid.into(),
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({"kty": "EC", "crv": "P-256", "use": "sig", "kid": kid,
                        "x": URL_SAFE_NO_PAD.encode(&public[1..33]),
                        "y": URL_SAFE_NO_PAD.encode(&public[33..65])}),
        }
    }

    /// The RSA test key from `tests/fixtures` (RS256).
    pub fn rsa(kid: &str) -> TestKey {
        let dir = workspace_root().join("tests/fixtures");
        let pem = std::fs::read(dir.join("rsa-test-key.pem")).expect("rsa fixture");
        let mut jwk: Value = serde_json::from_slice(
            &std::fs::read(dir.join("rsa-test.jwk.json")).expect("jwk fixture"),
        )
        .expect("json");
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        TestKey {
            alg: Algorithm::RS256,
            kid: kid.into(),
            encoding: EncodingKey::from_rsa_pem(&pem).expect("rsa pem"),
            jwk,
        }
    }

    /// Signs `claims` with this key (header `alg` and `kid` set).
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }

    /// Signs with a header without `kid`.
    pub fn sign_without_kid(&self, claims: &Value) -> String {
        jsonwebtoken::encode(&Header::new(self.alg), claims, &self.encoding).expect("sign")
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Valid claims for `person` of `org`.
pub fn claims(org: &str, person: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": person, "org": org, "iat": now(), "exp": now() + 600})
}

/// A JWKS served over HTTP on 127.0.0.1, changeable at run time, counting fetches.
pub struct JwksServer {
    /// The URL of the JWKS document.
    pub url: String,
    doc: Arc<RwLock<Value>>,
    fetches: Arc<AtomicUsize>,
    failing: Arc<std::sync::atomic::AtomicBool>,
    _task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    /// Serves `{"keys": keys}`.
    pub async fn start(keys: Vec<Value>) -> JwksServer {
        let doc = Arc::new(RwLock::new(json!({ "keys": keys })));
        let fetches = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (d, f, fail) = (doc.clone(), fetches.clone(), failing.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (d, f, fail) = (d.clone(), f.clone(), fail.clone());
                async move {
                    use axum::response::IntoResponse as _;
                    f.fetch_add(1, Ordering::SeqCst);
                    if fail.load(Ordering::SeqCst) {
                        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
                    }
                    axum::Json(d.read().await.clone()).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks.json", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        JwksServer {
            url,
            doc,
            fetches,
            failing,
            _task: task,
        }
    }

    /// Replaces the served keys.
    pub async fn set_keys(&self, keys: Vec<Value>) {
        *self.doc.write().await = json!({ "keys": keys });
    }

    /// Makes the endpoint answer 500 (or serve again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// How many times the document was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}
