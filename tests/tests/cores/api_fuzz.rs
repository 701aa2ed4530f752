//! Fuzzing the public JSON API's parsers (issue 16): arbitrary bytes, and valid
//! submissions with one value replaced by an arbitrary JSON value, never panic and
//! are either accepted or refused with a 4xx naming a field. The same for the GMs'
//! tokens file parser. Seeded by proptest (failures are saved and replayed).

use common::fairness::{FairnessConfig, SharePolicy};
use common::GmId;
use global_master::service::admission::api::{parse_job, QueueTable};
use global_master::service::admission::lra_api::parse_lra;
use global_master::service::admission::users::Users;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn queues() -> QueueTable {
    let specs = vec!["a:0.5:0".to_owned(), "b:0.5:1".to_owned()];
    let fairness = FairnessConfig::from_specs(&specs, SharePolicy::Drf, 2).expect("queues");
    QueueTable::new(GmId(0), Some(Arc::new(fairness)))
}

fn job() -> Value {
    json!({"tasks": [{"queue": "a", "kind": "short",
        "resources": {"cpu_millis": 1000, "memory_mb": 512},
        "constraints": [3], "duration_ms": 250, "tags": ["x"],
        "executor": {"type": "exec", "command": ["sh", "-c", "true"]}}]})
}

fn lra() -> Value {
    json!({"queue": "a", "containers": [{"resources": {"cpu_millis": 1000, "memory_mb": 512},
        "tags": ["hb"], "count": 2, "duration_ms": 1000}],
        "constraints": [{"subject_tag": "hb", "tag": "hb", "c_max": 1, "node_group": "node"},
                        {"subject_tag": "hb", "any_of": [[{"tag": "zk", "c_min": 1, "node_group": "rack"}]]}]})
}

/// Arbitrary JSON values, nested a little.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::String),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(1e308)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::hash_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every path (object keys, array indexes) of `v`.
fn paths(v: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let mut p = prefix.clone();
                p.push(k.clone());
                paths(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let mut p = prefix.clone();
                p.push(i.to_string());
                paths(x, p, out);
            }
        }
        _ => {}
    }
}

fn replace(v: &mut Value, path: &[String], with: Value) {
    let Some((first, rest)) = path.split_first() else {
        *v = with;
        return;
    };
    let next = match v {
        Value::Object(m) => m.get_mut(first),
        Value::Array(a) => first.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    };
    if let Some(n) = next {
        replace(n, rest, with);
    }
}

/// A mutated copy of `base`: the value at one of its paths replaced.
fn mutated(base: Value) -> impl Strategy<Value = Value> {
    let mut all = Vec::new();
    paths(&base, Vec::new(), &mut all);
    (0..all.len(), any_json()).prop_map(move |(i, with)| {
        let mut v = base.clone();
        replace(&mut v, &all[i], with);
        v
    })
}

fn check_refusal(status: u16, field: &str) {
    assert!(
        (400..500).contains(&status),
        "status {status} for `{field}`"
    );
    assert!(!field.is_empty(), "a refusal names its field");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic_and_get_a_4xx(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let q = queues();
        if let Err(e) = parse_job(&body, 100, &q) {
            check_refusal(e.status, &e.field);
        }
        if let Err(e) = parse_lra(&body, 100, &q, &[]) {
            check_refusal(e.status, &e.field);
        }
        let text = String::from_utf8_lossy(&body);
        let _ = Users::parse(&text, false, &Default::default());
        let _ = Users::parse(&text, true, &Default::default());
    }

    #[test]
    fn mutated_jobs_are_accepted_or_refused_naming_a_field(v in mutated(job())) {
        let body = serde_json::to_vec(&v).expect("json");
        if let Err(e) = parse_job(&body, 100, &queues()) {
            check_refusal(e.status, &e.field);
        }
    }

    #[test]
    fn mutated_lras_are_accepted_or_refused_naming_a_field(v in mutated(lra())) {
        let body = serde_json::to_vec(&v).expect("json");
        if let Err(e) = parse_lra(&body, 100, &queues(), &[]) {
            check_refusal(e.status, &e.field);
        }
    }
}

#[test]
fn the_unmutated_bodies_are_valid() {
    let body = serde_json::to_vec(&job()).expect("json");
    parse_job(&body, 100, &queues()).expect("the base job is valid");
    let body = serde_json::to_vec(&lra()).expect("json");
    parse_lra(&body, 100, &queues(), &[]).expect("the base lra is valid");
}
