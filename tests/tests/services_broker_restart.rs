//! Broker restart mid-run: RabbitMQ is restarted (`service rabbitmq-server restart`,
//! needs root) while a replay is in flight; the services and loadgen reconnect and
//! every task still finishes exactly once.

use std::process::Command;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{loadgen, LoopbackCluster};

#[test]
fn every_task_finishes_across_a_broker_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-restart-{}", std::process::id()));
    let cluster = LoopbackCluster::start(2, 2, 2, 2, &broker.url, &dir.join("logs"));
    let out = dir.join("out");
    let args = cluster.replay_args(&broker.url, &out, 10, 120);
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
    // Started exactly once on the workers (a second start would count twice).
    cluster.assert_sample_replay_ran_once(&out);
    assert!(cluster.metric(&cluster.gms, "megha_broker_reconnects_total") >= 1.0);
}
