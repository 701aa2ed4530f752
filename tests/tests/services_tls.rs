//! TLS (issue 16): a loopback cluster whose every role serves HTTPS with a
//! certificate of a private CA made here (rcgen) and trusts that CA for its calls
//! (`--tls-cert-file`, `--tls-key-file`, `--tls-ca-file`), replaying the sample trace
//! through `loadgen` over HTTPS; and `amqps://` never falls back to plain text.

use std::path::Path;
use tests::broker::require_rabbitmq;
use tests::procs::{http, replay_sample_trace, LoopbackCluster, RoleArgs};

/// Writes `ca.pem`, and `cert.pem` / `key.pem` for localhost and 127.0.0.1 signed by
/// that CA, into `dir`.
fn make_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    std::fs::create_dir_all(dir).expect("pki dir");
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "megha test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server params");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("server certificate");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write ca");
    std::fs::write(dir.join("cert.pem"), cert.pem()).expect("write cert");
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write key");
}

#[test]
fn a_tls_loopback_cluster_replays_the_sample_trace() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-tls-{}", std::process::id()));
    let pki = dir.join("pki");
    make_pki(&pki);
    let ca = pki.join("ca.pem");
    service_kit::tls::trust_ca(&ca).expect("trust the test CA");
    let path = |f: &str| pki.join(f).to_str().expect("utf-8").to_owned();
    let tls: Vec<String> = [
        "--tls-cert-file",
        &path("cert.pem"),
        "--tls-key-file",
        &path("key.pem"),
        "--tls-ca-file",
        &path("ca.pem"),
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
    assert!(probed.is_err(), "amqps:// connected to a plain listener");
    // The same broker over amqp:// answers (the failure above is TLS's).
    rt.block_on(service_kit::amqp::probe(
        &broker.url,
        std::time::Duration::from_secs(10),
    ))
    .expect("plain amqp:// works");
}
