//! A GM's memory stays bounded under load it cannot absorb:
//! - request bodies: one over `--max-body-bytes` gets 413; bodies in flight together
//!   over `--max-total-body-bytes` get 503 with `Retry-After` (a slow client holding
//!   a large body open takes its bytes from the budget until its request ends);
//! - the broker is away (nothing listens at its port): events wait in the publisher,
//!   and once more than `--max-broker-backlog-bytes` wait, submissions get 503 with
//!   `Retry-After` instead of growing the buffer.
//!
//! And an LM's: with the broker away, its state snapshots do not pile up (only the
//! newest waits), and once more than its `--max-broker-backlog-bytes` of task events
//! wait, launch batches get 503 with `Retry-After`, nothing applied, while a
//! cancellation still passes.
//!
//! No broker is needed: the GM and the LM are pointed at a closed port on purpose.

use common::messages::CancelRequest;
use common::protocol::GmToLm;
use common::{GmId, JobId, LmId};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use tests::lone_lm::{two_task_batch, LoneLm};
use tests::procs::{credentials, free_port, get_json, http_raw, wait_until, Proc};

fn post(gm: &str, body: &[u8]) -> (u16, String, String) {
    let bearer = format!("Bearer {}", credentials().admin);
    let (status, head, body) = http_raw(
        "POST",
        &format!("{gm}/v1/jobs"),
        "application/json",
        body,
        &[("Authorization", bearer.as_str())],
    )
    .expect("POST /v1/jobs");
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

fn job(tasks: usize) -> String {
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":50}"#;
    format!("{{\"tasks\":[{}]}}", vec![task; tasks].join(","))
}

#[test]
fn bodies_and_the_broker_backlog_are_bounded_with_retry_after() {
    let dir = std::env::temp_dir().join(format!("megha-bounded-{}", std::process::id()));
    let closed = free_port();
    let args: Vec<String> = [
        "--lm-urls",
        &format!("http://127.0.0.1:{closed}"),
        "--listen",
        "127.0.0.1:0",
        "--amqp",
        &format!("amqp://guest:guest@127.0.0.1:{closed}/%2f"),
        "--max-body-bytes",
        "4000",
        "--max-total-body-bytes",
        "6000",
        "--max-broker-backlog-bytes",
        "3000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut gm = Proc::spawn("global-master", &args, &dir, "gm");
    let url = gm.url.clone();

    // Over the per-request cap.
    let (status, _, body) = post(&url, &vec![b' '; 5000]);
    assert_eq!(status, 413, "{body}");

    // A slow client sends the head of a 4,000-byte body and holds it open...
    let addr = url.trim_start_matches("http://");
    let mut slow = TcpStream::connect(addr).expect("connect");
    write!(
        slow,
        "POST /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{{\"tasks\":[",
        credentials().admin
    )
    .expect("send head");
    slow.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(300));
    // ...so a second body of 3,000 bytes would pass the 6,000-byte total.
    let big = format!("{:<3000}", job(1));
    let (status, head, body) = post(&url, big.as_bytes());
    assert_eq!(status, 503, "{body}");
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    assert!(body.contains("\"field\":\"body\""), "{body}");
    // Once the slow request ends, its bytes return to the budget.
    // The server notices the close asynchronously, so a post or two may still be
    // refused meanwhile; each refusal is counted below.
    drop(slow);
    let mut refused_while_freeing = 0.0;
    wait_until("the budget freed", Duration::from_secs(10), || {
        let freed = post(&url, big.as_bytes()).0 != 503;
        if !freed {
            refused_while_freeing += 1.0;
        }
        freed
    });
    let metrics = |name: &str| {
        let (_, _, page) =
            tests::procs::http("GET", &format!("{url}/metrics"), None).expect("metrics");
        tests::checks::metric_sum(&page, name)
    };
    assert_eq!(
        metrics("megha_gm_body_budget_refused_total"),
        2.0 + refused_while_freeing
    );

    // The broker is away: each accepted job leaves its events waiting. Submissions
    // are accepted until more than 3,000 bytes wait, then refused with Retry-After.
    let mut accepted = 1; // the job above
    let refused = loop {
        let (status, head, body) = post(&url, job(5).as_bytes());
        match status {
            202 => accepted += 1,
            503 => break (head, body),
            other => panic!("unexpected {other}: {body}"),
        }
        assert!(accepted < 100, "never refused: the backlog is not bounded");
    };
    assert!(
        refused.0.to_ascii_lowercase().contains("retry-after"),
        "{}",
        refused.0
    );
    assert!(refused.1.contains("broker"), "{}", refused.1);
    let backlog = metrics("megha_gm_broker_backlog_bytes");
    assert!(
        backlog > 3000.0 && backlog < 6000.0,
        "backlog {backlog} bytes after {accepted} jobs"
    );
    // Nothing accepted was dropped: the jobs are all known.
    let jobs = get_json(&format!("{url}/v1/jobs?limit=200"))["jobs"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(jobs, accepted);
    gm.kill();
}

/// Sends `message` to the LM as a GM would; (status, head, body).

#[test]
fn an_lm_keeps_the_newest_snapshot_and_refuses_launches_over_its_event_backlog() {
    let dir = std::env::temp_dir().join(format!("megha-bounded-lm-{}", std::process::id()));
    let closed = free_port();
    let mut lone = LoneLm::start(
        &dir,
        &format!("amqp://guest:guest@127.0.0.1:{closed}/%2f"),
        2000,
    );
    let metric = |name: &str| lone.metric(name);
    wait_until("the LM is ready", Duration::from_secs(30), || {
        metric("megha_lm_ready") == 1.0 && metric("megha_lm_broker_backlog_bytes") > 0.0
    });
    // One snapshot waits for the broker; ten heartbeats later, still one.
    let one = metric("megha_lm_broker_backlog_bytes");
    let superseded = metric("megha_lm_snapshots_superseded_total");
    wait_until("ten more heartbeats", Duration::from_secs(30), || {
        metric("megha_lm_snapshots_superseded_total") >= superseded + 10.0
    });
    let later = metric("megha_lm_broker_backlog_bytes");
    assert!(
        later <= one + 16.0,
        "snapshots pile up: {one} bytes, then {later} after ten heartbeats"
    );
    assert!(later < 1000.0, "a snapshot of 2 nodes is small: {later}");

    // Each batch's tasks start and finish: their events wait. Launches are
    // accepted until more than 2,000 bytes wait, then refused with Retry-After.
    let mut seq = 0;
    let (head, body) = loop {
        seq += 1;
        let (status, head, body) = lone.post(&two_task_batch(seq, seq));
        match status {
            200 => {}
            503 => break (head, body),
            other => panic!("unexpected {other}: {body}"),
        }
        assert!(
            seq < 50,
            "never refused: the LM's event backlog is not bounded"
        );
        let ended = 2.0 * seq as f64;
        wait_until("the batch's tasks end", Duration::from_secs(30), || {
            metric("megha_lm_worker_reports_total") > 0.0
                && metric("megha_lm_running_tasks") == 0.0
                && metric("megha_lm_placements_total") == ended
        });
    };
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    assert!(body.contains("broker"), "{body}");
    let backlog = metric("megha_lm_broker_backlog_bytes");
    assert!(
        backlog > 2000.0 && backlog < 4000.0,
        "backlog {backlog} bytes after {} batches",
        seq - 1
    );
    // Nothing of the refused batch was applied; resent, it is refused again.
    let requests = metric("megha_lm_launch_requests_total");
    assert_eq!(requests, 2.0 * (seq - 1) as f64);
    assert_eq!(lone.post(&two_task_batch(seq, seq)).0, 503);
    assert_eq!(metric("megha_lm_launch_requests_total"), requests);
    assert_eq!(
        metric("megha_lm_broker_backlog_refusals_total"),
        2.0,
        "the refusal and its resend"
    );
    // A cancellation (it stops work) still passes.
    let cancel = GmToLm::Cancel(CancelRequest {
        gm: GmId(0),
        lm: LmId(0),
        job: JobId(1),
    });
    let (status, _, body) = lone.post(&cancel);
    assert_eq!(status, 200, "{body}");
    lone.kill();
}
