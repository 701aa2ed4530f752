//! A start order that outlives its worker's registration never runs (stop 54's
//! node over-commit in the compose chaos test): the LM sends a start order to a
//! worker it can no longer hear, declares the worker lost (the run is reported
//! lost, its node given to other work), the worker registers again, and only then
//! do the order's bytes arrive (a network cut the kernel's retransmissions
//! outlive). The worker must refuse it: it was sent for the registration the LM
//! gave up.
//!
//! The worker reaches its LM through relay A (cut: its check-ins fail), the LM
//! reaches the worker through relay B (held: what the LM sends waits in the relay,
//! the connection open, until released).

use common::Micros;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::lone_lm::{metric_of, two_task_batch_of, LoneLm};
use tests::procs::{free_port, get_json, task_identity_args, wait_until, Proc};
use tests::relay::Relay;

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn a_start_order_sent_before_the_worker_was_declared_lost_never_runs() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-stale-orders-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lm = LoneLm::spawn_lm(&dir, &broker.url, &["--worker-timeout-ms", "2000"]);
    let to_lm = Relay::start(leak(lm.url.trim_start_matches("http://").to_owned()));
    let port = free_port();
    let to_worker = Relay::start(leak(format!("127.0.0.1:{port}")));
    let mut args: Vec<String> = [
        "--lm-url",
        &format!("http://127.0.0.1:{}", to_lm.port),
        "--advertise-url",
        &format!("http://127.0.0.1:{}", to_worker.port),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--slot",
        "0",
        "--lm-check-ms",
        "100",
        "--data-dir",
        &dir.join("worker-data").display().to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(task_identity_args());
    let worker = Proc::spawn("worker", &args, &dir, "worker");
    let lone = LoneLm { lm, worker };
    wait_until("the LM ready", Duration::from_secs(30), || {
        get_json(&format!("{}/healthz", lone.lm.url))["ready"] == true
    });
    // One job through both relays: the orders' connection is open.
    let (status, _, body) = lone.post(&two_task_batch_of(1, 1, Micros::from_millis(1)));
    assert_eq!(status, 200, "{body}");
    let worker_metric = |name: &str| metric_of(&lone.worker.url, name);
    wait_until("the first job done", Duration::from_secs(30), || {
        worker_metric("megha_worker_finished_total") == 2.0
    });
    let started_before = worker_metric("megha_worker_started_total");

    // The cut: the worker no longer reaches its LM, what the LM sends it waits.
    to_worker.hold();
    to_lm.cut();
    let (status, _, body) = lone.post(&two_task_batch_of(2, 2, Micros::from_secs(30)));
    assert_eq!(status, 200, "{body}");
    wait_until(
        "the LM to declare the worker lost",
        Duration::from_secs(30),
        || lone.metric("megha_lm_workers_lost_total") == 1.0,
    );
    assert_eq!(
        lone.metric("megha_lm_tasks_lost_total"),
        2.0,
        "job 2's runs reported lost"
    );
    // The worker is heard again and registers again; then the held bytes arrive.
    to_lm.restore();
    wait_until(
        "the worker registered again",
        Duration::from_secs(30),
        || lone.metric("megha_lm_nodes_down") == 0.0,
    );
    to_worker.release();
    // What the relay held reaches the worker now (its close 500 ms later). Two
    // outcomes are right: the worker refuses each held start order (sent before
    // it registered again), or an order never arrives (queued behind the held call
    // when the LM abandoned the stream, or dropped with its connection). Wrong:
    // any of them starts.
    std::thread::sleep(Duration::from_secs(3));
    let refused = worker_metric("megha_worker_replayed_starts_total");
    eprintln!("held start orders refused by the worker: {refused} of 2");
    assert_eq!(
        worker_metric("megha_worker_started_total"),
        started_before,
        "a start order of the registration the LM gave up ran"
    );
    assert_eq!(worker_metric("megha_worker_running_tasks"), 0.0);
    assert!(
        refused <= 2.0,
        "job 2 has two start orders, {refused} refused"
    );
}
