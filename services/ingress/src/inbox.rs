//! The web inbox: a page at `/inbox` where people answer what waits for them.
//!
//! The page is plain HTML, CSS and JavaScript embedded in the binary
//! (`include_str!` of the files in `services/ingress/src/inbox/`); nothing is built
//! on the server and nothing is fetched from anywhere but this ingress. It is a
//! client of the API like any other: it reads `GET /v1/interactions`, follows
//! `GET /v1/events` (SSE, over `fetch` so it can send `Authorization: Bearer`),
//! loads each new interaction with `GET /v1/interactions/{id}` and answers with
//! the REST operations (a `remember` choice included); its History pages through
//! `GET /v1/interactions?state=all` and `GET /v1/audit`. So the page itself holds
//! no data and needs no identity; every request it makes is authenticated and
//! scoped like a curl call.
//!
//! | path | what |
//! |---|---|
//! | `GET /inbox` | the page (`index.html`) |
//! | `GET /inbox/` | `308` to `../inbox`, so relative asset paths resolve one way |
//! | `GET /inbox/inbox.js`, `/inbox/inbox.css` | the page's script and styles |
//! | `GET /inbox/vendor/eventsource-parser.js` | the SSE parser (npm `eventsource-parser`, MIT; the SDK's tests check it is the pinned version) |
//! | `GET /inbox/icon.svg` | the page's icon |
//!
//! Every response carries a strict Content-Security-Policy ([`CSP`]): scripts,
//! styles, images and connections from this origin only, no inline script or
//! style, no plugins, no framing, no form posts, and Trusted Types required, so
//! the browser refuses any HTML string sink (`innerHTML` with data throws); the
//! page writes text with `textContent` only.
//!
//! Where the token comes from (see the README, "Web inbox"): the URL fragment
//! (`#token=…`, which browsers never send to a server, printed by `holdpoint up
//! --dev-jwt`), the tab's session storage, a pasted token, or none at all when a
//! proxy in front adds `Authorization` itself.

use axum::Router;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

/// One embedded file: its path under the ingress, media type and bytes.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The request path (`/inbox`, `/inbox/inbox.js`, ...).
    pub path: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The file.
    pub body: &'static str,
}

/// Every file the inbox serves.
pub const ASSETS: [Asset; 5] = [
    Asset {
        path: "/inbox",
        content_type: "text/html; charset=utf-8",
        body: include_str!("inbox/index.html"),
    },
    Asset {
        path: "/inbox/inbox.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("inbox/inbox.js"),
    },
    Asset {
        path: "/inbox/inbox.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("inbox/inbox.css"),
    },
    Asset {
        path: "/inbox/vendor/eventsource-parser.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("inbox/vendor/eventsource-parser.js"),
    },
    Asset {
        path: "/inbox/icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("inbox/icon.svg"),
    },
];

/// The inbox's routes (public: the files hold no data). Merged into the API
/// router by [`crate::router`].
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new().route(
        "/inbox/",
        get(|| async {
            (
                StatusCode::PERMANENT_REDIRECT,
                [(header::LOCATION, "../inbox")],
            )
        }),
    );
    for asset in ASSETS {
        router = router.route(asset.path, get(move || async move { serve(asset) }));
    }
    router
}

fn serve(asset: Asset) -> Response {
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ),
        // Revalidate on every load, so a new binary's page is never mixed with an
        // old script.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, asset.body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn get_path(path: &str) -> Response {
        router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible")
    }

    #[tokio::test]
    async fn inbox_serves_every_asset_with_its_type_and_the_policy() {
        for asset in ASSETS {
            let resp = get_path(asset.path).await;
            assert_eq!(resp.status(), StatusCode::OK, "{}", asset.path);
            let h = resp.headers();
            assert_eq!(
                h[header::CONTENT_TYPE],
                asset.content_type,
                "{}",
                asset.path
            );
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP, "{}", asset.path);
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .expect("body");
            assert_eq!(body, asset.body.as_bytes(), "{}", asset.path);
        }
        let resp = get_path("/inbox/").await;
        assert_eq!(resp.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(resp.headers()[header::LOCATION], "../inbox");
    }

    #[test]
    fn inbox_policy_allows_nothing_inline_or_foreign() {
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "require-trusted-types-for 'script'",
        ] {
            assert!(CSP.contains(directive), "{directive}");
        }
        assert!(!CSP.contains("unsafe"), "{CSP}");
        assert!(!CSP.contains("http"), "{CSP}");
    }

    /// The page loads only its own files: no inline script or style (the policy
    /// would block them), no handler attributes, no URL of another origin.
    #[test]
    fn inbox_page_references_only_its_own_files() {
        let html = ASSETS[0].body;
        assert!(!html.contains("http:") && !html.contains("https:") && !html.contains("//"));
        assert!(!html.contains(" style=") && !html.contains("<style"));
        assert!(!html.contains("javascript:"));
        for tag in html.split("<script").skip(1) {
            let open = &tag[..tag.find('>').expect("tag end")];
            assert!(open.contains(" src="), "inline script: <script{open}>");
            assert!(tag[tag.find('>').expect("tag end") + 1..].starts_with("</script>"));
        }
        for attr in ["onclick", "onload", "onerror", "onsubmit"] {
            assert!(!html.contains(attr), "{attr}");
        }
        for asset in &ASSETS[1..] {
            let js = asset.body;
            assert!(!js.contains("innerHTML"), "{}", asset.path);
            assert!(!js.contains("eval("), "{}", asset.path);
        }
    }
}
