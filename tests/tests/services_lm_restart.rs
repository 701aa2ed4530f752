//! An LM crashes (SIGKILL) while its workers run tasks and starts again, empty, on the
//! same address. Its workers see the new incarnation, register again listing the
//! tasks they hold, and the new LM takes them into its state before it publishes or
//! accepts launches; GMs resend batches whose answer was lost until the LM answers.
//! Every task finishes exactly once (loadgen's report: no task started twice), no
//! node is over-committed and no worker refuses a start.

use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::checks::assert_sample_run;
use tests::procs::{get_json, http, loadgen, wait_until, LoopbackCluster, RoleArgs};

#[test]
fn every_task_finishes_across_an_lm_crash_and_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lm-restart-{}", std::process::id()));
    // Workers check in every 100 ms, so that they register again with the restarted
    // LM while the tasks they hold still run (with the default 1 s the short tasks of
    // the trace could all end first, and the LM would have nothing to adopt).
    let extra = RoleArgs {
        worker: vec!["--lm-check-ms".into(), "100".into()],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(2, 2, 2, 2, &broker.url, &dir.join("logs"), &[], &extra);
    let out = dir.join("out");
    let args = cluster.replay_args(&broker.url, &out, 10, 120);
    let log = dir.join("loadgen.log");
    let replay = std::thread::spawn(move || loadgen(&args, &log));
    // Crash LM 0 while it has tasks running.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Running at its workers, not only allocated at the LM: a crash between the
        // two leaves nothing to adopt (the GM's batch is in doubt and sent again).
        let health = get_json(&format!("{}/healthz", cluster.lms[0].url));
        let at_workers = cluster.metric(&cluster.workers[..2], "megha_worker_running_tasks");
        if health["running"].as_u64().unwrap_or(0) >= 2 && at_workers >= 2.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "LM 0 never ran 2 tasks at once; logs in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let life = |cluster: &LoopbackCluster| {
        get_json(&format!("{}/healthz", cluster.lms[0].url))["incarnation"]
            .as_u64()
            .expect("the LM's life on /healthz")
    };
    let before = life(&cluster);
    cluster.crash_and_restart_lm(0);
    wait_until(
        "the restarted LM to answer",
        Duration::from_secs(30),
        || http("GET", &format!("{}/healthz", cluster.lms[0].url), None).is_ok(),
    );
    // The restarted LM took the next life from its data dir (issue 33).
    let after = life(&cluster);
    assert!(
        after > before,
        "life {after} after a restart, {before} before"
    );
    let on_disk: u64 = std::fs::read_to_string(dir.join("logs").join("lm0-data").join("life"))
        .expect("the LM's life file")
        .trim()
        .parse()
        .expect("a number");
    assert_eq!(on_disk, after);
    // loadgen exits non-zero when a task started twice or never finished (listed in
    // problems.txt); the report is still written.
    let status = replay.join().expect("replay thread");
    let problems = std::fs::read_to_string(out.join("problems.txt")).unwrap_or_default();
    assert!(
        status.success(),
        "replay failed ({status}): {problems}; logs in {}",
        dir.display()
    );
    assert_sample_run(&out);
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_refused_total"),
        0.0,
        "a worker refused a start order (it would have over-committed)"
    );
    // Each of the 183 tasks started once: none ran again after the restart.
    let started = cluster.metric(&cluster.workers, "megha_worker_started_total");
    assert_eq!(started, 183.0, "repeated starts; logs in {}", dir.display());
    assert!(
        cluster.metric(&cluster.lms[..1], "megha_lm_adopted_tasks_total") >= 1.0,
        "the restarted LM adopted nothing; logs in {}",
        dir.display()
    );
}
