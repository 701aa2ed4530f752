//! Mercury across processes on loopback with a real RabbitMQ: 2 GMs, 1 LM with
//! `--queueable`, 2 workers (4 one-core nodes). QUEUEABLE work fills the nodes and
//! queues at the workers; GUARANTEED tasks sent to GM 1 are forwarded to GM 0 (the
//! designated GM) and make room by killing QUEUEABLE tasks (LM -> worker `LmToWorker::Kill`),
//! which go back to GM 1 (`LmToGm::Requeue` on `/v1/internal/messages`) and run again. Then `loadgen replay
//! --task-types hybrid:10:0.7` runs the sample trace through the same processes.
//! Fails (never skips) when RabbitMQ is not running.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{replay_sample_trace, submit_tasks, wait_until, LoopbackCluster, RoleArgs};

fn task(kind: &str, duration_ms: u64) -> String {
    format!(
        r#"{{"kind":"{kind}","resources":{{"cpu_millis":1000,"memory_mb":512}},"duration_ms":{duration_ms}}}"#
    )
}

#[test]
fn guaranteed_work_reclaims_queueable_room_between_processes() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-loopback-mercury-{}", std::process::id()));
    let flags = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let extra = RoleArgs {
        gm: flags(&["--queueable-top-k", "2"]),
        lm: flags(&["--queueable", "--shed-k", "2"]),
        worker: flags(&["--queue-order", "job"]),
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(2, 1, 2, 2, &broker.url, &dir.join("logs"), &[], &extra);
    let gm1 = cluster.gms[1].url.clone();
    let m = |role: &[tests::procs::Proc], name: &str| cluster.metric(role, name);
    let q = submit_tasks(&gm1, &task("queueable", 4000), 8);
    assert_eq!(
        q["job"].as_u64().expect("job") >> 48,
        1,
        "QUEUEABLE stays on GM 1"
    );
    wait_until(
        "four QUEUEABLE tasks running",
        Duration::from_secs(10),
        || m(&cluster.workers, "megha_worker_started_total") == 4.0,
    );
    let g = submit_tasks(&gm1, &task("guaranteed", 300), 2);
    assert_eq!(
        g["job"].as_u64().expect("job") >> 48,
        0,
        "forwarded to GM 0"
    );
    wait_until("every task to finish", Duration::from_secs(60), || {
        m(&cluster.workers, "megha_worker_finished_total") == 10.0
    });
    let killed = m(&cluster.workers, "megha_worker_killed_total");
    assert!(
        killed >= 1.0,
        "no QUEUEABLE task was killed for GUARANTEED work"
    );
    assert_eq!(m(&cluster.lms, "megha_lm_kills_sent_total"), killed);
    assert_eq!(m(&cluster.lms, "megha_lm_preempted_requeued_total"), killed);
    assert_eq!(m(&cluster.workers, "megha_worker_refused_total"), 0.0);
    // Each task ran once, the killed ones once more.
    assert_eq!(
        m(&cluster.workers, "megha_worker_started_total"),
        10.0 + killed
    );
    assert_eq!(m(&cluster.lms, "megha_lm_queued_queueable_tasks"), 0.0);

    // A hybrid-GQ replay of the sample trace through the same processes.
    let out = dir.join("out");
    let mut args = cluster.replay_args(&broker.url, &out, 100, 90);
    args.extend(["--task-types", "hybrid:10:0.7"].map(String::from));
    let summary = replay_sample_trace(&args, &out, &dir);
    assert_eq!(summary["task_types"], "hybrid:10:0.7");
    assert_eq!(summary["over_commits"], 0);

    cluster.terminate_all_cleanly();
}
