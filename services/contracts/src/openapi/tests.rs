//! Checks of the document: unique operations, resolvable references, query
//! parameters that are never null.

use super::schema::enum_values;
use super::*;
use holdpoint_domain::State;

#[test]
fn every_operation_has_a_unique_id_and_route() {
    let mut ids = std::collections::HashSet::new();
    let mut routes = std::collections::HashSet::new();
    for op in OPERATIONS {
        assert!(ids.insert(op.id), "{} twice", op.id);
        assert!(
            routes.insert((op.method, op.path)),
            "{} {} twice",
            op.method,
            op.path
        );
    }
}

#[test]
fn states_come_from_the_state_enum() {
    assert_eq!(
        enum_values::<State>(),
        ["pending", "resolved", "finished", "closed"]
    );
}

#[test]
fn query_parameters_are_never_null() {
    let doc = document();
    let list = &doc["paths"]["/v1/interactions"]["get"]["parameters"];
    for p in list.as_array().expect("parameters") {
        assert!(!p["schema"].to_string().contains("null"), "{p}");
    }
    let limit = list
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "limit"))
        .expect("limit");
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(
        limit["schema"]["maximum"],
        holdpoint_ingress::wire::MAX_PAGE
    );
}

#[test]
fn every_reference_resolves() {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(schemas.contains_key(name), "{r} does not resolve");
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(s)) => out.push(s.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
