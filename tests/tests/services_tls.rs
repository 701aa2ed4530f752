//! TLS (issue 16): a loopback cluster whose every role serves HTTPS with a
//! certificate of a private CA made here (rcgen) and trusts that CA for its calls
//! (`--tls-cert-file`, `--tls-key-file`, `--tls-ca-file`), replaying the sample trace
//! through `loadgen` over HTTPS; and `amqps://` never falls back to plain text.

use tests::broker::require_rabbitmq;
use tests::pki::make_pki;
use tests::procs::{http, replay_sample_trace, LoopbackCluster, RoleArgs};

#[test]
fn a_tls_loopback_cluster_replays_the_sample_trace() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-tls-{}", std::process::id()));
    let pki = make_pki(&dir.join("pki"), "megha test CA");
    let ca = pki.ca.clone();
    service_kit::tls::trust_ca(&ca).expect("trust the test CA");
    let path = |f: &std::path::Path| f.to_str().expect("utf-8").to_owned();
    let tls: Vec<String> = [
        "--tls-cert-file",
        &path(&pki.cert),
        "--tls-key-file",
        &path(&pki.key),
        "--tls-ca-file",
        &path(&pki.ca),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let extra = RoleArgs {
        gm: tls.clone(),
        lm: tls.clone(),
        worker: tls,
    };
    let cluster =
        LoopbackCluster::start_with_args(2, 2, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    for p in cluster
        .gms
        .iter()
        .chain(&cluster.lms)
        .chain(&cluster.workers)
    {
        assert!(p.url.starts_with("https://"), "{} serves {}", p.name, p.url);
        // Plain HTTP to a TLS port gets no answer.
        let plain = p.url.replace("https://", "http://");
        let answered =
            http("GET", &format!("{plain}/healthz"), None).is_ok_and(|(s, _, _)| s == 200);
        assert!(!answered, "{} answered plain HTTP", p.name);
    }
    let out = dir.join("out");
    let mut args = cluster.replay_args(&broker.url, &out, 100, 60);
    args.extend([
        "--tls-ca-file".to_owned(),
        ca.to_str().expect("utf-8").to_owned(),
    ]);
    replay_sample_trace(&args, &out, &dir);
    cluster.assert_sample_replay_ran_once(&out);
    // Forwarding between GMs works over HTTPS too (GM 1 forwards to GM 0).
    let (status, _, body) = tests::procs::http(
        "POST",
        &format!("{}/v1/jobs", cluster.gms[1].url),
        Some(r#"{"tasks":[{"kind":"guaranteed","resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}]}"#),
    )
    .expect("post");
    assert_eq!(status, 202, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn amqps_never_falls_back_to_plain_text() {
    let broker = require_rabbitmq();
    // The broker's plain listener: a TLS client must fail the handshake there (a
    // client without TLS would connect in plain text and succeed).
    let url = broker.url.replace("amqp://", "amqps://");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let probed = rt.block_on(service_kit::amqp::probe(
        &url,
        std::time::Duration::from_secs(10),
    ));
    let err = probed.expect_err("amqps:// connected to a plain listener");
    assert!(err.contains("TLS handshake"), "{err}");
    // The same broker over amqp:// answers (the failure above is TLS's).
    rt.block_on(service_kit::amqp::probe(
        &broker.url,
        std::time::Duration::from_secs(10),
    ))
    .expect("plain amqp:// works");
}
