//! JWT verification cost per algorithm, with the ingress's own verifier.

#[allow(unused_imports)]
use super::*;

/// Verification cost per algorithm: one token per algorithm, verified `n` times by
/// the ingress's own `Verifier` (keys cached after the first load).
pub(crate) async fn jwt_costs(dir: &Path, n: u32) -> anyhow::Result<Vec<(&'static str, f64)>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use holdpoint_ingress::identity::jwt::{AuthConfig, JwksSource, Verifier};
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use ring::signature::{self, KeyPair as _};
    let rng = ring::rand::SystemRandom::new();
    let ed =
        signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| anyhow::anyhow!("keygen"))?;
    let ed_pub =
        signature::Ed25519KeyPair::from_pkcs8(ed.as_ref()).map_err(|_| anyhow::anyhow!("key"))?;
    let ec_alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let ec = signature::EcdsaKeyPair::generate_pkcs8(ec_alg, &rng)
        .map_err(|_| anyhow::anyhow!("keygen"))?;
    let ec_pair = signature::EcdsaKeyPair::from_pkcs8(ec_alg, ec.as_ref(), &rng)
        .map_err(|_| anyhow::anyhow!("key"))?;
    let ec_pub = ec_pair.public_key().as_ref();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let rsa_pem = std::fs::read(fixtures.join("rsa-test-key.pem"))?;
    let mut rsa_jwk: Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("rsa-test.jwk.json"))?)?;
    rsa_jwk["kid"] = json!("rsa");
    let jwks = json!({"keys": [
        rsa_jwk,
        {"kty": "EC", "crv": "P-256", "kid": "ec", "x": B64.encode(&ec_pub[1..33]), "y": B64.encode(&ec_pub[33..65])},
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": B64.encode(ed_pub.public_key().as_ref())},
    ]});
    let path = dir.join("bench-jwks.json");
    std::fs::write(&path, serde_json::to_vec(&jwks)?)?;
    let verifier = Verifier::new(AuthConfig::new("bench", JwksSource::File(path)))
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let claims = json!({"iss": "bench", "sub": "p", "org": "bench", "exp": 4_000_000_000u64});
    let mut out = Vec::new();
    for (name, alg, kid, key) in [
        (
            "RS256",
            Algorithm::RS256,
            "rsa",
            EncodingKey::from_rsa_pem(&rsa_pem)?,
        ),
        (
            "ES256",
            Algorithm::ES256,
            "ec",
            EncodingKey::from_ec_der(ec.as_ref()),
        ),
        (
            "EdDSA",
            Algorithm::EdDSA,
            "ed",
            EncodingKey::from_ed_der(ed.as_ref()),
        ),
    ] {
        let mut header = Header::new(alg);
        header.kid = Some(kid.into());
        let token = jsonwebtoken::encode(&header, &claims, &key)?;
        verifier
            .verify(&token)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let started = Instant::now();
        for _ in 0..n {
            verifier
                .verify_uncached(&token)
                .await
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        out.push((name, started.elapsed().as_secs_f64() * 1e6 / f64::from(n)));
        if name == "EdDSA" {
            let started = Instant::now();
            for _ in 0..n {
                verifier
                    .verify(&token)
                    .await
                    .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            }
            out.push((
                "any, token seen before (cache hit)",
                started.elapsed().as_secs_f64() * 1e6 / f64::from(n),
            ));
        }
    }
    Ok(out)
}
