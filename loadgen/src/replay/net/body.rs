//! The JSON body of a job submission (`POST /v1/jobs`): a leaf, used by [`super`] and
//! by the submitter ([`super::submit`]).

use common::dag::JobDag;
use common::fairness::FairnessConfig;
use common::gang::GangSpec;
use global_master::service::admission::api::NewTask;
use serde_json::{json, Value};

/// The JSON body of `POST /v1/jobs` for these tasks; queues by name (left out
/// without queues: the GMs' implicit `default` queue); with a DAG, its `stages` and
/// each task's `stage`.
pub fn job_body(tasks: &[NewTask], dag: Option<&JobDag>, queues: Option<&FairnessConfig>) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut task = json!({
                "resources": {"cpu_millis": t.resources.cpu_millis, "memory_mb": t.resources.memory_mb},
                "constraints": t.constraints.iter().collect::<Vec<_>>(),
                "duration_ms": t.duration.0 as f64 / 1000.0,
                "kind": t.kind,
                "tags": t.tags,
            });
            if let Some(name) = super::super::queues::queue_name(queues, t.queue) {
                task["queue"] = Value::String(name);
            }
            if let Some(stage) = dag.and_then(|d| d.stage_of(i as u32)) {
                task["stage"] = Value::from(&*dag.expect("a DAG").stages[stage].name);
            }
            task
        })
        .collect();
    let Some(dag) = dag else {
        return json!({ "tasks": tasks });
    };
    let stages: Vec<Value> = dag
        .stages
        .iter()
        .map(|s| {
            let after: Vec<&str> = s
                .after
                .iter()
                .map(|&p| &*dag.stages[usize::from(p)].name)
                .collect();
            json!({"name": &*s.name, "after": after, "on_parent_failure": s.on_parent_failure})
        })
        .collect();
    json!({ "stages": stages, "tasks": tasks })
}

/// The job API's `gang` object for `gang` (docs/gangs.md).
pub fn gang_body(gang: &GangSpec) -> Value {
    json!({
        "min_members": gang.min_members,
        "timeout_s": gang.timeout.0 as f64 / 1e6,
        "on_timeout": gang.on_timeout,
    })
}
