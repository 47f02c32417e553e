//! JWT verification against an issuer's key set (JWKS), as the README's
//! "Identity" section requires: signature, issuer, expiry (and `nbf`), audience when
//! configured, the person (`sub`) and the organisation (a configurable claim).
//!
//! - [`AuthConfig`]: issuer, audience, organisation claim, allowed algorithms,
//!   leeway, and where the key set comes from ([`JwksSource`]).
//! - [`Verifier`]: verifies a bearer token and returns the [`Caller`]. Keys are
//!   cached: a URL key set is refetched after its TTL, and at once (coalesced, at
//!   most once per cooldown) when a token names an unknown `kid`; when a fetch fails
//!   the old keys stay.
//!
//! Every failure is one [`AuthFailure`] whose reason goes to the log only; the
//! client always sees the same `401 NRY-0011` body.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdpoint_domain::{GroupName, OrgId, PersonId};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};
use tracing::{info, warn};

use super::caller::Caller;

/// Where the key set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// An HTTPS (or HTTP, for local use) URL serving a JWKS document.
    Url(String),
    /// A JWKS document on disk (re-read after the TTL and on an unknown `kid`).
    File(PathBuf),
}

/// JWT verification settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// The expected `iss`.
    pub issuer: String,
    /// The expected `aud`; not checked when `None`.
    pub audience: Option<String>,
    /// The claim naming the organisation (default `org`).
    pub org_claim: String,
    /// The claim naming the person's groups (for example `groups` or `roles`):
    /// an array of strings, or one string. `None` (the default): callers have no
    /// groups, so only assignees named by person match. Entries that are not group
    /// names (1 to 128 printable ASCII characters, no spaces) are left out; a token
    /// naming more than [`MAX_CALLER_GROUPS`] groups is refused.
    pub groups_claim: Option<String>,
    /// Algorithms accepted (default RS256, ES256, EdDSA). HMAC algorithms are never
    /// accepted, whatever this says: the keys come from a public key set.
    pub algorithms: Vec<Algorithm>,
    /// Clock leeway for `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// The key set.
    pub jwks: JwksSource,
    /// How long a fetched key set is used before it is fetched again.
    pub jwks_ttl: Duration,
    /// Least time between two fetches triggered by unknown `kid`s.
    pub refetch_cooldown: Duration,
}

impl AuthConfig {
    /// A configuration with the defaults for everything but issuer and key set.
    pub fn new(issuer: impl Into<String>, jwks: JwksSource) -> Self {
        AuthConfig {
            issuer: issuer.into(),
            audience: None,
            org_claim: "org".into(),
            groups_claim: None,
            algorithms: vec![Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA],
            leeway_secs: 30,
            jwks,
            jwks_ttl: Duration::from_secs(300),
            refetch_cooldown: Duration::from_secs(30),
        }
    }
}

/// The most groups one token may name in the groups claim.
pub const MAX_CALLER_GROUPS: usize = 256;

/// The valid group names among the first [`MAX_CALLER_GROUPS`] of `names`, each
/// once, in order (the development header's list is cut there; a token's claim
/// naming more is refused before this). A name that is not a
/// [`GroupName`] (empty, too long, a space, a character outside printable ASCII,
/// so a look-alike such as Cyrillic `о` in `оps`) is left out: it could never
/// match an assignee, which must be a valid name.
pub fn groups_from(names: impl IntoIterator<Item = String>) -> Vec<GroupName> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .take(MAX_CALLER_GROUPS)
        .filter_map(|n| GroupName::parse(n).ok())
        .filter(|g| seen.insert(g.clone()))
        .collect()
}

/// The caller's groups from the claim `name` of `claims`: absent is none; an array
/// of strings or one string is read with [`groups_from`]; anything else is refused.
fn claimed_groups(
    claims: &HashMap<String, Value>,
    name: &str,
) -> Result<Vec<GroupName>, AuthFailure> {
    let names: Vec<String> = match claims.get(name) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            if items.len() > MAX_CALLER_GROUPS {
                return Err(AuthFailure(format!(
                    "claim {name:?} names {} groups; at most {MAX_CALLER_GROUPS} are read",
                    items.len()
                )));
            }
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        }
        Some(_) => {
            return Err(AuthFailure(format!(
                "claim {name:?} is neither a string nor an array of strings"
            )));
        }
    };
    Ok(groups_from(names))
}

