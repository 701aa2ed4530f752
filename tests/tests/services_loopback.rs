//! Multi-process: 2 GMs, 2 LMs and 4 workers as separate processes on loopback with a
//! real RabbitMQ; `loadgen replay` submits the sample trace over HTTP and rebuilds the
//! report from the event stream. Fails (never skips) when RabbitMQ is not running.

use tests::broker::require_rabbitmq;
use tests::procs::{replay_sample_trace, LoopbackCluster};

#[test]
fn loopback_cluster_with_rabbitmq_runs_every_task_exactly_once() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-loopback-{}", std::process::id()));
    let mut cluster = LoopbackCluster::start(2, 2, 2, 2, &broker.url, &dir.join("logs"));
    let out = dir.join("out");
    let args = cluster.replay_args(&broker.url, &out, 100, 60);
    let summary = replay_sample_trace(&args, &out, &dir);

    // The report agrees with what the services counted.
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_launched_total"),
        183.0
    );
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_placements_total"),
        183.0
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        183.0
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_finished_total"),
        183.0
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_refused_total"),
        0.0
    );
    // Every task ends `finished` at the GM that launched it (reported by its LM on
    // the LM -> GM stream, which may trail the event stream by a moment).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let finished = cluster.metric(&cluster.gms, "megha_gm_tasks_finished_total");
        if finished == 183.0 || std::time::Instant::now() > deadline {
            assert_eq!(finished, 183.0, "task ends known to the GMs");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_tasks_failed_total"),
        0.0
    );
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_gm_messages_dropped_total"),
        0.0
    );
    assert_eq!(
        summary["lm_rejections"].as_f64(),
        Some(cluster.metric(&cluster.lms, "megha_lm_rejections_total"))
    );

    // Graceful shutdown: every service exits 0 on SIGTERM.
    cluster.terminate_all_cleanly();
}
