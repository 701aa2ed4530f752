//! Chaos over real processes: the sample trace (183 tasks) is replayed on a loopback
//! cluster (2 GMs with journals and 3 attempts per task, 2 LMs, 2 workers each) while
//! a worker is killed (SIGKILL) and left dead, then a GM is killed and restarted.
//! Every accepted task must finish: the dead worker's tasks are reported lost by
//! its LM and run again elsewhere (the job's retry policy), the GM's queued and
//! running tasks come back from its journal; no task starts more than once per
//! attempt (loadgen's own check) and no node runs two tasks at once.

use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::checks::assert_sample_run;
use tests::procs::{get_json, loadgen, LoopbackCluster, RoleArgs};

#[test]
fn every_task_finishes_across_a_dead_worker_and_a_gm_crash() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-chaos-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm{id}-data").display().to_string();
    let flags = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let extra = RoleArgs {
        gm: flags(&["--data-dir", &data, "--max-attempts", "3"]),
        lm: flags(&["--worker-timeout-ms", "1500"]),
        worker: flags(&["--lm-check-ms", "200"]),
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(2, 2, 2, 2, &broker.url, &dir.join("logs"), &[], &extra);
    let out = dir.join("out");
    let args = cluster.replay_args(&broker.url, &out, 10, 180);
    let log = dir.join("loadgen.log");
    let replay = std::thread::spawn(move || loadgen(&args, &log));
    let busy = |c: &LoopbackCluster, l: usize| {
        get_json(&format!("{}/healthz", c.lms[l].url))["running"]
            .as_u64()
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while busy(&cluster, 0) < 2 {
        assert!(
            Instant::now() < deadline,
            "LM 0 never ran 2 tasks; logs in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = Instant::now();
    cluster.workers[0].kill();
    // The LM notices within its timeout; then a GM dies with work in flight.
    while cluster.metric(&cluster.lms[..1], "megha_lm_workers_lost_total") < 1.0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "worker never declared lost"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let marked_down = t0.elapsed();
    cluster.crash_and_restart_gm(1, Duration::from_millis(500));
    let status = replay.join().expect("replay thread");
    let problems = std::fs::read_to_string(out.join("problems.txt")).unwrap_or_default();
    assert!(
        status.success(),
        "replay failed ({status}): {problems}; logs in {}",
        dir.display()
    );
    assert_sample_run(&out);
    let lost = cluster.metric(&cluster.lms, "megha_lm_tasks_lost_total");
    let recovered = cluster.metric(&cluster.gms, "megha_gm_recovered_tasks_total");
    let started = cluster.metric(&cluster.workers[1..], "megha_worker_started_total");
    eprintln!(
        "chaos figures: worker declared lost {:.1} s after the kill; tasks lost {lost}, resumed from the GM journal {recovered}; starts on surviving workers {started}",
        marked_down.as_secs_f64()
    );
    assert!(
        lost >= 1.0,
        "the killed worker ran nothing? logs in {}",
        dir.display()
    );
    assert_eq!(
        cluster.metric(&cluster.workers[1..], "megha_worker_refused_total"),
        0.0
    );
}