/// Parses an algorithm name (`RS256`, `ES256`, `EdDSA`, ...). HMAC names are refused.
///
/// # Errors
/// A message naming the algorithm.
pub fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    let alg: Algorithm = name
        .parse()
        .map_err(|_| format!("unknown JWT algorithm {name:?}"))?;
    if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
        return Err(format!(
            "{name} is an HMAC algorithm; Holdpoint verifies with public keys only"
        ));
    }
    Ok(alg)
}

/// Why a token was refused (logged, never sent to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthFailure(pub String);

fn fail(msg: impl Into<String>) -> AuthFailure {
    AuthFailure(msg.into())
}

/// A usable verification key.
#[derive(Clone)]
struct Key {
    key: DecodingKey,
    family: Family,
    alg: Option<Algorithm>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Ed,
}

fn family_of(alg: Algorithm) -> Option<Family> {
    match alg {
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => Some(Family::Rsa),
        Algorithm::ES256 | Algorithm::ES384 => Some(Family::Ec),
        Algorithm::EdDSA => Some(Family::Ed),
        _ => None,
    }
}

/// The signing keys of a key set: by `kid`, plus those without one.
#[derive(Clone, Default)]
struct KeySet {
    by_kid: HashMap<String, Key>,
    unnamed: Vec<Key>,
}

impl KeySet {
    fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    /// Parses a JWKS document key by key: keys for encryption, HMAC keys and key
    /// types the JWT library does not know are skipped; the rest of the set stays.
    fn parse(doc: &[u8]) -> Result<(KeySet, usize), String> {
        #[derive(Deserialize)]
        struct Doc {
            keys: Vec<Value>,
        }
        let doc: Doc =
            serde_json::from_slice(doc).map_err(|e| format!("not a JWKS document: {e}"))?;
        let mut set = KeySet::default();
        let mut skipped = 0;
        for raw in doc.keys {
            match Self::key(raw) {
                Some((kid, key)) => match kid {
                    Some(kid) => {
                        set.by_kid.insert(kid, key);
                    }
                    None => set.unnamed.push(key),
                },
                None => skipped += 1,
            }
        }
        Ok((set, skipped))
    }

    fn key(raw: Value) -> Option<(Option<String>, Key)> {
        let jwk: Jwk = serde_json::from_value(raw).ok()?;
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption) | Some(PublicKeyUse::Other(_))
        ) {
            return None;
        }
        let family = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Family::Rsa,
            AlgorithmParameters::EllipticCurve(_) => Family::Ec,
            AlgorithmParameters::OctetKeyPair(_) => Family::Ed,
            // HMAC secrets and unknown key types never verify a person's token.
            _ => return None,
        };
        let alg = match jwk.common.key_algorithm {
            Some(ka) => {
                let alg = key_algorithm(ka)?;
                if family_of(alg) != Some(family) {
                    return None;
                }
                Some(alg)
            }
            None => None,
        };
        let key = DecodingKey::from_jwk(&jwk).ok()?;
        Some((jwk.common.key_id.clone(), Key { key, family, alg }))
    }
}

fn key_algorithm(ka: KeyAlgorithm) -> Option<Algorithm> {
    Some(match ka {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

struct Cache {
    keys: KeySet,
    fetched: Option<Instant>,
}

/// Verifies bearer tokens. Cheap to clone.
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: AuthConfig,
    http: reqwest::Client,
    cache: RwLock<Cache>,
    /// Held while fetching, so concurrent refetches coalesce into one.
    fetch: Mutex<Option<Instant>>,
    fetches: std::sync::atomic::AtomicU64,
    /// Tokens verified recently: SHA-256 of the token -> caller and until when the
    /// answer may be reused (the token's `exp`, at most the key set's TTL).
    verified: std::sync::Mutex<HashMap<[u8; 32], (Caller, Instant)>>,
}

/// Most verified tokens remembered; the cache starts over when full.
const VERIFIED_CACHE: usize = 10_000;

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.inner.cfg.issuer)
            .field("jwks", &self.inner.cfg.jwks)
            .finish_non_exhaustive()
    }
}

