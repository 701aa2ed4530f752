//! Issue 33 (fault search seed 284102): a worker whose registration was applied but
//! whose answer was lost registers again, as its registration loop does. The LM took
//! that for a restart: it declared the worker lost, and its running tasks ended
//! `lost` (and were killed and retried) while the process still ran them. Now the
//! same process (same order key, same URL) registering again is a repeat: nothing
//! of it is lost, counted; a new process (a new order key) is still a restart.
//!
//! The test plays the worker against a real LM: it registers a fake worker's URL
//! (which answers every order), has two long tasks launched there, registers again
//! with the same key, then with the same key from another URL, then with another
//! key.

use common::messages::WorkerRegistration;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::lone_lm::{metric_of, post_as_gm, register_worker, two_task_batch_of, LoneLm};
use tests::procs::{fake_peer, wait_until};

/// A fake worker on loopback: answers every call with an empty success and counts
/// the calls (the LM's start orders).
fn fake_worker(calls: Arc<AtomicUsize>) -> String {
    let cluster = service_kit::cluster::Cluster::new(common::ClusterName::default(), "worker");
    fake_peer::serve(move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        cluster.encode(&()).expect("encode")
    })
}

#[test]
fn a_repeated_registration_of_the_same_process_loses_nothing() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-reg-repeat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // No check-ins from the fake worker: a long timeout keeps it registered.
    let lm = LoneLm::spawn_lm(&dir, &broker.url, &["--worker-timeout-ms", "120000"]);
    let calls = Arc::new(AtomicUsize::new(0));
    let worker_url = fake_worker(calls.clone());
    let register_at = |url: &str, key: &str| {
        let registration = WorkerRegistration {
            slot: 0,
            url: url.to_owned(),
            holding: vec![],
            ended: vec![],
        };
        register_worker(&lm.url, &registration, key);
    };
    let register = |key: &str| register_at(&worker_url, key);
    let metric = |name: &str| metric_of(&lm.url, name);
    let key = "a".repeat(64);
    register(&key);
    // Two minute-long tasks launched on the worker's nodes.
    let (status, _, body) = post_as_gm(
        &lm.url,
        &two_task_batch_of(1, 9, common::Micros::from_secs(60)),
    );
    assert_eq!(status, 200, "{body}");
    wait_until(
        "the start orders to reach the worker",
        Duration::from_secs(10),
        || calls.load(Ordering::SeqCst) > 0,
    );

    // The same process again (the answer to its registration was lost).
    register(&key);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric("megha_lm_worker_registration_repeats_total"), 1.0);
    assert_eq!(
        metric("megha_lm_workers_lost_total"),
        0.0,
        "taken for a restart"
    );
    assert_eq!(
        metric("megha_lm_tasks_lost_total"),
        0.0,
        "its running tasks ended lost"
    );

    // The same key from another address (a key read or borrowed elsewhere) is not
    // the registered process: taken as a new worker for the slot, as before, and
    // never as a repeat that would keep the old stream.
    let elsewhere = fake_worker(Arc::new(AtomicUsize::new(0)));
    register_at(&elsewhere, &key);
    wait_until(
        "the slot's tasks to end lost",
        Duration::from_secs(10),
        || metric("megha_lm_tasks_lost_total") == 2.0,
    );
    assert_eq!(metric("megha_lm_workers_lost_total"), 1.0);
    assert_eq!(metric("megha_lm_worker_registration_repeats_total"), 1.0);

    // Another process (a new order key): a restart.
    register_at(&elsewhere, &"b".repeat(64));
    wait_until(
        "the second worker counted lost",
        Duration::from_secs(10),
        || metric("megha_lm_workers_lost_total") == 2.0,
    );
    assert_eq!(metric("megha_lm_worker_registration_repeats_total"), 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}
