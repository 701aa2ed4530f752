//! The task lifecycle through the services (issue 13): one GM, one LM, one worker
//! running two 1-core nodes, as separate processes on loopback with a real RabbitMQ,
//! `exec` tasks.
//!
//! - a command that exits 3 runs `max_attempts` times (its job's retry policy) and
//!   ends `failed` with every attempt's failure; each attempt's log stays readable
//!   (`?attempt=N`, `megha logs --attempt N`);
//! - a running task shows `running` with its start time; `DELETE /v1/jobs/{id}`
//!   cancels the queued task at once and the running ones at their worker (their
//!   processes are gone), twice answers the same, 404 for an unknown job;
//! - an ended job is forgotten after `--job-retention`; `GET /v1/jobs` filters by
//!   queue and user.

use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{bin_dir, get_json, http, wait_until, LoopbackCluster, RoleArgs};

/// Runs the `megha` client against `gm`; returns (success, stdout, stderr).
fn megha(gm: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(bin_dir().join("megha"))
        .args(args)
        .env("MEGHA_GM", gm)
        .env("MEGHA_TOKEN", &tests::procs::credentials().admin)
        .output()
        .expect("megha runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn exec_task(command: &str) -> String {
    format!(
        r#"{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"executor":{{"type":"exec","command":["sh","-c",{}]}}}}"#,
        serde_json::to_string(command).expect("json string")
    )
}

fn submit(gm: &str, body: &str) -> u64 {
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("json");
    answer["job"].as_u64().expect("a job id")
}

fn task(gm: &str, job: u64, index: u32) -> Value {
    get_json(&format!("{gm}/v1/tasks/{job}/{index}"))
}

#[test]
fn retries_cancel_running_state_and_retention_through_the_services() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lifecycle-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let extra = RoleArgs {
        gm: vec!["--job-retention".into(), "3".into()],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let ended = |job: u64| {
        let state = get_json(&format!("{gm}/v1/jobs/{job}"))["state"].clone();
        state != "active"
    };

    // Retries: exit 3, three attempts 50 ms then 100 ms apart, then failed for good.
    let failing = format!(
        r#"{{"tasks":[{}],"user":"ana","retry":{{"max_attempts":3,"backoff":{{"initial_ms":50,"factor":2}}}}}}"#,
        exec_task("echo \"run $MEGHA_ATTEMPT\"; exit 3")
    );
    let job = submit(&gm, &failing);
    wait_until("the failing job to end", Duration::from_secs(30), || {
        ended(job)
    });
    let t = task(&gm, job, 0);
    assert_eq!(t["state"], "failed", "{t}");
    assert_eq!(
        (t["attempt"].as_u64(), t["max_attempts"].as_u64()),
        (Some(3), Some(3)),
        "{t}"
    );
    let failures = t["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 3, "{t}");
    for (i, f) in failures.iter().enumerate() {
        assert_eq!(f["attempt"], i as u64 + 1);
        assert_eq!(f["failure"]["exit"]["code"], 3, "{f}");
    }
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_tasks_retried_total"),
        2.0
    );
    // Every attempt kept its log: each by its number, the current one by default.
    let attempt_log = |query: &str| {
        let url = format!("{gm}/v1/tasks/{job}/0/logs{query}");
        let (status, _, body) = http("GET", &url, None).expect("get logs");
        (status, body)
    };
    for n in 1..=3 {
        assert_eq!(
            attempt_log(&format!("?attempt={n}")),
            (200, format!("run {n}\n"))
        );
    }
    assert_eq!(attempt_log(""), (200, "run 3\n".to_owned()));
    for absent in ["?attempt=4", "?attempt=0"] {
        let (status, body) = attempt_log(absent);
        assert_eq!(status, 404, "{absent}: {body}");
        assert!(body.contains("has no attempt"), "{absent}: {body}");
    }
    let (ok, out, err) = megha(&gm, &["logs", &job.to_string(), "0", "--attempt", "1"]);
    assert!(ok, "{err}");
    assert_eq!(out, "run 1\n");
    let by_user = get_json(&format!("{gm}/v1/jobs?user=ana"));
    assert_eq!(
        by_user["jobs"].as_array().map(Vec::len),
        Some(1),
        "{by_user}"
    );
    assert_eq!(by_user["jobs"][0]["job"], job);
    let by_queue = get_json(&format!("{gm}/v1/jobs?queue=nope"));
    assert_eq!(
        by_queue["jobs"].as_array().map(Vec::len),
        Some(0),
        "{by_queue}"
    );

    // Logs through the GM (from the worker, via the LM): whole, tail, stderr, follow.
    let talker = exec_task("echo hello; echo world; echo oops >&2");
    let job = submit(&gm, &format!(r#"{{"tasks":[{talker}]}}"#));
    wait_until("the talker to end", Duration::from_secs(30), || ended(job));
    let logs = |query: &str| {
        let url = format!("{gm}/v1/tasks/{job}/0/logs{query}");
        let (status, _, body) = http("GET", &url, None).expect("get logs");
        (status, body)
    };
    assert_eq!(logs(""), (200, "hello\nworld\n".to_owned()));
    assert_eq!(logs("?tail=1"), (200, "world\n".to_owned()));
    assert_eq!(logs("?stream=stderr"), (200, "oops\n".to_owned()));
    assert_eq!(logs("?stream=nope").0, 400);
    let (status, body) = {
        let (status, _, body) =
            http("GET", &format!("{gm}/v1/tasks/{job}/7/logs"), None).expect("get");
        (status, body)
    };
    assert_eq!(status, 404, "{body}");
    let counter = exec_task("for i in 1 2 3; do echo line$i; sleep 0.3; done");
    let job = submit(&gm, &format!(r#"{{"tasks":[{counter}]}}"#));
    wait_until("the counter to start", Duration::from_secs(30), || {
        task(&gm, job, 0)["state"] == "running"
    });
    let url = format!("{gm}/v1/tasks/{job}/0/logs?follow=true");
    let (status, _, followed) = http("GET", &url, None).expect("follow");
    assert_eq!(status, 200);
    for line in ["line1", "line2", "line3"] {
        assert!(followed.contains(line), "{followed}");
    }
    assert_eq!(
        task(&gm, job, 0)["state"],
        "finished",
        "follow ends with the task"
    );

    // The nodes: the GM's view and the LM's authoritative state.
    let view = get_json(&format!("{gm}/v1/nodes"));
    assert_eq!(view["lms"][0]["known"], true, "{view}");
    assert_eq!(view["lms"][0]["nodes"], 2, "{view}");
    let nodes = view["lms"][0]["partitions"][0]["nodes"]
        .as_array()
        .expect("nodes");
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["capacity"]["cpu_millis"], 1000, "{view}");
    assert!(view["lms"][0]["state_age_ms"].as_u64().is_some(), "{view}");
    let summary = get_json(&format!("{gm}/v1/nodes?summary=true"));
    assert!(
        summary["lms"][0]["partitions"][0].get("nodes").is_none(),
        "{summary}"
    );
    let lm = get_json(&format!("{}/v1/nodes", cluster.lms[0].url));
    assert_eq!(lm["nodes"].as_array().map(Vec::len), Some(2), "{lm}");
    assert_eq!(lm["nodes"][1]["worker_registered"], true, "{lm}");
    assert_eq!(lm["running_tasks"], 0, "{lm}");

    // The `megha` client: each command against the cluster.
    let (ok, out, err) = megha(
        &gm,
        &["submit", "--user", "bo", "--", "sh", "-c", "echo from-cli"],
    );
    assert!(ok, "{err}");
    let job: u64 = out
        .split_whitespace()
        .nth(2)
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("submitted job ID: {out}"));
    wait_until("the CLI's job to end", Duration::from_secs(30), || {
        ended(job)
    });
    let (ok, out, err) = megha(&gm, &["jobs", "--user", "bo"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("JOB ") && out.contains(&format!("{job}  finished")),
        "{out}"
    );
    let (ok, out, _) = megha(&gm, &["job", &job.to_string()]);
    assert!(ok && out.contains("finished  1/1"), "{out}");
    let (ok, out, _) = megha(&gm, &["logs", &job.to_string(), "0"]);
    assert!(ok);
    assert_eq!(out, "from-cli\n");
    let (ok, out, _) = megha(&gm, &["--json", "nodes", "--summary"]);
    assert!(ok);
    let nodes: Value = serde_json::from_str(&out).expect("--json is JSON");
    assert_eq!(nodes["lms"][0]["nodes"], 2, "{out}");
    let (ok, out, _) = megha(&gm, &["nodes"]);
    assert!(ok && out.starts_with("LM  "), "{out}");
    let file = tests::procs::workspace_root().join("data/jobs/hello.toml");
    let (ok, out, err) = megha(&gm, &["submit", file.to_str().expect("utf-8")]);
    assert!(ok && out.contains("(2 tasks)"), "{out}{err}");
    let (ok, _, err) = megha(&gm, &["cancel", "12345"]);
    assert!(!ok && err.contains("job 12345 is unknown"), "{err}");
    let (ok, _, err) = megha("http://127.0.0.1:1", &["jobs"]);
    assert!(!ok && err.contains("is the GM running"), "{err}");

    // Cancel: two tasks run (one node each), the third waits in the GM's queue.
    let pids = dir.join("pids");
    let _ = std::fs::create_dir_all(&pids);
    // Tasks run as uids of their own: the directory is everyone's (sticky).
    std::fs::set_permissions(&pids, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
        .expect("chmod");
    let sleeper = exec_task(&format!("echo $$ > {}/$$; exec sleep 60", pids.display()));
    let body = format!(r#"{{"tasks":[{sleeper},{sleeper},{sleeper}]}}"#);
    let job = submit(&gm, &body);
    wait_until("two tasks running", Duration::from_secs(30), || {
        (0..3)
            .filter(|i| task(&gm, job, *i)["state"] == "running")
            .count()
            == 2
    });
    let running: Vec<u32> = (0..3)
        .filter(|i| task(&gm, job, *i)["state"] == "running")
        .collect();
    assert!(task(&gm, job, running[0])["started_at_us"]
        .as_u64()
        .is_some());
    wait_until(
        "both processes to write their pid",
        Duration::from_secs(10),
        || std::fs::read_dir(&pids).map(|d| d.count()).unwrap_or(0) == 2,
    );
    let url = format!("{gm}/v1/jobs/{job}");
    let (status, _, answer) = http("DELETE", &url, None).expect("delete");
    assert_eq!(status, 202, "{answer}");
    let first: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(first["job"], job);
    assert!(
        first["cancel_requested_at_us"].as_u64().is_some(),
        "{first}"
    );
    wait_until("the job to end cancelled", Duration::from_secs(20), || {
        ended(job)
    });
    let status_now = get_json(&url);
    assert_eq!(status_now["state"], "cancelled", "{status_now}");
    assert_eq!(status_now["states"]["cancelled"], 3, "{status_now}");
    // The processes are gone.
    for entry in std::fs::read_dir(&pids).expect("pids") {
        let pid = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        wait_until(
            "the cancelled process to exit",
            Duration::from_secs(15),
            || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        );
    }
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_tasks_cancelled_total"),
        2.0
    );
    // A second DELETE answers the same way, and changes nothing.
    let (status, _, again) = http("DELETE", &url, None).expect("delete");
    assert_eq!(status, 202, "{again}");
    let again: Value = serde_json::from_str(&again).expect("json");
    assert_eq!(again["state"], "cancelled");
    assert_eq!(
        again["cancel_requested_at_us"],
        first["cancel_requested_at_us"]
    );
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_jobs_cancelled_total"),
        1.0
    );
    let (status, _, body) = http("DELETE", &format!("{gm}/v1/jobs/12345"), None).expect("delete");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("job 12345 is unknown"), "{body}");

    // Retention: three seconds after its end, a job is forgotten.
    wait_until(
        "the ended jobs to be forgotten",
        Duration::from_secs(15),
        || {
            let (status, _, _) = http("GET", &url, None).expect("get");
            status == 404
        },
    );
    assert!(cluster.metric(&cluster.gms, "megha_gm_jobs_forgotten_total") >= 2.0);

    cluster.terminate_all_cleanly();
}