/// The claims Holdpoint reads, typed: an array `iss` or a string `exp` is refused.
#[derive(Debug, Deserialize)]
struct Claims {
    #[allow(dead_code)]
    iss: String,
    sub: String,
    exp: NumericDate,
    #[serde(default)]
    nbf: Option<NumericDate>,
    #[serde(default)]
    #[allow(dead_code)]
    iat: Option<NumericDate>,
    #[serde(flatten)]
    rest: HashMap<String, Value>,
}

/// An RFC 7519 NumericDate (`exp`, `nbf`, `iat`): seconds since the Unix epoch as
/// a JSON number, integer or not (RFC 7519 section 2 allows non-integer values).
/// A string, a boolean or a number outside `f64`'s finite range is refused.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct NumericDate(pub f64);

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through `serde_json::Number`, which takes integers and decimals (and keeps
        // working when numbers travel as text, serde_json's `arbitrary_precision`).
        let n = serde_json::Number::deserialize(d)?;
        n.as_f64()
            .filter(|f| f.is_finite())
            .map(NumericDate)
            .ok_or_else(|| serde::de::Error::custom("a NumericDate must be a finite number"))
    }
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Checks `exp` and `nbf` against `now` with `leeway` seconds of clock skew: a
/// token is refused once `now - leeway` is past `exp`, and while `nbf` is later
/// than `now + leeway`.
fn check_times(
    exp: NumericDate,
    nbf: Option<NumericDate>,
    now: f64,
    leeway: u64,
) -> Result<(), AuthFailure> {
    let leeway = leeway as f64;
    if exp.0 < now - leeway {
        return Err(fail(format!("token expired at {}", exp.0)));
    }
    if let Some(nbf) = nbf
        && nbf.0 > now + leeway
    {
        return Err(fail(format!("token not valid before {}", nbf.0)));
    }
    Ok(())
}

impl holdpoint_telemetry::metrics::FetchCount for Verifier {
    fn fetch_count(&self) -> u64 {
        Verifier::fetch_count(self)
    }
}

impl Verifier {
    /// Builds a verifier and loads the key set once (a failed first load is logged;
    /// the next token triggers another attempt).
    ///
    /// # Errors
    /// When the configuration is unusable (no algorithms, or only HMAC ones).
    pub async fn new(cfg: AuthConfig) -> Result<Self, String> {
        let algorithms: Vec<Algorithm> = cfg
            .algorithms
            .iter()
            .copied()
            .filter(|a| family_of(*a).is_some())
            .collect();
        if algorithms.is_empty() {
            return Err(
                "no usable JWT algorithm configured (RS*, PS*, ES256, ES384, EdDSA)".into(),
            );
        }
        let cfg = AuthConfig { algorithms, ..cfg };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        let v = Verifier {
            inner: Arc::new(Inner {
                cfg,
                http,
                cache: RwLock::new(Cache {
                    keys: KeySet::default(),
                    fetched: None,
                }),
                fetch: Mutex::new(None),
                fetches: std::sync::atomic::AtomicU64::new(0),
                verified: std::sync::Mutex::new(HashMap::new()),
            }),
        };
        v.refresh(true).await;
        Ok(v)
    }

