//! Soft constraints over the real processes (issue 36, docs/alsched.md): a job
//! submitted with a utility tree is placed by it, `GET /v1/tasks` shows the branch
//! each task got and why the better one was not taken, and after a GM restart the
//! resumed tasks are placed by the same tree (the journal kept it with the job's
//! spec).
//!
//! 1 GM with a journal, 1 LM of 2 one-core nodes, 1 worker. The LM's generated
//! nodes all have Megha constraint 20 (its measured fraction is 1) and none has 63.
//! Fails (never skips) without RabbitMQ.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, http, wait_until, LoopbackCluster, RoleArgs};

const TASK: &str = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":2000}"#;
const TASKS: usize = 6;

/// `prefer(c63)` first (no node has it), then `prefer(c20)` (every node has it).
const TREE: &str = r#"{"max":[{"prefer":{"set":"c63"}},{"prefer":{"set":"c20"}}]}"#;

fn soft_of(gm: &str, job: u64, index: u32) -> serde_json::Value {
    get_json(&format!("{gm}/v1/tasks/{job}/{index}"))["soft"].clone()
}

#[test]
fn a_job_is_placed_by_its_tree_and_keeps_it_across_a_gm_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-alsched-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm0-data");
    let extra = RoleArgs {
        gm: vec![
            "--data-dir".into(),
            data.display().to_string(),
            "--drain-timeout-ms".into(),
            "1000".into(),
        ],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let body = format!(
        r#"{{"tasks":[{}],"utility":{TREE}}}"#,
        [TASK; TASKS].join(",")
    );
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let job = answer["job"].as_u64().expect("job id");
    wait_until("a task placed", Duration::from_secs(30), || {
        soft_of(&gm, job, 0).is_object()
    });
    let first = soft_of(&gm, job, 0);
    assert_eq!(first["branch"], "utility.max[1].prefer", "{first}");
    assert_eq!(
        first["passed_over"][0]["branch"], "utility.max[0].prefer",
        "{first}"
    );
    let why = first["passed_over"][0]["why"].as_str().unwrap_or("");
    assert!(why.contains("no node in the set"), "{first}");

    // Restarted while tasks wait: the resumed ones are placed by the same tree.
    cluster.stop_and_restart_gm(0, Duration::from_millis(500));
    let gm = cluster.gms[0].url.clone();
    wait_until(
        "the job to finish at the restarted GM",
        Duration::from_secs(90),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    let last = soft_of(&gm, job, TASKS as u32 - 1);
    assert_eq!(
        last["branch"],
        "utility.max[1].prefer",
        "the last task was placed after the restart, by the tree: {last}; logs in {}",
        dir.display()
    );
}
