//! Broker restart mid-run: RabbitMQ is restarted (`service rabbitmq-server restart`,
//! needs root) while a replay is in flight; the services and loadgen reconnect and
//! every task still finishes exactly once.

use std::process::Command;
use std::time::Duration;
use tests::broker::{require_rabbitmq, AMQP_URL};
use tests::checks::{assert_all_finished, assert_no_overlap_on_nodes, read_tasks_csv};
use tests::procs::{loadgen, LoopbackCluster};

#[test]
fn every_task_finishes_across_a_broker_restart() {
    require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-restart-{}", std::process::id()));
    let cluster = LoopbackCluster::start(2, 2, 2, 2, AMQP_URL, &dir.join("logs"));
    let out = dir.join("out");
    let args = cluster.replay_args(AMQP_URL, &out, 10, 120);
    let log = dir.join("loadgen.log");
    let replay = std::thread::spawn(move || loadgen(&args, &log));
    std::thread::sleep(Duration::from_secs(3));
    let restarted = Command::new("service")
        .args(["rabbitmq-server", "restart"])
        .status()
        .expect("`service` runs");
    assert!(
        restarted.success(),
        "could not restart RabbitMQ (needs root)"
    );
    let status = replay.join().expect("replay thread");
    assert!(
        status.success(),
        "replay failed across the restart; logs in {}",
        dir.display()
    );
    let rows = read_tasks_csv(&out);
    assert_eq!(rows.len(), 183);
    assert_all_finished(&rows);
    assert_no_overlap_on_nodes(&rows);
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        183.0
    );
    assert!(cluster.metric(&cluster.gms, "megha_broker_reconnects_total") >= 1.0);
}
