//! Two clusters on one host and ONE broker virtual host, kept apart only by their
//! names (`--cluster-name`): each replays the sample trace at the same time; each
//! cluster's GMs see only their own LMs, every task of each runs exactly once in its
//! own cluster, and no message crossed: the foreign-message counters stay 0 because
//! the exchanges are per cluster (`blue.state`, `green.state`, ...), which the test
//! checks on the broker. Then a cross-cluster call is made on purpose: an LM refuses
//! it (421 naming both clusters) and counts it, and a worker pointed at the other
//! cluster's LM exits with an error naming both.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{
    bin_dir, credentials, http_raw, replay_sample_trace, LoopbackCluster, RoleArgs,
};

fn named(name: &str) -> RoleArgs {
    let flag = vec!["--cluster-name".to_owned(), name.to_owned()];
    RoleArgs {
        gm: flag.clone(),
        lm: flag.clone(),
        worker: flag,
        ..RoleArgs::default()
    }
}

fn start(name: &str, partition_size: usize, amqp: &str, dir: &Path) -> LoopbackCluster {
    LoopbackCluster::start_with_args(
        2,
        2,
        partition_size,
        2,
        amqp,
        &dir.join(format!("logs-{name}")),
        &[],
        &named(name),
    )
}

/// Every GM of `cluster` sees exactly its own LMs: two of them, each with the
/// cluster's own node count (the clusters differ in size, so a snapshot of the
/// other's LM of the same id would show).
fn assert_sees_only_its_own_lms(cluster: &LoopbackCluster, nodes_per_lm: u64) {
    for gm in &cluster.gms {
        let view = tests::procs::get_json(&format!("{}/v1/nodes?summary=true", gm.url));
        let lms = view["lms"].as_array().expect("lms");
        assert_eq!(lms.len(), 2, "{}: {view}", gm.name);
        for lm in lms {
            assert_eq!(lm["known"], true, "{}: {lm}", gm.name);
            assert_eq!(
                lm["nodes"].as_u64(),
                Some(nodes_per_lm),
                "{}: {lm}",
                gm.name
            );
        }
    }
}

fn foreign(cluster: &LoopbackCluster) -> f64 {
    cluster.metric(&cluster.gms, "megha_gm_foreign_cluster_messages_total")
        + cluster.metric(&cluster.lms, "megha_lm_foreign_cluster_messages_total")
        + cluster.metric(
            &cluster.workers,
            "megha_worker_foreign_cluster_messages_total",
        )
}

#[test]
fn two_clusters_share_a_broker_vhost_without_touching_each_other() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-two-clusters-{}", std::process::id()));
    // Blue: 2 GMs x 2 LMs x 2 nodes per partition (4 nodes per LM); green: 3 (6 per LM).
    let mut blue = start("blue", 2, &broker.url, &dir);
    let mut green = start("green", 3, &broker.url, &dir);
    assert_sees_only_its_own_lms(&blue, 4);
    assert_sees_only_its_own_lms(&green, 6);

    // Both replay the sample trace at once, each reading its own cluster's events.
    let replay = |c: &LoopbackCluster, name: &str| {
        let out = dir.join(format!("out-{name}"));
        let mut args = c.replay_args(&broker.url, &out, 100, 60);
        args.extend(["--cluster-name".to_owned(), name.to_owned()]);
        (args, out, dir.join(format!("replay-{name}")))
    };
    let (blue_args, blue_out, blue_dir) = replay(&blue, "blue");
    let (green_args, green_out, green_dir) = replay(&green, "green");
    std::fs::create_dir_all(&blue_dir).expect("dir");
    std::fs::create_dir_all(&green_dir).expect("dir");
    std::thread::scope(|s| {
        let b = s.spawn(|| replay_sample_trace(&blue_args, &blue_out, &blue_dir));
        let g = s.spawn(|| replay_sample_trace(&green_args, &green_out, &green_dir));
        b.join().expect("blue replay");
        g.join().expect("green replay");
    });
    // Every task of each ran exactly once, in its own cluster.
    blue.assert_sample_replay_ran_once(&blue_out);
    green.assert_sample_replay_ran_once(&green_out);
    assert_eq!(blue.metric(&blue.gms, "megha_gm_launched_total"), 183.0);
    assert_eq!(green.metric(&green.gms, "megha_gm_launched_total"), 183.0);
    assert_sees_only_its_own_lms(&blue, 4);
    assert_sees_only_its_own_lms(&green, 6);

    // Which of the two defences held: the per-cluster exchanges kept every message
    // apart, so nothing of the other cluster even reached a process.
    let vhost = broker.url.rsplit('/').next().expect("vhost");
    let listed = Command::new("rabbitmqctl")
        .args(["-q", "list_exchanges", "-p", vhost, "name"])
        .output()
        .expect("rabbitmqctl runs");
    let exchanges = String::from_utf8_lossy(&listed.stdout);
    for name in ["blue.state", "blue.events", "green.state", "green.events"] {
        assert!(
            exchanges.lines().any(|l| l.trim() == name),
            "{name} in {exchanges}"
        );
    }
    assert!(
        !exchanges.lines().any(|l| l.trim() == "megha.state"),
        "{exchanges}"
    );
    assert_eq!(foreign(&blue), 0.0);
    assert_eq!(foreign(&green), 0.0);

    // A call of the other cluster is refused, naming both, and counted.
    let c = credentials();
    let lm = &blue.lms[0].url;
    let (status, _, body) = http_raw(
        "POST",
        &format!("{lm}/v1/worker/alive"),
        common::codec::CONTENT_TYPE,
        b"",
        &[
            ("x-megha-cluster-token", c.secret.as_str()),
            ("x-megha-cluster", "green"),
        ],
    )
    .expect("call the LM");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 421, "{body}");
    assert!(
        body.contains("`blue`") && body.contains("`green`"),
        "{body}"
    );
    assert_eq!(
        blue.metric(&blue.lms, "megha_lm_foreign_cluster_messages_total"),
        1.0
    );

    // A worker of green pointed at blue's LM fails at once, naming both clusters.
    let log = dir.join("foreign-worker.log");
    let mut worker = Command::new(bin_dir().join("worker"))
        .env("MEGHA_CLUSTER_SECRET_FILE", &c.secret_file)
        .args([
            "--lm-url",
            lm,
            "--listen",
            "127.0.0.1:0",
            "--cluster-name",
            "green",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("worker runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = worker.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = worker.kill();
            panic!(
                "a worker of another cluster kept running; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&log).expect("log");
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("`blue`") && stderr.contains("`green`"),
        "{stderr}"
    );

    blue.terminate_all_cleanly();
    green.terminate_all_cleanly();
}
