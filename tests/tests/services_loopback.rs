//! Multi-process: 2 GMs, 2 LMs and 4 workers as separate processes on loopback with a
//! real RabbitMQ; `loadgen replay` submits the sample trace over HTTP and rebuilds the
//! report from the event stream. Fails (never skips) when RabbitMQ is not running.

use std::time::Duration;
use tests::broker::{require_rabbitmq, AMQP_URL};
use tests::checks::{assert_all_finished, assert_no_overlap_on_nodes, read_tasks_csv};
use tests::procs::{loadgen, LoopbackCluster};

#[test]
fn loopback_cluster_with_rabbitmq_runs_every_task_exactly_once() {
    require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-loopback-{}", std::process::id()));
    let mut cluster = LoopbackCluster::start(2, 2, 2, 2, AMQP_URL, &dir.join("logs"));
    let out = dir.join("out");
    let args = cluster.replay_args(AMQP_URL, &out, 100, 60);
    let status = loadgen(&args, &dir.join("loadgen.log"));
    assert!(status.success(), "replay failed; logs in {}", dir.display());

    let rows = read_tasks_csv(&out);
    assert_eq!(rows.len(), 183);
    assert_all_finished(&rows);
    assert_no_overlap_on_nodes(&rows);

    // The report agrees with what the services counted.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["finished"], 183);
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
    assert_eq!(
        summary["lm_rejections"].as_f64(),
        Some(cluster.metric(&cluster.lms, "megha_lm_rejections_total"))
    );

    // Graceful shutdown: every service exits 0 on SIGTERM.
    for p in cluster
        .gms
        .iter_mut()
        .chain(&mut cluster.workers)
        .chain(&mut cluster.lms)
    {
        let status = p.terminate(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "{} did not exit cleanly: {status:?}",
            p.name
        );
    }
}
