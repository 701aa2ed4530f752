//! TLS (issue 16): a loopback cluster whose every role serves HTTPS with a
//! certificate of a private CA made here (`service_kit::pki`, as `loadgen certs`
//! makes it) and trusts that CA for its calls: GMs and LMs from certificate files
//! (`--tls-cert-file`, `--tls-key-file`), workers issuing their own at start with the
//! worker issuer (`--tls-issuer-cert`, `--tls-issuer-key`); all with
//! `--tls-ca-file`. It replays the sample trace through `loadgen` over HTTPS, and
//! `loadgen healthcheck` (the containers' healthcheck in TLS mode) checks the roles.
//! And `amqps://` never falls back to plain text.

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
    let worker_tls: Vec<String> = [
        "--tls-issuer-cert",
        &path(&pki.worker_issuer),
        "--tls-issuer-key",
        &path(&pki.worker_issuer_key),
        "--tls-ca-file",
        &path(&pki.ca),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let extra = RoleArgs {
        gm: tls.clone(),
        lm: tls,
        worker: worker_tls,
        ..RoleArgs::default()
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
    // The healthcheck of the TLS containers: healthy with the CA, refused without it.
    let healthcheck = |url: &str, ca: Option<&str>, ready: bool| {
        let mut args = vec!["healthcheck".to_owned(), url.to_owned()];
        if ready {
            args.push("--ready".to_owned());
        }
        if let Some(ca) = ca {
            args.extend(["--tls-ca-file".to_owned(), ca.to_owned()]);
        }
        let log = dir.join("healthcheck.log");
        let status = tests::procs::loadgen(&args, &log);
        (
            status.success(),
            std::fs::read_to_string(&log).unwrap_or_default(),
        )
    };
    for p in [&cluster.gms[0], &cluster.lms[0], &cluster.workers[0]] {
        let (ok, log) = healthcheck(&p.url, Some(&path(&pki.ca)), p.name.starts_with("gm"));
        assert!(ok, "healthcheck of {} failed: {log}", p.name);
    }
    let (ok, log) = healthcheck(&cluster.workers[0].url, None, false);
    assert!(!ok, "a healthcheck without the CA trusted the worker");
    assert!(log.contains("certificate"), "{log}");
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
