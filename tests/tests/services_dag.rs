//! DAG jobs through the services (issue 35): one GM, one LM of four 1-core nodes, one
//! worker, as separate processes on loopback with a real RabbitMQ.
//!
//! - a diamond (map -> left, right -> reduce) runs its stages in order: every task
//!   of a stage starts after the last task of each parent stage ended (the worker's
//!   own start and end times); while it waits, a task shows `blocked` and why;
//! - a failed parent (`exit 3`) ends its `fail` child without running it ("parent
//!   stage `a` failed") while its `continue` child runs;
//! - real exec stages share files: three map tasks write parts into a shared
//!   directory, the reduce task reads all three;
//! - cancel of a half-done DAG takes the blocked stages too;
//! - a job that runs after another (`after_jobs`) waits for it, runs after it when
//!   its end allows, never runs when not; another user's job cannot be named;
//! - bad DAGs are refused with 400 naming the field, and nothing is accepted;
//! - the GM killed (SIGKILL) in the middle of a DAG and restarted on its journal
//!   resumes it: the DAG finishes, in order, and no task runs twice.

use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, http, wait_until, LoopbackCluster, RoleArgs};

fn synthetic(stage: &str, ms: u64) -> String {
    format!(
        r#"{{"stage":"{stage}","resources":{{"cpu_millis":1000,"memory_mb":64}},"duration_ms":{ms}}}"#
    )
}

fn exec(stage: &str, command: &str) -> String {
    format!(
        r#"{{"stage":"{stage}","resources":{{"cpu_millis":1000,"memory_mb":64}},"executor":{{"type":"exec","command":["sh","-c",{}]}}}}"#,
        serde_json::to_string(command).expect("json string")
    )
}

/// map (2 tasks) -> left (2), right (1) -> reduce (1): task indices 0-1, 2-3, 4, 5.
fn diamond(map_ms: u64, ms: u64) -> String {
    let tasks = [
        synthetic("map", map_ms),
        synthetic("map", map_ms),
        synthetic("left", ms),
        synthetic("left", ms),
        synthetic("right", ms),
        synthetic("reduce", ms),
    ];
    format!(
        r#"{{"stages":[{{"name":"map"}},{{"name":"left","after":["map"]}},{{"name":"right","after":["map"]}},{{"name":"reduce","after":["left","right"]}}],"tasks":[{}]}}"#,
        tasks.join(",")
    )
}

/// Stage of each task of [`diamond`], and each stage's parents.
const DIAMOND_STAGE: [usize; 6] = [0, 0, 1, 1, 2, 3];
const DIAMOND_PARENTS: [&[usize]; 4] = [&[], &[0], &[0], &[1, 2]];

