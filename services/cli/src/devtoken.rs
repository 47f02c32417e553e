//! `holdpoint dev-token`: for the local quick start only. Creates (once) an Ed25519
//! signing key and the matching JWKS file in one directory per user
//! ([`default_dir`]: `$HOLDPOINT_DEV_JWT_DIR`, else
//! `$XDG_STATE_HOME/holdpoint/dev-jwt`, else `~/.local/state/holdpoint/dev-jwt`),
//! whatever the working directory, and prints a JWT for a person of an
//! organisation, signed with that key. `holdpoint up --dev-jwt` (and `ingress
//! --dev-jwt`) verifies against the same JWKS, exactly as it would against a real
//! identity provider's, so a token made in one folder works with a server started
//! in another.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::json;

/// The issuer of development tokens.
pub const DEV_ISSUER: &str = "holdpoint-dev";
/// The audience of development tokens.
pub const DEV_AUDIENCE: &str = "holdpoint";
/// The variable naming the development key's directory.
pub const DEV_DIR_ENV: &str = "HOLDPOINT_DEV_JWT_DIR";

/// The development key's directory: `$HOLDPOINT_DEV_JWT_DIR`, else
/// `$XDG_STATE_HOME/holdpoint/dev-jwt`, else `$HOME/.local/state/holdpoint/dev-jwt`,
/// else (no home) `.holdpoint/dev-jwt` in the working directory.
pub fn default_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(DEV_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(state) = var("XDG_STATE_HOME") {
        return PathBuf::from(state).join("holdpoint/dev-jwt");
    }
    if let Some(home) = var("HOME") {
        return PathBuf::from(home).join(".local/state/holdpoint/dev-jwt");
    }
    PathBuf::from(".holdpoint/dev-jwt")
}

/// A development signing key and its JWKS file.
#[derive(Debug)]
pub struct DevKey {
    pkcs8: Vec<u8>,
    kid: String,
    /// The JWKS file.
    pub jwks: PathBuf,
}

impl DevKey {
    /// Loads the key in `dir`, creating it (and the JWKS file) if absent.
    ///
    /// # Errors
    /// On IO errors or a corrupt key file.
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Self> {
        let key_path = dir.join("signing-key.pk8");
        let jwks = dir.join("jwks.json");
        if !key_path.exists() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            let rng = ring::rand::SystemRandom::new();
            let doc = Ed25519KeyPair::generate_pkcs8(&rng)
                .map_err(|_| anyhow::anyhow!("key generation failed"))?;
            // Written aside, then linked into place: of two processes creating the
            // key at once, one link wins and both use its key.
            let tmp = tempfile::Builder::new()
                .prefix(".signing-key")
                .tempfile_in(dir)?;
            std::fs::write(tmp.path(), doc.as_ref())?;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o600))?;
            match std::fs::hard_link(tmp.path(), &key_path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e).with_context(|| format!("writing {}", key_path.display())),
            }
        }
        let pkcs8 =
            std::fs::read(&key_path).with_context(|| format!("reading {}", key_path.display()))?;
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8)
            .map_err(|_| anyhow::anyhow!("{} is not an Ed25519 PKCS#8 key", key_path.display()))?;
        let public = pair.public_key().as_ref();
        let kid = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(public)[..8]);
        let doc = json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
            "kid": kid, "x": URL_SAFE_NO_PAD.encode(public),
        }]});
        // Replaced whole (rename), so a server reading it never sees half a file.
        let tmp = tempfile::Builder::new().prefix(".jwks").tempfile_in(dir)?;
        std::fs::write(tmp.path(), serde_json::to_vec_pretty(&doc)?)?;
        tmp.persist(&jwks)
            .with_context(|| format!("writing {}", jwks.display()))?;
        Ok(DevKey { pkcs8, kid, jwks })
    }

    /// A token for `person` in `org`, valid for `ttl_secs`.
    ///
    /// # Errors
    /// When signing fails.
    pub fn token(
        &self,
        org: &str,
        person: &str,
        org_claim: &str,
        ttl_secs: u64,
    ) -> anyhow::Result<String> {
        if org.is_empty() || person.is_empty() {
            bail!("--org and --person must not be empty");
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let mut claims = json!({
            "iss": DEV_ISSUER, "aud": DEV_AUDIENCE, "sub": person,
            "iat": now, "nbf": now, "exp": now + ttl_secs,
        });
        if let Some(obj) = claims.as_object_mut() {
            obj.insert(org_claim.to_owned(), json!(org));
        }
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        Ok(jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_ed_der(&self.pkcs8),
        )?)
    }
}

/// `holdpoint dev-token`.
#[derive(Debug, Clone, clap::Args)]
pub struct DevTokenArgs {
    /// Organisation.
    #[arg(long)]
    pub org: String,
    /// Person (`sub`).
    #[arg(long)]
    pub person: String,
    /// Directory of the development key and JWKS (default:
    /// $XDG_STATE_HOME/holdpoint/dev-jwt, else ~/.local/state/holdpoint/dev-jwt;
    /// `up --dev-jwt` reads the same).
    #[arg(long, env = "HOLDPOINT_DEV_JWT_DIR")]
    pub dir: Option<PathBuf>,
    /// The organisation claim's name.
    #[arg(long, default_value = "org")]
    pub org_claim: String,
    /// Validity, in seconds.
    #[arg(long, default_value_t = 12 * 3600)]
    pub ttl_secs: u64,
}
