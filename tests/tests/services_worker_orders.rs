//! Issue 32, the LM -> worker link: a worker takes orders only from the LM it
//! registered with, and starts a run once.
//!
//! A real worker (with `worker.toml`) registers with a fake LM played by this test,
//! which thereby sees what an LM sees: the order key the worker gives at
//! registration. Then, as another holder of the LM role's key (another LM: no key
//! travels on any request, so a relay has none), a start order not signed with
//! this worker's order key (no MAC, another key's, the key itself sent as a header,
//! another body's MAC) is refused (403 naming `x-megha-order-mac`, counted) and
//! runs nothing. An order of the LM itself (signed by the LM key, body MAC under the
//! order key) runs; the same request replayed verbatim is refused as a replay (401);
//! the same dispatch signed anew after the run finished runs nothing again; a new
//! dispatch of the same task runs.

use common::messages::{StartTask, WorkerAliveAnswer, WorkerAssignment};
use common::protocol::LmToWorker;
use common::{ClusterName, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::checks::metric_sum;
use tests::procs::{fake_peer, http_raw, role_files, wait_until, Proc};

/// What the fake LM saw: the order key of the registration, and the reports.
#[derive(Default)]
struct Seen {
    order_key: Option<String>,
    reports: usize,
}

/// A fake LM on loopback answering registration (one node), reports and check-ins.
fn fake_lm(seen: Arc<Mutex<Seen>>) -> String {
    let cluster = service_kit::cluster::Cluster::new(ClusterName::default(), "lm");
    fake_peer::serve(move |request| {
        match request.path.as_str() {
            "/v1/register" => {
                seen.lock().expect("seen").order_key = request
                    .header(service_kit::auth::ORDER_KEY_HEADER)
                    .map(str::to_owned);
                cluster.encode(&WorkerAssignment {
                    lm: LmId(0),
                    slot: 0,
                    nodes: vec![(
                        NodeId(0),
                        Resources {
                            cpu_millis: 1000,
                            memory_mb: 1024,
                        },
                    )],
                    incarnation: 1,
                    lease_ms: 0,
                    orders_from: 0,
                })
            }
            "/v1/worker/alive" => cluster.encode(&WorkerAliveAnswer {
                incarnation: 1,
                registered: true,
            }),
            _ => {
                seen.lock().expect("seen").reports += 1;
                cluster.encode(&())
            }
        }
        .expect("encode")
    })
}

#[test]
fn a_worker_takes_orders_only_from_its_lm_with_its_key() {
    let dir = std::env::temp_dir().join(format!("megha-worker-orders-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let keys = role_files(&dir.join("creds"));
    let as_lm = |url: &str, body: &[u8]| {
        keys.sign(
            "lm",
            service_kit::roles::Role::Worker,
            "POST",
            url,
            body,
            None,
        )
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let lm = fake_lm(seen.clone());
    let worker_file = dir.join("creds").join("worker.toml");
    let worker_file = worker_file.display().to_string();
    let lm_and_credential = [
        ("--lm-url", lm.as_str()),
        ("--cluster-secret-file", &worker_file),
    ];
    let mut args: Vec<String> = vec![
        "--slot".into(),
        "0".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    for (flag, value) in lm_and_credential {
        args.extend([flag.to_owned(), value.to_owned()]);
    }
    let mut worker = Proc::spawn("worker", &args, &dir.join("logs"), "worker");
    wait_until("the worker to register", Duration::from_secs(10), || {
        seen.lock().expect("seen").reports > 0 || {
            let s = seen.lock().expect("seen");
            s.order_key.is_some()
        }
    });
    // Registered by now either way (on main no key is ever sent).
    std::thread::sleep(Duration::from_millis(300));
    let key = seen.lock().expect("seen").order_key.clone();
    let metric = |name: &str| {
        let (_, _, page) = http_raw(
            "GET",
            &format!("{}/metrics", worker.url),
            "text/plain",
            b"",
            &[],
        )
        .expect("metrics");
        metric_sum(&String::from_utf8_lossy(&page), name)
    };
    let start = |job: u64| {
        let order = vec![LmToWorker::Start(StartTask {
            node: NodeId(0),
            // As an LM numbers its start orders: (its life, a sequence number).
            dispatch: common::messages::Dispatch {
                lm_life: 77,
                seq: job,
            },
            task: TaskSpec::short(
                TaskId::new(job, 0),
                Resources {
                    cpu_millis: 100,
                    memory_mb: 1,
                },
                Micros::from_millis(20),
            ),
        })];
        common::codec::encode(&ClusterName::default(), &order).expect("encode")
    };
    // Signed as an LM signs: the body's HMAC under the key (never the key).
    let orders_url = format!("{}/v1/messages", worker.url);
    // Signed by the LM's key (each call anew, as an LM signs each attempt), with the
    // order key's MAC if given; or with the `signature` header given, verbatim.
    let post_signed = |body: &[u8], key: Option<&str>, signature: &(&str, String)| {
        let mac = key.map(|k| service_kit::auth::order_mac(k.as_bytes(), body));
        let mut headers = vec![(signature.0, signature.1.as_str())];
        if let Some(m) = &mac {
            headers.push((service_kit::auth::ORDER_MAC_HEADER, m.as_str()));
        }
        let (status, _, answer) = http_raw(
            "POST",
            &orders_url,
            common::codec::CONTENT_TYPE,
            body,
            &headers,
        )
        .expect("POST /v1/messages");
        (status, String::from_utf8_lossy(&answer).into_owned())
    };
    let post = |body: &[u8], key: Option<&str>| post_signed(body, key, &as_lm(&orders_url, body));

    // The LM's key, without this worker's order key or with another worker's.
    let other_key = "f".repeat(64);
    for borrowed in [None, Some(other_key.as_str())] {
        let (status, answer) = post(&start(32_001), borrowed);
        assert_eq!(
            status, 403,
            "a start signed by the LM's key with order key {borrowed:?} answered {status}: {answer}"
        );
        assert!(
            answer.contains(service_kit::auth::ORDER_MAC_HEADER),
            "{answer}"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric("megha_worker_started_total"), 0.0, "nothing ran");
    assert!(metric("megha_auth_refused_total{reason=\"forbidden\"}") >= 2.0);

    // The LM's own order (token and key) runs; replayed after it finished, nothing.
    let key = key.expect("the worker gave its LM an order key at registration");
    let order = start(32_002);
    // The key itself as a header (as orders carried it before), or a signature of
    // another body (a relay altering a signed order): refused.
    let (status, _, answer) = http_raw(
        "POST",
        &format!("{}/v1/messages", worker.url),
        common::codec::CONTENT_TYPE,
        &order,
        &[
            (
                as_lm(&orders_url, &order).0,
                as_lm(&orders_url, &order).1.as_str(),
            ),
            (service_kit::auth::WORKER_SESSION_HEADER, key.as_str()),
        ],
    )
    .expect("POST");
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&answer));
    let other_body = start(32_003);
    let mac_of_other = service_kit::auth::order_mac(key.as_bytes(), &other_body);
    let (status, _, _) = http_raw(
        "POST",
        &format!("{}/v1/messages", worker.url),
        common::codec::CONTENT_TYPE,
        &order,
        &[
            (
                as_lm(&orders_url, &order).0,
                as_lm(&orders_url, &order).1.as_str(),
            ),
            (service_kit::auth::ORDER_MAC_HEADER, mac_of_other.as_str()),
        ],
    )
    .expect("POST");
    assert_eq!(status, 403, "an order with another body's signature");
    assert_eq!(metric("megha_worker_started_total"), 0.0, "nothing ran yet");
    let signature = as_lm(&orders_url, &order);
    let (status, answer) = post_signed(&order, Some(&key), &signature);
    assert_eq!(status, 200, "{answer}");
    wait_until("the ordered run to finish", Duration::from_secs(10), || {
        metric("megha_worker_finished_total") >= 1.0
    });
    // Replayed verbatim, signature and all (a relay's capture): refused as a replay
    // before anything reads it.
    let (status, answer) = post_signed(&order, Some(&key), &signature);
    assert_eq!(status, 401, "a verbatim replay answered {status}: {answer}");
    assert!(answer.contains("replayed"), "{answer}");
    assert_eq!(metric("megha_auth_refused_total{reason=\"replayed\"}"), 1.0);
    // The same dispatch signed anew (the LM resends after a lost answer): answered
    // but not run again; counted.
    let (status, answer) = post(&order, Some(&key));
    assert_eq!(status, 200, "{answer}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric("megha_worker_started_total"), 1.0, "the replay ran");
    assert_eq!(metric("megha_worker_replayed_starts_total"), 1.0);
    // The same task started anew (a preempted task's restart: same attempt) is
    // another dispatch of its LM and runs.
    let mut again: Vec<LmToWorker> =
        common::codec::decode(&ClusterName::default(), &order).expect("decode");
    if let LmToWorker::Start(s) = &mut again[0] {
        s.dispatch.seq += 1_000_000;
    }
    let again = common::codec::encode(&ClusterName::default(), &again).expect("encode");
    let (status, answer) = post(&again, Some(&key));
    assert_eq!(status, 200, "{answer}");
    wait_until(
        "the task's new dispatch to run",
        Duration::from_secs(10),
        || metric("megha_worker_started_total") >= 2.0,
    );
    // No key or signature in the worker's log.
    let log = std::fs::read_to_string(dir.join("logs").join("worker.log")).unwrap_or_default();
    assert!(
        !log.contains(&key) && !log.contains(&signature.1),
        "the log shows a credential"
    );
    worker.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
