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

/// The README's shell blocks marked `<!-- docs-test N -->` (or `<!-- docs-test N
/// server -->`), in the order N: (order, is the server, text).
fn marked_blocks(readme: &str) -> Vec<(u32, bool, String)> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(at) = rest.find("<!-- docs-test ") {
        let after = &rest[at + "<!-- docs-test ".len()..];
        let end = after.find("-->").expect("a closed docs-test marker");
        let words: Vec<&str> = after[..end].split_whitespace().collect();
        let order: u32 = words[0].parse().expect("docs-test N");
        let server = words.get(1) == Some(&"server");
        let body = &after[end..];
        let start = body.find("```sh\n").expect("a sh block after the marker") + 6;
        let stop = start + body[start..].find("\n```").expect("the block's end");
        out.push((order, server, body[start..stop].to_owned()));
        rest = &body[stop..];
    }
    out.sort_by_key(|b| b.0);
    out
}

/// A shell block's commands without comments and blank lines.
fn command_of(block: &str) -> Vec<String> {
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The walkthroughs (the local quick start with tokens,
/// "Trying it with curl", deadlines, the command line, webhooks, an
/// organisation's NATS user) run exactly as README.md shows them, in one shell, in
/// a network namespace of their own (so the README's ports, 4290, 8080 and 8081,
/// are free and nothing leaves the machine). The first `server` block runs in the
/// background for the rest, as a second terminal would; a later identical one is
/// that same server. The development key goes to a temporary `XDG_STATE_HOME`, the
/// store to a temporary `HOLDPOINT_STORE`. Needs root (`unshare -n`), as CI has.
#[test]
fn readme_walkthroughs_run_as_pasted() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let blocks = marked_blocks(&readme);
    assert!(
        blocks.len() >= 9,
        "docs-test markers missing: {}",
        blocks.len()
    );
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test runs the README in a network namespace of its own (unshare -n) and needs root"
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = holdpoint_tests::app::holdpoint_binary();
    let bin_dir = bin.parent().expect("the binary's directory");
    let nats = holdpoint_cli::localnats::find_binary().expect("a nats-server (ops/setup.sh)");
    let mut script = format!(
        "set -euo pipefail\nip link set lo up\ncd {root:?}\n\
         export XDG_STATE_HOME={state:?} HOLDPOINT_STORE={store:?} HOLDPOINT_NATS_SERVER={nats:?} \
         PATH={bin_dir:?}:\"$PATH\" NO_COLOR=1\nserver=\ntrap '[[ -n \"$server\" ]] && kill \"$server\" 2>/dev/null; wait' EXIT\n",
        state = tmp.path().join("state"),
        store = tmp.path().join("nats"),
    );
    let mut server: Option<String> = None;
    for (n, is_server, text) in &blocks {
        if *is_server {
            match &server {
                Some(first) => assert_eq!(
                    command_of(first),
                    command_of(text),
                    "block {n}: a second, different server"
                ),
                None => {
                    script.push_str(&format!(
                        "echo '::block {n} (server, in the background)'\n( {text}\n) >{log:?} 2>&1 &\nserver=$!\n\
                         for _ in $(seq 600); do curl -sf -o /dev/null http://127.0.0.1:8081/readyz && break; sleep 0.5; done\n\
                         curl -sf -o /dev/null http://127.0.0.1:8081/readyz\n",
                        log = tmp.path().join("server.log")
                    ));
                    server = Some(text.clone());
                }
            }
            continue;
        }
        script.push_str(&format!("echo '::block {n}'\n{text}\n"));
    }
    script.push_str("echo '::all blocks ran'\n");
    // The script and its output stay in target/docs-test/ for a look after a failure.
    let keep = root.join("target/docs-test");
    std::fs::create_dir_all(&keep).expect("target/docs-test");
    std::fs::write(keep.join("readme.sh"), &script).expect("write the script");
    let log = std::fs::File::create(keep.join("readme.log")).expect("the log");
    let out = std::process::Command::new("timeout")
        .args(["400", "unshare", "-n", "bash"])
        .arg(keep.join("readme.sh"))
        .stdout(log.try_clone().expect("log"))
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run unshare");
    let stdout = std::fs::read_to_string(keep.join("readme.log")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let server_log = std::fs::read_to_string(tmp.path().join("server.log")).unwrap_or_default();
    let shown = format!(
        "stdout:\n{stdout}\nstderr:\n{stderr}\nserver log (tail):\n{}",
        server_log
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        out.status.success(),
        "a README command failed ({}):\n{shown}",
        out.status
    );
    assert!(stdout.contains("::all blocks ran"), "{shown}");
    // What the walkthroughs say happens: the approvals and the answer are 204, the
    // late approval after the deadline is the 409 the deadlines section shows.
    assert!(stdout.contains("HTTP/1.1 204"), "no 204 answer:\n{shown}");
    assert!(
        stdout.contains("NRY-0009") && stdout.contains("interaction eff_9 expired at"),
        "the deadlines walkthrough did not end in its 409:\n{shown}"
    );
}
