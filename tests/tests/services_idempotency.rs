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

/// One GM with a journal (`--data-dir`), one LM, two workers, and their broker
/// (kept while the test runs).
fn journaled_cluster(name: &str) -> (LoopbackCluster, tests::broker::TestBroker) {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extra = RoleArgs {
        gm: vec![
            "--data-dir".into(),
            dir.join("gm-data").display().to_string(),
        ],
        ..RoleArgs::default()
    };
    let cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    (cluster, broker)
}

#[test]
fn a_retried_submission_returns_the_first_job_across_a_gm_restart() {
    let (mut cluster, _broker) = journaled_cluster("megha-idempotency");
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

/// Issue 33: a client gives up on a submission the GM had not answered (the GM was
/// stopped with SIGSTOP, the client closed its connection): the handler is dropped,
/// but the key is settled with the job the submission created, so a retry with the
/// same key gets that job (before: 409 "being handled" for good).
#[test]
fn a_key_whose_client_gave_up_is_settled_and_a_retry_gets_its_job() {
    use std::io::Write;
    let (mut cluster, _broker) = journaled_cluster("megha-idem-gaveup");
    let gm = cluster.gms[0].url.clone();
    let job = r#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":50}]}"#;
    let pid = cluster.gms[0].pid().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    };
    signal("-STOP");
    {
        let host = gm.trim_start_matches("http://");
        let mut conn = std::net::TcpStream::connect(host).expect("connect");
        let bearer = format!("Bearer {}", credentials().admin);
        let request = format!(
            "POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: {bearer}\r\nIdempotency-Key: gave-up\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{job}",
            job.len()
        );
        conn.write_all(request.as_bytes()).expect("write");
        std::thread::sleep(Duration::from_millis(300));
        // The client gives up: the connection is closed unanswered.
    }
    signal("-CONT");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let (status, head, answer) = post(&gm, "gave-up", job);
        if status == 202 {
            break (head, answer);
        }
        assert_eq!(status, 409, "{answer}");
        assert!(
            std::time::Instant::now() < deadline,
            "the key stays in flight: {answer}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let again = post(&gm, "gave-up", job);
    assert_eq!(again.0, 202, "{}", again.2);
    assert_eq!(again.2, answer.1, "the same job each time");
    assert!(jobs_at(&gm) <= 1, "no second job");
    cluster.terminate_all_cleanly();
}
