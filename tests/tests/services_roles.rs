//! Per-role credentials (issue 16), over processes on loopback with a real RabbitMQ:
//! the GM, the LM and the worker each run with their own role credential file
//! (`scripts/make-role-credentials.sh` writes the same files), the cluster works
//! (a job runs: GM -> LM launch, LM -> worker start, worker -> LM registration and
//! report, LM -> GM report), and every internal endpoint takes only the roles that
//! may call it: a worker's credential cannot pose as a GM to an LM nor as an LM to a
//! worker, a GM's cannot register a worker slot; the shared secret of the simple
//! mode is a wrong credential there.

use common::codec;
use common::messages::WorkerRegistration;
use common::protocol::{LmToGm, LmToWorker, WorkerToLm};
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{
    credentials, http_raw, role_files, submit_tasks, wait_until, LoopbackCluster, RoleArgs,
};

fn call(method: &str, url: &str, body: &[u8], headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = http_raw(method, url, codec::CONTENT_TYPE, body, headers)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn each_role_calls_only_what_its_role_may() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-roles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let [gm_token, lm_token, worker_token] = role_files(&dir.join("creds"), "token");
    let file = |role: &str| {
        vec![
            "--cluster-secret-file".to_owned(),
            dir.join("creds")
                .join(format!("{role}.toml"))
                .display()
                .to_string(),
        ]
    };
    let extra = RoleArgs {
        gm: file("gm"),
        lm: file("lm"),
        worker: file("worker"),
        ..RoleArgs::default()
    };
    let cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let c = credentials();
    let (gm, lm, worker) = (
        &cluster.gms[0].url,
        &cluster.lms[0].url,
        &cluster.workers[0].url,
    );

    // The roles work together: a job runs to its end.
    let accepted = submit_tasks(
        gm,
        r#"{"resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}"#,
        1,
    );
    let job = accepted["job"].as_u64().expect("job id");
    wait_until("the job to finish", Duration::from_secs(30), || {
        let (_, body) = call(
            "GET",
            &format!("{gm}/v1/jobs/{job}"),
            b"",
            &[("Authorization", &format!("Bearer {}", c.admin))],
        );
        body.contains("\"state\":\"finished\"")
    });

    // The role dimension: (endpoint, body) x (credential, expected status).
    let token = |t: &str| vec![("x-megha-cluster-token", t.to_owned())];
    let empty_reports =
        codec::encode(&common::ClusterName::default(), &Vec::<WorkerToLm>::new()).expect("encode");
    let empty_orders =
        codec::encode(&common::ClusterName::default(), &Vec::<LmToWorker>::new()).expect("encode");
    let empty_lm_msgs =
        codec::encode(&common::ClusterName::default(), &Vec::<LmToGm>::new()).expect("encode");
    let takeover = codec::encode(
        &common::ClusterName::default(),
        &WorkerRegistration {
            slot: 0,
            url: "http://192.0.2.10:9200".into(),
            holding: vec![],
            finished: vec![],
        },
    )
    .expect("encode");
    let garbage = b"\x00garbage".to_vec();
    let (g, l, w, shared) = (
        gm_token.as_str(),
        lm_token.as_str(),
        worker_token.as_str(),
        c.secret.as_str(),
    );
    type Row<'a> = (&'a str, String, Vec<u8>, Vec<(&'a str, &'a str, u16)>);
    let table: Vec<Row> = vec![
        // GM -> LM requests (launch, cancel, reconcile): a GM only.
        (
            "POST",
            format!("{lm}/v1/messages"),
            garbage.clone(),
            vec![
                ("gm", g, 400),
                ("lm", l, 403),
                ("worker", w, 403),
                ("shared", shared, 401),
            ],
        ),
        // A worker's registration (a slot): a worker only; 403 for the callback
        // outside --worker-networks once the worker's credential is accepted.
        (
            "POST",
            format!("{lm}/v1/register"),
            takeover,
            vec![
                ("gm", g, 403),
                ("lm", l, 403),
                ("worker", w, 403),
                ("shared", shared, 401),
            ],
        ),
        (
            "POST",
            format!("{lm}/v1/register"),
            garbage.clone(),
            vec![("gm", g, 403), ("worker", w, 400)],
        ),
        (
            "POST",
            format!("{lm}/v1/worker/messages"),
            empty_reports,
            vec![("gm", g, 403), ("lm", l, 403), ("worker", w, 200)],
        ),
        (
            "GET",
            format!("{lm}/v1/tasks/{job}/0/logs"),
            vec![],
            vec![("worker", w, 403), ("lm", l, 403)],
        ),
        // LM -> worker orders: an LM only.
        (
            "POST",
            format!("{worker}/v1/messages"),
            empty_orders,
            vec![
                ("gm", g, 403),
                // The LM token alone orders no worker: the order key this worker
                // gave its LM is needed too (issue 32; services_worker_orders).
                ("lm", l, 403),
                ("worker", w, 403),
                ("shared", shared, 401),
            ],
        ),
        (
            "GET",
            format!("{worker}/v1/tasks/{job}/0/logs"),
            vec![],
            vec![("gm", g, 403), ("worker", w, 403), ("lm", l, 404)],
        ),
        // LM -> GM reports: an LM only.
        (
            "POST",
            format!("{gm}/v1/internal/messages"),
            empty_lm_msgs,
            vec![
                ("gm", g, 403),
                ("lm", l, 200),
                ("worker", w, 403),
                ("shared", shared, 401),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (method, url, body, rows) in &table {
        for (who, cred, expected) in rows {
            let (status, answer) = call(
                method,
                url,
                body,
                &token(cred)
                    .iter()
                    .map(|(k, v)| (*k, v.as_str()))
                    .collect::<Vec<_>>(),
            );
            if status != *expected {
                failures.push(format!(
                    "{method} {url} with the {who} credential: {status}, expected {expected}: {answer}"
                ));
            }
            for t in [g, l, w] {
                assert!(!answer.contains(t), "{method} {url} shows a token");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The registration refused for the role was counted, the one with the worker's
    // credential refused for its callback network too.
    assert!(
        cluster.metric(
            &cluster.lms,
            "megha_auth_refused_total{reason=\"forbidden\"}"
        ) >= 5.0
    );

    a_worker_token_cannot_end_a_task_it_does_not_run(&cluster, w);

    // Forwarding: only a GM's credential may claim it (a worker's: 403).
    let forwarded = |cred: &str| {
        call(
            "GET",
            &format!("{gm}/v1/jobs"),
            b"",
            &[
                ("Authorization", &format!("Bearer {}", c.admin)),
                ("x-megha-cluster-token", cred),
                ("x-megha-forwarded-by", "0"),
            ],
        )
        .0
    };
    assert_eq!(forwarded(g), 200);
    assert_eq!(forwarded(w), 403);
    assert_eq!(forwarded(l), 403);

    // No token in any log line.
    for entry in std::fs::read_dir(dir.join("logs")).expect("logs") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for t in [g, l, w] {
            assert!(!text.contains(t), "{} shows a token", path.display());
        }
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 32: with worker.toml's token, a POST of a forged `Finished` for a running
/// task to its LM used to end the task at the GM and free its node while the
/// process kept running. A worker's reports are bound to the registration of the
/// worker the LM assigned the node to (its session, `x-megha-worker-session`): the
/// forged report, without that session or with another's, is refused (403 naming
/// the field), counted, and the task keeps running.
fn a_worker_token_cannot_end_a_task_it_does_not_run(cluster: &LoopbackCluster, worker_token: &str) {
    let c = credentials();
    let (gm, lm) = (&cluster.gms[0].url, &cluster.lms[0].url);
    let admin = format!("Bearer {}", c.admin);
    let accepted = submit_tasks(
        gm,
        r#"{"resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":60000}"#,
        1,
    );
    let job = accepted["job"].as_u64().expect("job id");
    let task_url = format!("{gm}/v1/tasks/{job}/0");
    let status = || -> serde_json::Value {
        let (_, body) = call("GET", &task_url, b"", &[("Authorization", &admin)]);
        serde_json::from_str(&body).unwrap_or_default()
    };
    wait_until("the long task to run", Duration::from_secs(30), || {
        status()["state"] == "running"
    });
    let running = status();
    let node = running["node"].as_u64().expect("a running task's node") as u32;
    let attempt = running["attempt"].as_u64().expect("attempt") as u32;
    let forged = codec::encode(
        &common::ClusterName::default(),
        &vec![WorkerToLm::Report(
            common::messages::WorkerReport::Finished {
                node: common::NodeId(node),
                task: common::TaskId::new(job, 0),
                attempt,
                at: common::Micros(1),
            },
        )],
    )
    .expect("encode");
    let forbidden_before = cluster.metric(
        &cluster.lms,
        "megha_auth_refused_total{reason=\"forbidden\"}",
    );
    for session in [None, Some("0".repeat(64))] {
        let mut headers = vec![("x-megha-cluster-token", worker_token.to_owned())];
        if let Some(s) = &session {
            headers.push(("x-megha-worker-session", s.clone()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, answer) = call(
            "POST",
            &format!("{lm}/v1/worker/messages"),
            &forged,
            &headers,
        );
        assert_eq!(
            code, 403,
            "a forged Finished with the worker token (session {session:?}) answered {code}: {answer}"
        );
        assert!(answer.contains("x-megha-worker-session"), "{answer}");
        assert!(!answer.contains(worker_token), "{answer}");
    }
    assert!(
        cluster.metric(
            &cluster.lms,
            "megha_auth_refused_total{reason=\"forbidden\"}"
        ) >= forbidden_before + 2.0,
        "the refusals are counted"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        status()["state"],
        "running",
        "the task still runs: {}",
        status()
    );
    let (code, answer) = call(
        "DELETE",
        &format!("{gm}/v1/jobs/{job}"),
        b"",
        &[("Authorization", &admin)],
    );
    assert_eq!(code, 202, "{answer}");
}

/// A role given another role's file refuses to start, naming the mistake.
#[test]
fn a_role_refuses_another_roles_credential() {
    let dir = std::env::temp_dir().join(format!("megha-roles-wrong-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    role_files(&dir, "token");
    let out = std::process::Command::new(tests::procs::bin_dir().join("worker"))
        .args(["--lm-url", "http://127.0.0.1:9", "--listen", "127.0.0.1:0"])
        .env("MEGHA_CLUSTER_SECRET_FILE", dir.join("gm.toml"))
        .output()
        .expect("run worker");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the credential of the gm role given to a worker"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
