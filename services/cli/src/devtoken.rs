//! `holdpoint dev-token`: for the local quick start only. Creates (once) an Ed25519
//! signing key and the matching JWKS file under a directory Holdpoint owns, and
//! prints a JWT for a person of an organisation, signed with that key. `holdpoint up
//! --dev-jwt` verifies against the same JWKS, exactly as it would against a real
//! identity provider's.

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
/// Default directory of the development key.
pub const DEV_DIR: &str = ".holdpoint/dev-jwt";

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
        let pkcs8 = if key_path.exists() {
            std::fs::read(&key_path).with_context(|| format!("reading {}", key_path.display()))?
        } else {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            let rng = ring::rand::SystemRandom::new();
            let doc = Ed25519KeyPair::generate_pkcs8(&rng)
                .map_err(|_| anyhow::anyhow!("key generation failed"))?;
            std::fs::write(&key_path, doc.as_ref())?;
            std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600))?;
            doc.as_ref().to_vec()
        };
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8)
            .map_err(|_| anyhow::anyhow!("{} is not an Ed25519 PKCS#8 key", key_path.display()))?;
        let public = pair.public_key().as_ref();
        let kid = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(public)[..8]);
        let doc = json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
            "kid": kid, "x": URL_SAFE_NO_PAD.encode(public),
        }]});
        std::fs::write(&jwks, serde_json::to_vec_pretty(&doc)?)?;
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
