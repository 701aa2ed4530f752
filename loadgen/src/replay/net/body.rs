//! The JSON body of a job submission (`POST /v1/jobs`): a leaf, used by [`super`] and
//! by the submitter ([`super::submit`]).

use common::fairness::FairnessConfig;
use global_master::service::admission::api::NewTask;
use serde_json::{json, Value};

/// The JSON body of `POST /v1/jobs` for these tasks; queues by name (left out
/// without queues: the GMs' implicit `default` queue).
pub fn job_body(tasks: &[NewTask], queues: Option<&FairnessConfig>) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| {
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
            task
        })
        .collect();
    json!({ "tasks": tasks })
}
