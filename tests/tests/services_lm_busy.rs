//! An LM that takes no new work for a while does not hold the GM's tasks: LM 0
//! reaches the broker through a relay this test cuts, and with a tiny
//! `--max-broker-backlog-bytes` it answers launch batches "busy" (503 with
//! `Retry-After`, nothing applied) as soon as one task event waits for the broker.
//! The GM requeues a refused batch's tasks at once and places them on LM 1 while LM
//! 0 is busy, so every task finishes while LM 0's broker is still away (before, they
//! waited for the GM's 300 s doubt timeout). Fails (never skips) without RabbitMQ.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, submit_tasks, wait_until, LoopbackCluster, RoleArgs};
use tests::relay::Relay;

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[test]
fn tasks_refused_by_a_busy_lm_run_on_another_lm_at_once() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lm-busy-{}", std::process::id()));
    let relay = Relay::start("127.0.0.1:5672");
    let vhost = broker.url.rsplit('/').next().expect("vhost").to_owned();
    let via_relay = format!("amqp://guest:guest@127.0.0.1:{}/{vhost}", relay.port);
    let extra = RoleArgs {
        gm: flags(&["--doubt-timeout-s", "300"]),
        lm: flags(&["--max-broker-backlog-bytes", "1"]),
        lm_amqp: vec![via_relay],
        ..RoleArgs::default()
    };
    // 1 GM, 2 LMs of 2 one-core nodes, one worker each.
    let mut cluster =
        LoopbackCluster::start_with_args(1, 2, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    relay.cut();
    wait_until(
        "LM 0 to see its broker gone",
        Duration::from_secs(30),
        || lm0_connected(&cluster) == 0.0,
    );

    // 12 tasks of 300 ms: LM 0 takes at most its first batch (then one event waits
    // for the broker and it is busy); the rest must run on LM 1.
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":300}"#;
    let job = submit_tasks(&gm, task, 12)["job"].as_u64().expect("job id");
    wait_until(
        "every task finished while LM 0's broker is away",
        Duration::from_secs(60),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    assert_eq!(lm0_connected(&cluster), 0.0, "the relay stayed cut");
    let busy = cluster.metric(&cluster.gms, "megha_gm_lm_busy_total");
    assert!(busy >= 1.0, "the GM was told LM 0 is busy ({busy})");
    let refused = cluster.metric(&cluster.lms[..1], "megha_lm_broker_backlog_refusals_total");
    assert!(refused >= 1.0, "LM 0 refused work ({refused})");
    let ran_on_1 = cluster.metric(&cluster.workers[1..], "megha_worker_started_total");
    assert!(ran_on_1 >= 6.0, "LM 1 ran most tasks ({ran_on_1})");

    // The broker back: LM 0 publishes its backlog and takes work again.
    relay.restore();
    wait_until("LM 0 back on its broker", Duration::from_secs(30), || {
        lm0_connected(&cluster) == 1.0
    });
    let again = submit_tasks(&gm, task, 4)["job"].as_u64().expect("job id");
    wait_until("the second job to finish", Duration::from_secs(60), || {
        get_json(&format!("{gm}/v1/jobs/{again}"))["state"] == "finished"
    });
    cluster.terminate_all_cleanly();
}

fn lm0_connected(cluster: &LoopbackCluster) -> f64 {
    cluster.metric(&cluster.lms[..1], "megha_lm_broker_connected")
}