    /// How many times the key set was fetched (or read) so far.
    pub fn fetch_count(&self) -> u64 {
        self.inner
            .fetches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn load(&self) -> Result<Vec<u8>, String> {
        self.inner
            .fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match &self.inner.cfg.jwks {
            JwksSource::File(p) => tokio::fs::read(p)
                .await
                .map_err(|e| format!("{}: {e}", p.display())),
            JwksSource::Url(u) => {
                let resp = self
                    .inner
                    .http
                    .get(u)
                    .send()
                    .await
                    .map_err(|e| format!("{u}: {e}"))?;
                if !resp.status().is_success() {
                    return Err(format!("{u}: HTTP {}", resp.status()));
                }
                resp.bytes()
                    .await
                    .map(|b| b.to_vec())
                    .map_err(|e| format!("{u}: {e}"))
            }
        }
    }

    /// Fetches the key set unless another fetch just ran. `force` ignores the
    /// cooldown (start-up, TTL expiry). Concurrent callers wait for one fetch.
    async fn refresh(&self, force: bool) {
        let started = Instant::now();
        let mut last = self.inner.fetch.lock().await;
        // Someone fetched while we waited for the lock: use theirs.
        if let Some(at) = *last
            && (at >= started || (!force && at.elapsed() < self.inner.cfg.refetch_cooldown))
        {
            return;
        }
        *last = Some(Instant::now());
        let loaded = self
            .load()
            .await
            .and_then(|doc| KeySet::parse(&doc))
            .and_then(|(keys, skipped)| {
                // A set without one usable signing key is a broken endpoint, not a
                // revocation: treat it as a failed fetch.
                if keys.len() == 0 {
                    Err(format!(
                        "no usable signing key in the set ({skipped} skipped)"
                    ))
                } else {
                    Ok((keys, skipped))
                }
            });
        match loaded {
            Ok((keys, skipped)) => {
                info!(keys = keys.len(), skipped, "JWKS loaded");
                let mut cache = self.inner.cache.write().await;
                cache.keys = keys;
                cache.fetched = Some(Instant::now());
            }
            Err(e) => {
                // Keep the keys we have.
                warn!(error = %e, "JWKS fetch failed; keeping the previous keys");
            }
        }
    }

    async fn find(&self, kid: Option<&str>, family: Family) -> Option<Key> {
        let cache = self.inner.cache.read().await;
        match kid {
            Some(kid) => cache.keys.by_kid.get(kid).cloned(),
            None => {
                // Without a kid, only a set holding exactly one signing key will do.
                if cache.keys.len() != 1 {
                    return None;
                }
                cache
                    .keys
                    .unnamed
                    .first()
                    .or_else(|| cache.keys.by_kid.values().next())
                    .filter(|k| k.family == family)
                    .cloned()
            }
        }
    }

    /// Verifies a bearer token.
    ///
    /// # Errors
    /// [`AuthFailure`] with the reason (for the log).
    pub async fn verify(&self, token: &str) -> Result<Caller, AuthFailure> {
        // A token verified moments ago needs no second signature check: reuse the
        // answer until the token expires (and at most for the key set's TTL).
        let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()).into();
        if let Ok(cache) = self.inner.verified.lock()
            && let Some((caller, until)) = cache.get(&digest)
            && Instant::now() < *until
        {
            return Ok(caller.clone());
        }
        let caller = self.verify_uncached(token).await?;
        Ok(caller)
    }

