//! A worker cut off from its LM (its calls to the LM go through a relay the test
//! cuts; the LM can still call it) fences itself: at 3/5 of its lease (the LM's
//! `--worker-timeout-ms`) without a confirmation it stops its tasks and reports them
//! lost, so that when the LM declares it lost and the GM retries them, they no longer
//! run there too. When the relay is back, the worker registers again and takes new
//! work. With `--worker-fence false` the cut-off worker keeps running them.

use common::Micros;
use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::checks::metric_sum;
use tests::lone_lm::{two_task_batch_of, LoneLm};
use tests::procs::{get_json, http, wait_until, Proc};
use tests::relay::Relay;

fn metric(p: &Proc, name: &str) -> f64 {
    let (_, _, page) = http("GET", &format!("{}/metrics", p.url), None).expect("metrics");
    metric_sum(&page, name)
}

/// An LM (worker timeout 2 s, `fence`), and its worker reaching it through a relay.
fn start(name: &str, fence: bool) -> (LoneLm, Relay, std::path::PathBuf) {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-{name}-{}", std::process::id()));
    let fence = fence.to_string();
    let lm = LoneLm::spawn_lm(
        &dir,
        &broker.url,
        &["--worker-timeout-ms", "2000", "--worker-fence", &fence],
    );
    let target = lm.url.trim_start_matches("http://").to_owned();
    let relay = Relay::start(Box::leak(target.into_boxed_str()));
    let via_relay = format!("http://127.0.0.1:{}", relay.port);
    let worker = LoneLm::spawn_worker(&dir, &via_relay, &["--lm-check-ms", "100"]);
    let lone = LoneLm { lm, worker };
    // Broker and worker up: the LM takes launches.
    wait_until("the LM ready", Duration::from_secs(30), || {
        get_json(&format!("{}/healthz", lone.lm.url))["ready"] == true
    });
    let (status, _, body) = lone.post(&two_task_batch_of(1, 1, Micros::from_millis(1)));
    assert_eq!(status, 200, "{body}");
    wait_until("the first job done", Duration::from_secs(30), || {
        metric(&lone.worker, "megha_worker_finished_total") == 2.0
    });
    (lone, relay, dir)
}

/// Two ten-minute tasks running on the worker.
fn run_two_long_tasks(lone: &LoneLm, seq: u64) {
    let (status, _, body) = lone.post(&two_task_batch_of(seq, seq, Micros::from_secs(600)));
    assert_eq!(status, 200, "{body}");
    wait_until("two long tasks running", Duration::from_secs(30), || {
        metric(&lone.worker, "megha_worker_running_tasks") == 2.0
    });
}

#[test]
fn a_worker_cut_off_from_its_lm_stops_its_tasks_before_the_lm_declares_it_lost() {
    let (mut lone, relay, dir) = start("worker-fence", true);
    run_two_long_tasks(&lone, 2);
    let cut = Instant::now();
    relay.cut();
    wait_until(
        "the LM to declare the worker lost",
        Duration::from_secs(30),
        || lone.metric("megha_lm_workers_lost_total") == 1.0,
    );
    let declared = cut.elapsed();
    // Read right after the LM's declaration: the fence came first.
    assert_eq!(
        metric(&lone.worker, "megha_worker_fences_total"),
        1.0,
        "the worker had not fenced when the LM declared it lost ({declared:?} after the cut); logs in {}",
        dir.display()
    );
    assert_eq!(metric(&lone.worker, "megha_worker_fenced_tasks_total"), 2.0);
    assert_eq!(metric(&lone.worker, "megha_worker_running_tasks"), 0.0);
    assert_eq!(lone.metric("megha_lm_tasks_lost_total"), 2.0);
    assert!(
        declared >= Duration::from_millis(1800),
        "declared lost {declared:?} after the cut, before its 2 s timeout"
    );
    // Back: it registers again, and takes new work (no longer fenced).
    relay.restore();
    wait_until(
        "the worker's nodes back up",
        Duration::from_secs(30),
        || lone.metric("megha_lm_nodes_down") == 0.0,
    );
    let (status, _, body) = lone.post(&two_task_batch_of(3, 3, Micros::from_millis(1)));
    assert_eq!(status, 200, "{body}");
    wait_until("the new job done", Duration::from_secs(30), || {
        metric(&lone.worker, "megha_worker_finished_total") == 4.0
    });
    // Its lost reports were absorbed: still two tasks lost, once each.
    assert_eq!(lone.metric("megha_lm_tasks_lost_total"), 2.0);
    assert_eq!(metric(&lone.worker, "megha_worker_fences_total"), 1.0);
    lone.kill();
}

#[test]
fn without_the_fence_a_cut_off_worker_runs_on_until_it_is_back() {
    let (mut lone, relay, dir) = start("worker-no-fence", false);
    run_two_long_tasks(&lone, 2);
    relay.cut();
    wait_until(
        "the LM to declare the worker lost",
        Duration::from_secs(30),
        || lone.metric("megha_lm_workers_lost_total") == 1.0,
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        metric(&lone.worker, "megha_worker_running_tasks"),
        2.0,
        "logs in {}",
        dir.display()
    );
    assert_eq!(metric(&lone.worker, "megha_worker_fences_total"), 0.0);
    // Back: the LM kills the runs it declared lost.
    relay.restore();
    wait_until("the lost runs killed", Duration::from_secs(30), || {
        metric(&lone.worker, "megha_worker_running_tasks") == 0.0
    });
    assert_eq!(metric(&lone.worker, "megha_worker_killed_total"), 2.0);
    lone.kill();
}
