//! `Idempotency-Key` on `POST /v1/jobs` against a real GM with a journal
//! (`--data-dir`): a retried submission gets the first answer and creates no second
//! job, before and after the GM is killed (SIGKILL) and restarted on the same
//! directory; the same key with another body is refused (422) naming the header.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{credentials, get_json, http_raw, LoopbackCluster, RoleArgs};

/// POSTs a job with `key`; returns (status, head, body).
fn post(gm: &str, key: &str, body: &str) -> (u16, String, serde_json::Value) {
    let c = credentials();
    let bearer = format!("Bearer {}", c.admin);
    let (status, head, body) = http_raw(
        "POST",
        &format!("{gm}/v1/jobs"),
        "application/json",
        body.as_bytes(),
        &[("Authorization", bearer.as_str()), ("Idempotency-Key", key)],
    )
    .expect("POST /v1/jobs");
    let json = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&body));
    });
    (status, head, json)
}

fn jobs_at(gm: &str) -> usize {
    get_json(&format!("{gm}/v1/jobs?limit=100"))["jobs"]
        .as_array()
        .expect("jobs")
        .len()
}

#[test]
fn a_retried_submission_returns_the_first_job_across_a_gm_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-idempotency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extra = RoleArgs {
        gm: vec![
            "--data-dir".into(),
            dir.join("gm-data").display().to_string(),
        ],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let job = r#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":50},{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":50}]}"#;

    let (status, head, first) = post(&gm, "order-42", job);
    assert_eq!(status, 202, "{first}");
    assert!(
        !head.to_ascii_lowercase().contains("idempotent-replayed"),
        "{head}"
    );
    let (status, head, again) = post(&gm, "order-42", job);
    assert_eq!(status, 202, "{again}");
    assert_eq!(again, first, "the retry gets the first answer");
    assert!(
        head.to_ascii_lowercase()
            .contains("idempotent-replayed: true"),
        "{head}"
    );
    assert_eq!(jobs_at(&gm), 1, "no second job");

    let other = job.replace("\"duration_ms\":50}]", "\"duration_ms\":60}]");
    let (status, _, refused) = post(&gm, "order-42", &other);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["field"], "Idempotency-Key", "{refused}");
    // Another key is another job.
    let (status, _, second) = post(&gm, "order-43", job);
    assert_eq!(status, 202);
    assert_ne!(second["job"], first["job"]);

    // Killed and restarted on the same --data-dir: the keys are still known.
    cluster.crash_and_restart_gm(0, Duration::from_millis(200));
    cluster.wait_ready(Duration::from_secs(30));
    let (status, _, after) = post(&gm, "order-42", job);
    assert_eq!(status, 202, "{after}");
    assert_eq!(after, first, "the key survived the restart");
    let (status, _, refused) = post(&gm, "order-43", &other);
    assert_eq!(status, 422, "{refused}");
    assert_eq!(jobs_at(&gm), 2, "no job created by a retry");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = get_json(&format!("{gm}/v1/jobs?limit=100"));
        let done = jobs["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 2 && j.iter().all(|j| j["state"] == "finished"));
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "jobs not finished: {jobs}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.terminate_all_cleanly();
}
