//! A2A service parameters: the protocol version the client speaks
//! ([`check_version`]; a missing header is read as 0.3 and refused, unless
//! [`MissingVersion::Is1_0`] is configured) and the extensions it activates
//! ([`Negotiated`]).

use a2a_lf::error_code;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use holdpoint_domain::EXTENSION_URI;

use super::error::RpcError;

/// Request header naming the A2A protocol version the client speaks.
pub const VERSION_HEADER: &str = "a2a-version";
/// Request header activating extensions (comma-separated URIs); echoed on responses
/// with the activated ones.
pub const EXTENSIONS_HEADER: &str = "a2a-extensions";
/// The older name of [`EXTENSIONS_HEADER`] (A2A 0.3), also accepted and echoed.
pub const LEGACY_EXTENSIONS_HEADER: &str = "x-a2a-extensions";

/// What the request's service parameters asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// The activated extensions (only ones Holdpoint supports).
    pub activated: Vec<String>,
    /// The request used the older `X-A2A-Extensions` header.
    pub legacy: bool,
}

impl Negotiated {
    /// Reads `A2A-Extensions` and `X-A2A-Extensions` (each possibly repeated, each a
    /// comma-separated list of URIs). Unknown URIs are ignored, as A2A asks.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut requested = Vec::new();
        let mut legacy = false;
        for (name, is_legacy) in [(EXTENSIONS_HEADER, false), (LEGACY_EXTENSIONS_HEADER, true)] {
            for value in headers.get_all(name) {
                let Ok(value) = value.to_str() else { continue };
                legacy |= is_legacy;
                requested.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        let activated = if requested.iter().any(|u| u == EXTENSION_URI) {
            vec![EXTENSION_URI.to_owned()]
        } else {
            Vec::new()
        };
        Negotiated { activated, legacy }
    }

    /// True when the interactions extension is active for this request.
    pub fn interactions(&self) -> bool {
        self.activated.iter().any(|u| u == EXTENSION_URI)
    }

    /// Adds the echo headers to `resp`.
    pub fn echo(&self, mut resp: Response) -> Response {
        if self.activated.is_empty() {
            return resp;
        }
        if let Ok(v) = HeaderValue::from_str(&self.activated.join(", ")) {
            resp.headers_mut()
                .insert(HeaderName::from_static(EXTENSIONS_HEADER), v.clone());
            if self.legacy {
                resp.headers_mut()
                    .insert(HeaderName::from_static(LEGACY_EXTENSIONS_HEADER), v);
            }
        }
        resp
    }
}

/// How a request without `A2A-Version` (or with an empty one) is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingVersion {
    /// As version 0.3, which this server does not speak: `VersionNotSupportedError`
    /// (-32009). What the A2A v1.0 specification's service parameters ask; the
    /// default.
    #[default]
    Is0_3,
    /// As 1.0: a compatibility switch for clients that never send the header
    /// ([`IngressConfig::a2a_missing_version_is_1_0`](crate::IngressConfig::a2a_missing_version_is_1_0)).
    Is1_0,
}

/// Checks `A2A-Version` (exactly one header): `1`, `1.0` and `1.0.<patch>` are
/// this server's version. A missing or empty one is read as `missing` says (by
/// default 0.3, refused); anything else is `VersionNotSupportedError` (-32009).
///
/// # Errors
/// `VersionNotSupportedError` with a message that says what was read.
pub fn check_version(headers: &HeaderMap, missing: MissingVersion) -> Result<(), RpcError> {
    let mut values = headers.get_all(VERSION_HEADER).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => "",
        (Some(v), None) => v.to_str().unwrap_or("?").trim(),
        (Some(_), Some(_)) => {
            return Err(RpcError::new(
                error_code::VERSION_NOT_SUPPORTED,
                "send one A2A-Version header; this server speaks 1.0",
            ));
        }
    };
    if value.is_empty() {
        return match missing {
            MissingVersion::Is1_0 => Ok(()),
            MissingVersion::Is0_3 => Err(RpcError::new(
                error_code::VERSION_NOT_SUPPORTED,
                "no A2A-Version header, which A2A reads as version 0.3; this server speaks 1.0: \
                 send A2A-Version: 1.0",
            )),
        };
    }
    let mut parts = value.split('.');
    let ok = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("1"), None, _, _) | (Some("1"), Some("0"), None, _) => true,
        (Some("1"), Some("0"), Some(patch), None) => {
            !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(RpcError::new(
            error_code::VERSION_NOT_SUPPORTED,
            format!("A2A version {value:?} is not supported; this server speaks 1.0"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        use MissingVersion::{Is0_3, Is1_0};
        let mut h = HeaderMap::new();
        // Missing: 0.3 unless the compatibility switch says 1.0.
        let e = check_version(&h, Is0_3).expect_err("missing");
        assert_eq!(e.code, error_code::VERSION_NOT_SUPPORTED);
        assert!(check_version(&h, Is1_0).is_ok());
        for ok in ["1", "1.0", "1.0.3", " 1.0 "] {
            h.insert(VERSION_HEADER, HeaderValue::from_str(ok).expect("value"));
            assert!(check_version(&h, Is0_3).is_ok(), "{ok}");
        }
        // Empty is missing.
        h.insert(VERSION_HEADER, HeaderValue::from_static(""));
        assert!(check_version(&h, Is0_3).is_err());
        assert!(check_version(&h, Is1_0).is_ok());
        for bad in ["0.3", "2.0", "1.1", "1.0.x", "v1"] {
            h.insert(VERSION_HEADER, HeaderValue::from_str(bad).expect("value"));
            for missing in [Is0_3, Is1_0] {
                let e = check_version(&h, missing).expect_err(bad);
                assert_eq!(e.code, error_code::VERSION_NOT_SUPPORTED);
            }
        }
    }

    #[test]
    fn extension_headers() {
        let mut h = HeaderMap::new();
        assert!(!Negotiated::from_headers(&h).interactions());
        h.insert(
            EXTENSIONS_HEADER,
            HeaderValue::from_str(&format!("https://other.example/x, {EXTENSION_URI}"))
                .expect("value"),
        );
        let n = Negotiated::from_headers(&h);
        assert_eq!(n.activated, vec![EXTENSION_URI.to_owned()]);
        assert!(!n.legacy);
        let mut h = HeaderMap::new();
        h.insert(
            LEGACY_EXTENSIONS_HEADER,
            HeaderValue::from_static(EXTENSION_URI),
        );
        let n = Negotiated::from_headers(&h);
        assert!(n.interactions() && n.legacy);
    }
}