fn plain(ms: u64) -> String {
    format!(r#"{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"duration_ms":{ms}}}"#)
}

fn exec_plain(command: &str) -> String {
    format!(
        r#"{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"executor":{{"type":"exec","command":["sh","-c",{}]}}}}"#,
        serde_json::to_string(command).expect("json string")
    )
}

fn alice() -> String {
    tests::procs::credentials().alice.clone()
}

fn bob() -> String {
    tests::procs::credentials().bob.clone()
}

/// `method url` with `body` as the user of `token`: (status, head, body).
fn http_as(method: &str, url: &str, token: &str, body: &str) -> (u16, String, String) {
    let bearer = format!("Bearer {token}");
    let (status, head, body) = tests::procs::http_raw(
        method,
        url,
        "application/json",
        body.as_bytes(),
        &[
            ("Authorization", bearer.as_str()),
            (
                "x-megha-cluster-token",
                tests::procs::credentials().secret.as_str(),
            ),
        ],
    )
    .expect("http");
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

fn submit_as(gm: &str, token: &str, body: &str) -> u64 {
    let (status, _, answer) = http_as("POST", &format!("{gm}/v1/jobs"), token, body);
    assert_eq!(status, 202, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("json");
    answer["job"].as_u64().expect("a job id")
}

fn submit(gm: &str, body: &str) -> u64 {
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("json");
    answer["job"].as_u64().expect("a job id")
}

fn task(gm: &str, job: u64, index: usize) -> Value {
    get_json(&format!("{gm}/v1/tasks/{job}/{index}"))
}

fn job_state(gm: &str, job: u64) -> Value {
    get_json(&format!("{gm}/v1/jobs/{job}"))["state"].clone()
}

/// Every task of a stage started after the last task of each parent stage ended.
/// A task that started in an earlier life of a restarted GM has no start time there
/// (its journal keeps ends, not starts): `started_before` lists those, skipped.
fn assert_in_order(gm: &str, job: u64, started_before: &[usize]) {
    let tasks: Vec<Value> = (0..DIAMOND_STAGE.len()).map(|i| task(gm, job, i)).collect();
    for (i, child) in tasks.iter().enumerate() {
        if started_before.contains(&i) {
            continue;
        }
        let start = child["started_at_us"]
            .as_u64()
            .unwrap_or_else(|| panic!("task {i} has a start time: {child}"));
        for &parent_stage in DIAMOND_PARENTS[DIAMOND_STAGE[i]] {
            for (p, parent) in tasks.iter().enumerate() {
                if DIAMOND_STAGE[p] != parent_stage {
                    continue;
                }
                let end = parent["ended_at_us"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("task {p} has an end time: {parent}"));
                assert!(
                    start >= end,
                    "task {i} started at {start}, before task {p} of its parent stage ended at {end}: {child} {parent}"
                );
            }
        }
    }
}

#[test]
fn stages_run_in_order_fail_or_continue_cancel_and_bad_dags_are_refused() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-dag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = LoopbackCluster::start_with_args(
        1,
        1,
        4,
        1,
        &broker.url,
        &dir.join("logs"),
        &[],
        &RoleArgs::default(),
    );
    let gm = cluster.gms[0].url.clone();

    // The diamond: reduce is blocked at once (map runs 2 s), and says for what.
    let job = submit(&gm, &diamond(2000, 300));
    let reduce = task(&gm, job, 5);
    assert_eq!(reduce["state"], "blocked", "{reduce}");
    let reason = reduce["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("`left`"), "{reduce}");
    wait_until("the diamond to finish", Duration::from_secs(60), || {
        job_state(&gm, job) == "finished"
    });
    assert_in_order(&gm, job, &[]);
    let status = get_json(&format!("{gm}/v1/jobs/{job}"));
    assert_eq!(status["stages"][3]["name"], "reduce", "{status}");
    assert_eq!(status["stages"][3]["after"][1], "right", "{status}");
    assert_eq!(status["stages"][1]["states"]["finished"], 2, "{status}");
    assert_eq!(task(&gm, job, 5)["stage"], "reduce");
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_dag_tasks_released_total"),
        4.0
    );

    // A failed parent: `b` (fail) never runs, `c` (continue) runs.
    let body = format!(
        r#"{{"stages":[{{"name":"a"}},{{"name":"b","after":["a"]}},{{"name":"c","after":["a"],"on_parent_failure":"continue"}}],"tasks":[{},{},{}]}}"#,
        exec("a", "exit 3"),
        synthetic("b", 100),
        synthetic("c", 100)
    );
    let job = submit(&gm, &body);
    wait_until("the failing DAG to end", Duration::from_secs(60), || {
        job_state(&gm, job) != "active"
    });
    assert_eq!(job_state(&gm, job), "failed");
    let b = task(&gm, job, 1);
    assert_eq!(b["state"], "failed", "{b}");
    assert_eq!(
        b["failure"]["start_failed"]["reason"], "parent stage `a` failed",
        "{b}"
    );
    assert!(b["started_at_us"].is_null(), "b never ran: {b}");
    assert_eq!(task(&gm, job, 2)["state"], "finished");

    // Real exec stages sharing files (issue 35 item 5): three map tasks, each its
    // own uid, write a part each into a shared directory; the reduce task, released
    // only when every map task ended, reads every part. Were it run early, a part
    // would be missing and its sum wrong.
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).expect("shared dir");
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .expect("chmod");
    let shared = shared.display().to_string();
    let map = format!(
        "umask 022; sleep 0.3; echo $((MEGHA_TASK_INDEX * 10 + 1)) > {shared}/part-$MEGHA_TASK_INDEX"
    );
    let reduce =
        format!("ls {shared} | wc -l; cat {shared}/part-* | awk '{{s += $1}} END {{print s}}'");
    let body = format!(
        r#"{{"stages":[{{"name":"map"}},{{"name":"reduce","after":["map"]}}],"tasks":[{},{},{},{}]}}"#,
        exec("map", &map),
        exec("map", &map),
        exec("map", &map),
        exec("reduce", &reduce)
    );
    let job = submit(&gm, &body);
    wait_until("the map-reduce DAG to end", Duration::from_secs(60), || {
        job_state(&gm, job) != "active"
    });
    assert_eq!(job_state(&gm, job), "finished");
    let (status, _, out) = http("GET", &format!("{gm}/v1/tasks/{job}/3/logs"), None).expect("logs");
    assert_eq!((status, out.as_str()), (200, "3\n33\n"), "1 + 11 + 21");

    // Cancel a half-done DAG: the running map and the blocked rest end cancelled.
    let body = format!(
        r#"{{"stages":[{{"name":"m"}},{{"name":"r","after":["m"]}}],"tasks":[{},{},{}]}}"#,
        exec("m", "sleep 60"),
        synthetic("r", 100),
        synthetic("r", 100)
    );
    let job = submit(&gm, &body);
    wait_until("the map task to run", Duration::from_secs(30), || {
        task(&gm, job, 0)["state"] == "running"
    });
    let (status, _, answer) = http("DELETE", &format!("{gm}/v1/jobs/{job}"), None).expect("delete");
    assert_eq!(status, 202, "{answer}");
    wait_until("the DAG to be cancelled", Duration::from_secs(30), || {
        job_state(&gm, job) == "cancelled"
    });
    for i in 0..3 {
        assert_eq!(task(&gm, job, i)["state"], "cancelled");
    }
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_dag_tasks_blocked"),
        0.0
    );

    // Jobs that run after others: b after a (ok) waits for a and starts after it
    // ended; c after a (failed) never runs; bob may not run after alice's job
    // (unknown to him, as for any of her jobs), an admin may.
    let a = submit_as(
        &gm,
        &alice(),
        &format!(r#"{{"tasks":[{}]}}"#, exec_plain("sleep 2")),
    );
    let b = submit(
        &gm,
        &format!(
            r#"{{"after_jobs":[{{"job":{a}}}],"tasks":[{}]}}"#,
            plain(100)
        ),
    );
    let waiting = task(&gm, b, 0);
    assert_eq!(waiting["state"], "blocked", "{waiting}");
    assert!(
        waiting["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("job {a}")),
        "{waiting}"
    );
    let c = submit(
        &gm,
        &format!(
            r#"{{"after_jobs":[{{"job":{a},"when":"failed"}}],"tasks":[{}]}}"#,
            plain(100)
        ),
    );
    let (status, _, answer) = http_as(
        "POST",
        &format!("{gm}/v1/jobs"),
        &bob(),
        &format!(
            r#"{{"after_jobs":[{{"job":{a}}}],"tasks":[{}]}}"#,
            plain(100)
        ),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("after_jobs[0].job"), "{answer}");
    wait_until("the jobs after a to end", Duration::from_secs(60), || {
        job_state(&gm, b) != "active" && job_state(&gm, c) != "active"
    });
    assert_eq!(job_state(&gm, a), "finished");
    assert_eq!(job_state(&gm, b), "finished");
    let a_end = task(&gm, a, 0)["ended_at_us"].as_u64().expect("a ended");
    let b_start = task(&gm, b, 0)["started_at_us"]
        .as_u64()
        .expect("b started");
    assert!(
        b_start >= a_end,
        "b started at {b_start}, before a ended at {a_end}"
    );
    assert_eq!(job_state(&gm, c), "failed");
    let never = task(&gm, c, 0);
    assert!(
        never["failure"]["start_failed"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("when failed"),
        "{never}"
    );
    // After a job that ended already: it runs at once.
    let d = submit(
        &gm,
        &format!(
            r#"{{"after_jobs":[{{"job":{a},"when":"any"}}],"tasks":[{}]}}"#,
            plain(100)
        ),
    );
    wait_until(
        "the job after an ended one to finish",
        Duration::from_secs(30),
        || job_state(&gm, d) == "finished",
    );

    // Bad DAGs: 400 naming the field, nothing accepted.
    let before = get_json(&format!("{gm}/v1/jobs"))["jobs"]
        .as_array()
        .map(Vec::len);
    let bad = [
        (
            format!(
                r#"{{"stages":[{{"name":"a","after":["b"]}},{{"name":"b","after":["a"]}}],"tasks":[{},{}]}}"#,
                synthetic("a", 1),
                synthetic("b", 1)
            ),
            "stages[0].after",
        ),
        (
            format!(
                r#"{{"stages":[{{"name":"a","after":["a"]}}],"tasks":[{}]}}"#,
                synthetic("a", 1)
            ),
            "stages[0].after[0]",
        ),
        (
            format!(
                r#"{{"stages":[{{"name":"a"}}],"tasks":[{}]}}"#,
                synthetic("nope", 1)
            ),
            "tasks[0].stage",
        ),
        (
            format!(r#"{{"tasks":[{}]}}"#, synthetic("a", 1)),
            "tasks[0].stage",
        ),
        (
            format!(
                r#"{{"after_jobs":[{{"job":12345}}],"tasks":[{}]}}"#,
                plain(1)
            ),
            "after_jobs[0].job",
        ),
        (
            format!(
                r#"{{"after_jobs":[{{"job":{}}}],"tasks":[{}]}}"#,
                (1u64 << 48) | 5,
                plain(1)
            ),
            "after_jobs[0].job",
        ),
    ];
    for (body, field) in bad {
        let (status, _, answer) =
            http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
        assert_eq!(status, 400, "{answer}");
        let answer: Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(answer["field"], field, "{answer}");
    }
    let after = get_json(&format!("{gm}/v1/jobs"))["jobs"]
        .as_array()
        .map(Vec::len);
    assert_eq!(before, after, "a refused DAG was accepted");
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gm_killed_in_the_middle_of_a_dag_resumes_it_from_its_journal() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-dag-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm0-data");
    let extra = RoleArgs {
        gm: vec!["--data-dir".into(), data.display().to_string()],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 4, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let job = submit(&gm, &diamond(1000, 1500));
    // Killed while left and right run (map done), reduce blocked.
    wait_until("the middle stages to run", Duration::from_secs(60), || {
        task(&gm, job, 2)["state"] == "running"
    });
    cluster.crash_and_restart_gm(0, Duration::from_millis(300));
    let gm = cluster.gms[0].url.clone();
    wait_until(
        "the DAG to finish at the restarted GM",
        Duration::from_secs(90),
        || job_state(&gm, job) == "finished",
    );
    // Map, left and right started before the kill; reduce after, once they ended.
    assert_in_order(&gm, job, &[0, 1, 2, 3, 4]);
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        6.0,
        "every task started exactly once; logs in {}",
        dir.display()
    );
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}