    /// Verifies a bearer token without consulting the cache of recently verified
    /// tokens (benchmarks measure the signature cost with it).
    ///
    /// # Errors
    /// [`AuthFailure`] with the reason (for the log).
    pub async fn verify_uncached(&self, token: &str) -> Result<Caller, AuthFailure> {
        let cfg = &self.inner.cfg;
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| fail(format!("bad header: {e}")))?;
        if !cfg.algorithms.contains(&header.alg) {
            return Err(fail(format!("algorithm {:?} not allowed", header.alg)));
        }
        let family = family_of(header.alg).ok_or_else(|| fail("HMAC tokens are never accepted"))?;
        let expired = {
            let cache = self.inner.cache.read().await;
            cache.fetched.is_none_or(|t| t.elapsed() > cfg.jwks_ttl)
        };
        if expired {
            // After the TTL: refetch, but at most once per cooldown, so an issuer
            // that is down does not get one fetch per request.
            self.refresh(false).await;
        }
        let kid = header.kid.as_deref();
        let key = match self.find(kid, family).await {
            Some(k) => k,
            None if kid.is_some() => {
                // An unknown kid: the issuer may have rotated its keys.
                self.refresh(false).await;
                self.find(kid, family)
                    .await
                    .ok_or_else(|| fail(format!("unknown kid {kid:?}")))?
            }
            None => {
                return Err(fail(
                    "token has no kid and the key set does not hold exactly one signing key",
                ));
            }
        };
        if key.family != family || key.alg.is_some_and(|a| a != header.alg) {
            return Err(fail(format!(
                "key does not match algorithm {:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        // `exp` and `nbf` are checked below, from the typed claims: the library reads
        // NumericDates as integers only, where RFC 7519 allows decimals.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_required_spec_claims(&["iss", "sub"]);
        validation.set_issuer(&[cfg.issuer.as_str()]);
        match &cfg.audience {
            Some(aud) => {
                validation.set_audience(&[aud.as_str()]);
                validation.required_spec_claims.insert("aud".into());
            }
            None => validation.validate_aud = false,
        }
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| fail(format!("invalid token: {e}")))?;
        let claims = data.claims;
        let now = unix_now();
        check_times(claims.exp, claims.nbf, now, cfg.leeway_secs)?;
        let org = claims
            .rest
            .get(&cfg.org_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| fail(format!("claim {:?} missing or not a string", cfg.org_claim)))?;
        let org = OrgId::parse(org).map_err(|e| fail(format!("claim {:?}: {e}", cfg.org_claim)))?;
        let person = PersonId::parse(claims.sub).map_err(|e| fail(format!("sub: {e}")))?;
        let groups = match &cfg.groups_claim {
            Some(name) => claimed_groups(&claims.rest, name)?,
            None => Vec::new(),
        };
        let caller = Caller {
            org,
            person,
            groups,
        };
        let valid_for = Duration::try_from_secs_f64((claims.exp.0 - now).max(0.0))
            .unwrap_or(cfg.jwks_ttl)
            .min(cfg.jwks_ttl);
        let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()).into();
        if let Ok(mut cache) = self.inner.verified.lock() {
            if cache.len() >= VERIFIED_CACHE {
                cache.clear();
            }
            cache.insert(digest, (caller.clone(), Instant::now() + valid_for));
        }
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(json: &str) -> Result<NumericDate, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn numeric_dates_may_be_decimal_but_not_text() {
        assert_eq!(date("1700000000").expect("integer").0, 1_700_000_000.0);
        assert_eq!(date("1700000000.5").expect("decimal").0, 1_700_000_000.5);
        assert_eq!(date("1.7e9").expect("exponent").0, 1_700_000_000.0);
        for bad in ["\"1700000000\"", "true", "null", "[1]", "{}"] {
            assert!(date(bad).is_err(), "{bad}");
        }
        // Inside a struct with flattened claims, as Claims reads them.
        let c: Claims = serde_json::from_str(
            r#"{"iss":"i","sub":"s","exp":10.5,"nbf":1.25,"iat":1,"org":"acme"}"#,
        )
        .expect("claims");
        assert_eq!((c.exp.0, c.nbf.map(|n| n.0)), (10.5, Some(1.25)));
        assert!(serde_json::from_str::<Claims>(r#"{"iss":"i","sub":"s","exp":"10"}"#).is_err());
    }

    #[test]
    fn times_are_checked_with_the_leeway() {
        let now = 1000.0;
        assert!(check_times(NumericDate(1000.5), None, now, 0).is_ok());
        assert!(check_times(NumericDate(999.5), None, now, 0).is_err());
        assert!(check_times(NumericDate(999.5), None, now, 1).is_ok());
        assert!(check_times(NumericDate(2000.0), Some(NumericDate(1000.25)), now, 0).is_err());
        assert!(check_times(NumericDate(2000.0), Some(NumericDate(1000.25)), now, 1).is_ok());
        assert!(check_times(NumericDate(2000.0), Some(NumericDate(999.75)), now, 0).is_ok());
    }
}
