//! The error catalog is documented in one place and generated into
//! `schemas/errors.json`; these tests fail when either drifts from the code.
//! Run with `HOLDPOINT_BLESS=1` to regenerate `schemas/errors.json`.

use holdpoint_domain::ErrorCode;
use holdpoint_tests::nats::workspace_root;
use serde_json::json;

fn catalog() -> serde_json::Value {
    let codes: Vec<_> = ErrorCode::ALL
        .iter()
        .map(|c| {
            let s = c.spec();
            json!({"code": s.code, "status": s.status, "title": s.title, "retryable": c.retryable()})
        })
        .collect();
    json!({
        "$comment": "Generated from holdpoint_domain::ErrorCode; do not edit. Every error body is {code, title, message}.",
        "errors": codes,
    })
}

#[test]
fn schemas_errors_json_matches_the_code() {
    let path = workspace_root().join("schemas/errors.json");
    let want = format!(
        "{}\n",
        serde_json::to_string_pretty(&catalog()).expect("json")
    );
    if std::env::var_os("HOLDPOINT_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        have, want,
        "schemas/errors.json is stale: rerun with HOLDPOINT_BLESS=1"
    );
}

#[test]
fn readme_error_table_matches_the_code() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let start = readme
        .find("<!-- errors:start -->")
        .expect("errors:start marker");
    let end = readme
        .find("<!-- errors:end -->")
        .expect("errors:end marker");
    let rows: Vec<(String, u16, String)> = readme[start..end]
        .lines()
        .filter(|l| l.starts_with("| NRY-"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[1].to_owned(),
                cells[2].parse().expect("status"),
                cells[3].to_owned(),
            )
        })
        .collect();
    let code: Vec<(String, u16, String)> = ErrorCode::ALL
        .iter()
        .map(|c| {
            let s = c.spec();
            (s.code.to_owned(), s.status, s.title.to_owned())
        })
        .collect();
    assert_eq!(
        rows, code,
        "README's error table differs from ErrorCode::spec"
    );
}

/// Replaces what README.md holds between `<!-- <name>:start -->` and
/// `<!-- <name>:end -->` with `body` when blessing; returns (have, want).
fn readme_region(readme: &str, name: &str, body: &str) -> (String, String) {
    let start = format!("<!-- {name}:start -->\n");
    let end = format!("<!-- {name}:end -->");
    let a = readme
        .find(&start)
        .unwrap_or_else(|| panic!("README.md has no {start:?}"))
        + start.len();
    let b = a + readme[a..]
        .find(&end)
        .unwrap_or_else(|| panic!("README.md has no {end:?}"));
    (readme[a..b].to_owned(), body.to_owned())
}

#[test]
fn readme_configuration_tables_match_the_code() {
    let path = workspace_root().join("README.md");
    let mut readme = std::fs::read_to_string(&path).expect("README.md");
    for name in ["config", "identity"] {
        let region = if name == "config" {
            "config"
        } else {
            "identity-config"
        };
        let (have, want) = readme_region(
            &readme,
            region,
            &holdpoint_cli::config::reference::markdown(name),
        );
        if std::env::var_os("HOLDPOINT_BLESS").is_some() {
            readme = readme.replacen(
                &format!("<!-- {region}:start -->\n{have}"),
                &format!("<!-- {region}:start -->\n{want}"),
                1,
            );
            std::fs::write(&path, &readme).expect("write README.md");
            continue;
        }
        assert_eq!(
            have, want,
            "README.md's {name} table differs from holdpoint_cli::config::reference: \
             rerun with HOLDPOINT_BLESS=1"
        );
    }
}
