//! The tables' rows read as the code sets them (see the parent module).

use clap::Parser as _;

use super::*;
use crate::config::Service;
use crate::{Cli, Verb};

/// Every leaf key of a configuration, with its value as TOML text.
fn leaves(c: &Config) -> std::collections::BTreeMap<String, String> {
    let table: toml::Table = toml::to_string(c).expect("toml").parse().expect("table");
    let mut out = std::collections::BTreeMap::new();
    for (section, keys) in table {
        for (k, v) in keys.as_table().into_iter().flatten() {
            out.insert(format!("{section}.{k}"), v.to_string());
        }
    }
    out
}

fn parsed(argv: &[&str]) -> Config {
    let cli = Cli::try_parse_from(std::iter::once("holdpoint").chain(argv.iter().copied()))
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    match cli.command {
        Verb::Up(a) => a.config(Service::Up),
        Verb::Ingress(a) => a.config(),
        Verb::Worker(a) => a.config(),
        Verb::Notifier(a) => a.config(),
        other => panic!("not a service: {other:?}"),
    }
    .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

#[test]
fn each_flag_sets_exactly_its_key() {
    let base = leaves(&Config::default());
    for st in SETTINGS {
        let Some(flag) = st.flag else { continue };
        let (verbs, _) = flag_info(flag);
        let verb = verbs
            .first()
            .unwrap_or_else(|| panic!("{flag} is no service flag"));
        let arg = format!("{flag}={}", st.sample);
        // A JWT issuer needs a key set, and a key set an issuer.
        let mut argv = vec![*verb, arg.as_str()];
        match st.key {
            "auth.jwt_issuer" => argv.push("--jwks-url=https://idp.example/jwks.json"),
            "auth.jwks_url" | "auth.jwks_file" => argv.push("--jwt-issuer=idp"),
            _ => {}
        }
        if *verb != "up" {
            argv.push("--nats-url=nats://n:4222");
        }
        if st.key == "telemetry.otlp_endpoint" && cfg!(not(feature = "otlp")) {
            // A build without export refuses the key, naming it.
            let cli = Cli::try_parse_from(std::iter::once("holdpoint").chain(argv.iter().copied()))
                .expect("parses");
            let Verb::Up(a) = cli.command else {
                panic!("up")
            };
            let e = a.config(Service::Up).expect_err("no otlp feature");
            assert!(e.to_string().starts_with(st.key), "{e}");
            continue;
        }
        let got = leaves(&parsed(&argv));
        let changed: Vec<_> = got
            .iter()
            .filter(|(k, v)| base.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .chain(base.keys().filter(|k| !got.contains_key(*k)).cloned())
            .filter(|k| {
                (st.key == "nats.url" || k != "nats.url")
                    && !matches!(
                        (st.key, k.as_str()),
                        ("auth.jwt_issuer", "auth.jwks_url")
                            | ("auth.jwks_url" | "auth.jwks_file", "auth.jwt_issuer")
                    )
            })
            .collect();
        assert_eq!(changed, vec![st.key.to_owned()], "{arg} ({verb})");
    }
}

#[test]
fn every_key_and_every_service_flag_is_in_the_reference() {
    let keys: Vec<_> = SETTINGS.iter().map(|s| s.key).collect();
    for key in leaves(&Config::default()).keys() {
        assert!(keys.contains(&key.as_str()), "{key} has no row in SETTINGS");
    }
    let flags: Vec<_> = SETTINGS.iter().filter_map(|s| s.flag).collect();
    let cli = Cli::command();
    for verb in SERVICE_VERBS {
        let cmd = cli.find_subcommand(verb).expect("verb");
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long() else { continue };
            if ["config", "inbox-org", "inbox-person", "help"].contains(&long) {
                continue;
            }
            assert!(
                flags.contains(&format!("--{long}").as_str()),
                "{verb} --{long} has no row in SETTINGS"
            );
        }
    }
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len(), "a key has two rows");
}

#[test]
fn defaults_read_as_the_code_sets_them() {
    assert_eq!(default_of("nats.ack_wait_ms").as_deref(), Some("3000"));
    assert_eq!(default_of("worker.batch").as_deref(), Some("128"));
    assert_eq!(default_of("auth.dev_jwt").as_deref(), Some("off"));
    assert_eq!(default_of("nats.url"), None);
    let table = markdown("config");
    assert!(table.contains("| `nats.ack_wait_ms` | 3000 |"), "{table}");
    assert!(table.contains("`--batch` (up, worker)"), "{table}");
    assert!(table.contains("`HOLDPOINT_WORKER_BATCH`"), "{table}");
}
