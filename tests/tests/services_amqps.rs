//! `amqps://` against a real TLS-enabled RabbitMQ (issue 16): a node of the test's
//! own whose only listener is TLS ([`tests::tls_broker`]). A loopback cluster whose
//! GMs, LMs and `loadgen` reach it with `--amqp amqps://...` and trust its CA
//! (`--tls-ca-file`) replays the sample trace, and every connection the broker sees
//! is TLS; a GM trusting another CA never connects and says why, naming TLS.

use std::time::Duration;
use tests::pki::make_pki;
use tests::procs::{
    free_port, get_json, replay_sample_trace, wait_until, LoopbackCluster, Proc, RoleArgs,
};
use tests::tls_broker::start_tls_rabbitmq;

#[test]
fn a_loopback_cluster_replays_the_sample_trace_through_a_tls_only_broker() {
    let broker = start_tls_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-amqps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logs = dir.join("logs");
    let ca = broker.pki.ca.to_str().expect("utf-8").to_owned();
    let trust = vec!["--tls-ca-file".to_owned(), ca.clone()];

    // A GM that trusts another CA: the handshake fails, it never connects, and its
    // log says it is TLS (not a refused connection, not a plain-text fallback).
    let wrong = make_pki(&dir.join("wrong-pki"), "another CA");
    let args: Vec<String> = [
        "--id",
        "0",
        "--gms",
        "1",
        "--lm-urls",
        &format!("http://127.0.0.1:{}", free_port()),
        "--listen",
        "127.0.0.1:0",
        "--amqp",
        &broker.url,
        "--cluster-name",
        "wrongca",
        "--tls-ca-file",
        wrong.ca.to_str().expect("utf-8"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let gm = Proc::spawn("global-master", &args, &logs, "gm-wrong-ca");
    let log = logs.join("gm-wrong-ca.log");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until(
        "the GM with the wrong CA to log its failed TLS handshake",
        Duration::from_secs(20),
        || read_log().contains("TLS handshake with the broker failed"),
    );
    let health = get_json(&format!("{}/healthz", gm.url));
    assert_eq!(health["broker_connected"], false, "{health}");
    let text = read_log();
    assert!(
        !text.contains(&broker.url) && !text.contains("connection refused"),
        "the log must name the TLS failure, without the password:\n{text}"
    );
    drop(gm);

    // The cluster, trusting the broker's CA, runs the sample trace through it.
    let extra = RoleArgs {
        gm: trust.clone(),
        lm: trust.clone(),
        worker: Vec::new(),
        ..RoleArgs::default()
    };
    let cluster = LoopbackCluster::start_with_args(2, 2, 2, 1, &broker.url, &logs, &[], &extra);
    let out = dir.join("out");
    let mut args = cluster.replay_args(&broker.url, &out, 100, 60);
    args.extend(trust);
    replay_sample_trace(&args, &out, &dir);
    cluster.assert_sample_replay_ran_once(&out);
    // Every connection is the dedicated user's, over TLS: 2 GMs and 2 LMs at least
    // (the node has no plain listener, so nothing else could have carried the run).
    let connections = broker.connections();
    assert!(connections.len() >= 4, "{connections:?}");
    assert!(
        connections
            .iter()
            .all(|(user, tls)| user == "megha-tls" && *tls),
        "{connections:?}"
    );
    drop(cluster);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
