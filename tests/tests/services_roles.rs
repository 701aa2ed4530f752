//! Per-role credentials (issues 16 and 32), over processes on loopback with a real
//! RabbitMQ: the GM, the LM and the worker each run with their own role credential
//! file (`scripts/make-role-credentials.sh` writes the same files: each role's
//! ed25519 key and every role's public key), the cluster works (a job runs: GM -> LM
//! launch, LM -> worker start, worker -> LM registration and report, LM -> GM
//! report, every request signed), and every internal endpoint takes only the roles
//! that may call it: a worker's key cannot pose as a GM to an LM nor as an LM to a
//! worker, a GM's cannot register a worker slot; the shared secret of the simple
//! mode is a wrong credential there. A signed request replayed, altered, sent to
//! another role, stale, or claiming another role than its key's is refused.

use common::codec;
use common::messages::WorkerRegistration;
use common::protocol::{LmToGm, LmToWorker, WorkerToLm};
use service_kit::roles::Role;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{
    credentials, http_raw, role_files, submit_tasks, wait_until, LoopbackCluster, RoleArgs,
    RoleKeys,
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
    let keys = role_files(&dir.join("creds"));
    let file = |role: &str| {
        vec![
            "--cluster-secret-file".to_owned(),
            dir.join("creds")
                .join(format!("{role}.toml"))
                .display()
                .to_string(),
        ]
    };
    // GM 0 and LM 0 with files of their own (each usable by that --id only), the
    // workers with the file for any worker.
    let extra = RoleArgs {
        gm: file("gm-0"),
        lm: file("lm-0"),
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

    // The role dimension: (endpoint, callee, body) x (credential, expected status).
    // A role's credential is its key: the request signed by it for the callee. The
    // shared secret of the simple mode, as a bearer header, is no credential here.
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
            ended: vec![],
        },
    )
    .expect("encode");
    let garbage = b"\x00garbage".to_vec();
    let headers = |who: &str, callee: Role, method: &str, url: &str, body: &[u8]| {
        if who == "shared" {
            return vec![("x-megha-cluster-token", c.secret.clone())];
        }
        if who == "admin" {
            return vec![("Authorization", format!("Bearer {}", c.admin))];
        }
        vec![keys.sign(who, callee, method, url, body, None)]
    };
    type Row<'a> = (&'a str, String, Role, Vec<u8>, Vec<(&'a str, u16)>);
    let table: Vec<Row> = vec![
        // GM -> LM requests (launch, cancel, reconcile): a GM only.
        (
            "POST",
            format!("{lm}/v1/messages"),
            Role::Lm,
            garbage.clone(),
            vec![("gm", 400), ("lm", 403), ("worker", 403), ("shared", 401)],
        ),
        // A worker's registration (a slot): a worker only; 403 for the callback
        // outside --worker-networks once the worker's credential is accepted.
        (
            "POST",
            format!("{lm}/v1/register"),
            Role::Lm,
            takeover,
            vec![("gm", 403), ("lm", 403), ("worker", 403), ("shared", 401)],
        ),
        (
            "POST",
            format!("{lm}/v1/register"),
            Role::Lm,
            garbage.clone(),
            vec![("gm", 403), ("worker", 400)],
        ),
        (
            "POST",
            format!("{lm}/v1/worker/messages"),
            Role::Lm,
            empty_reports,
            vec![("gm", 403), ("lm", 403), ("worker", 200)],
        ),
        (
            "GET",
            format!("{lm}/v1/tasks/{job}/0/logs"),
            Role::Lm,
            vec![],
            vec![("worker", 403), ("lm", 403)],
        ),
        // LM -> worker orders: an LM only.
        (
            "POST",
            format!("{worker}/v1/messages"),
            Role::Worker,
            empty_orders,
            vec![
                ("gm", 403),
                // The LM's key alone orders no worker: the order key this worker
                // gave its LM is needed too (issue 32; services_worker_orders).
                ("lm", 403),
                ("worker", 403),
                ("shared", 401),
            ],
        ),
        (
            "GET",
            format!("{worker}/v1/tasks/{job}/0/logs"),
            Role::Worker,
            vec![],
            // Its own LM (LM 0) may read; LM 1's key may not (a worker takes calls
            // only from the LM it registered with).
            vec![
                ("gm", 403),
                ("worker", 403),
                ("lm", 404),
                ("lm-0", 404),
                ("lm-1", 403),
            ],
        ),
        // LM -> GM reports: an LM only.
        (
            "POST",
            format!("{gm}/v1/internal/messages"),
            Role::Gm,
            empty_lm_msgs.clone(),
            vec![("gm", 403), ("lm", 200), ("worker", 403), ("shared", 401)],
        ),
        // GM -> GM, whether a job ended (after_jobs across GMs): a GM only; a
        // user's token, even an admin's, is no GM credential.
        (
            "GET",
            format!("{gm}/v1/internal/jobs/{job}"),
            Role::Gm,
            vec![],
            vec![
                ("gm", 200),
                ("lm", 403),
                ("worker", 403),
                ("shared", 401),
                ("admin", 401),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (method, url, callee, body, rows) in &table {
        for (who, expected) in rows {
            let h = headers(who, *callee, method, url, body);
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (status, answer) = call(method, url, body, &h);
            if status != *expected {
                failures.push(format!(
                    "{method} {url} signed by the {who} key: {status}, expected {expected}: {answer}"
                ));
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

    // A signed request holds only as signed: replayed, altered, sent to another
    // role, stale, or signed by one key while naming another role, it is refused
    // (401, counted by reason), and nothing a callee receives is a credential.
    let reports = format!("{gm}/v1/internal/messages");
    let sig = keys.sign("lm", Role::Gm, "POST", &reports, &empty_lm_msgs, None);
    let send = |url: &str, body: &[u8], sig: &(&str, String)| {
        call("POST", url, body, &[(sig.0, sig.1.as_str())])
    };
    assert_eq!(send(&reports, &empty_lm_msgs, &sig).0, 200, "signed once");
    let (code, answer) = send(&reports, &empty_lm_msgs, &sig);
    assert_eq!(code, 401, "replayed verbatim: {answer}");
    assert!(answer.contains("replayed"), "{answer}");
    let other_body = garbage.clone();
    let fresh = keys.sign("lm", Role::Gm, "POST", &reports, &empty_lm_msgs, None);
    let (code, answer) = send(&reports, &other_body, &fresh);
    assert_eq!(code, 401, "another body under the signature: {answer}");
    assert!(answer.contains("bad signature"), "{answer}");
    // Signed for another role (an LM), sent to the GM: bad.
    let for_lm = keys.sign("lm", Role::Lm, "POST", &reports, &empty_lm_msgs, None);
    assert_eq!(
        send(&reports, &empty_lm_msgs, &for_lm).0,
        401,
        "signed for another role"
    );
    let old = service_kit::auth::signed::now_ms() - 120_000;
    let stale = keys.sign("lm", Role::Gm, "POST", &reports, &empty_lm_msgs, Some(old));
    let (code, answer) = send(&reports, &empty_lm_msgs, &stale);
    assert_eq!(code, 401, "stale: {answer}");
    assert!(answer.contains("clock"), "{answer}");
    // The worker's key naming the LM role: bad (the role is the key's, not the header's).
    let (h, v) = keys.sign("worker", Role::Gm, "POST", &reports, &empty_lm_msgs, None);
    let posing = (h, v.replacen("worker.", "lm.", 1));
    assert_eq!(
        send(&reports, &empty_lm_msgs, &posing).0,
        401,
        "a worker key posing as an LM"
    );
    for reason in ["replayed", "signature", "stale"] {
        assert!(
            cluster.metric(
                &cluster.gms,
                &format!("megha_auth_refused_total{{reason=\"{reason}\"}}")
            ) >= 1.0,
            "{reason} counted"
        );
    }

    // Identities per process: GM 1's key may not speak for GM 0 at an LM, LM 1's
    // may not report as LM 0 to a GM (403 naming the field, counted); each one's own
    // key may.
    let cancel = |gm: u16| {
        codec::encode(
            &common::ClusterName::default(),
            &common::protocol::GmToLm::Cancel(common::messages::CancelRequest {
                gm: common::GmId(gm),
                lm: common::LmId(0),
                job: common::JobId(job),
            }),
        )
        .expect("encode")
    };
    let started = |lm: u16| {
        codec::encode(
            &common::ClusterName::default(),
            &vec![LmToGm::Started(common::messages::TasksStarted {
                lm: common::LmId(lm),
                gm: common::GmId(0),
                starts: vec![],
            })],
        )
        .expect("encode")
    };
    let orders = format!("{lm}/v1/messages");
    for (url, callee, body, signer, expected, field) in [
        (
            &orders,
            Role::Lm,
            cancel(0),
            "gm-1",
            403,
            "\"field\":\"gm\"",
        ),
        (&orders, Role::Lm, cancel(0), "gm-0", 200, ""),
        (&orders, Role::Lm, cancel(0), "gm", 200, ""),
        (
            &reports,
            Role::Gm,
            started(0),
            "lm-1",
            403,
            "\"field\":\"lm\"",
        ),
        (&reports, Role::Gm, started(0), "lm-0", 200, ""),
    ] {
        let sig = keys.sign(signer, callee, "POST", url, &body, None);
        let (code, answer) = send(url, &body, &sig);
        assert_eq!(code, expected, "{url} signed by {signer}: {answer}");
        assert!(answer.contains(field), "{answer}");
    }

    // A gang stop of any generation (`ANY_GENERATION`, a restarted GM's: it kills
    // what an earlier life of that GM committed at the LM) is a GM request like any
    // other: GM 1's key may not send GM 0's (403 naming `gm`, nothing applied), and
    // GM 0's own, sent again verbatim, is a replay (401).
    let any_stop = codec::encode(
        &common::ClusterName::default(),
        &common::protocol::GmToLm::Gang(common::messages::GangRequest {
            gm: common::GmId(0),
            life: 0,
            lm: common::LmId(0),
            job: common::JobId(job),
            generation: common::gang::ANY_GENERATION,
            op: common::messages::GangOp::Stop { members: vec![] },
        }),
    )
    .expect("encode");
    let sig = keys.sign("gm-1", Role::Lm, "POST", &orders, &any_stop, None);
    let (code, answer) = send(&orders, &any_stop, &sig);
    assert_eq!(code, 403, "GM 1 stopping GM 0's gang: {answer}");
    assert!(answer.contains("\"field\":\"gm\""), "{answer}");
    let sig = keys.sign("gm-0", Role::Lm, "POST", &orders, &any_stop, None);
    assert_eq!(send(&orders, &any_stop, &sig).0, 200, "GM 0's own stop");
    let (code, answer) = send(&orders, &any_stop, &sig);
    assert_eq!(code, 401, "GM 0's stop replayed: {answer}");
    assert!(answer.contains("replayed"), "{answer}");

    a_worker_key_cannot_end_a_task_it_does_not_run(&cluster, &keys);

    // Forwarding: only a GM's key may claim it (a worker's, an LM's: 403).
    let forwarded = |who: &str| {
        let url = format!("{gm}/v1/jobs");
        let (h, v) = keys.sign(who, Role::Gm, "GET", &url, b"", None);
        call(
            "GET",
            &url,
            b"",
            &[
                ("Authorization", &format!("Bearer {}", c.admin)),
                (h, &v),
                ("x-megha-forwarded-by", "0"),
            ],
        )
        .0
    };
    assert_eq!(forwarded("gm"), 200);
    assert_eq!(forwarded("gm-1"), 200);
    assert_eq!(forwarded("worker"), 403);
    assert_eq!(forwarded("lm"), 403);

    // No key in any log line, nor in any file outside the credential files: each
    // role's process holds only its own file.
    let secrets: Vec<String> = ["gm", "lm", "worker", "gm-0", "gm-1", "lm-0", "lm-1"]
        .iter()
        .map(|r| {
            let text = std::fs::read_to_string(dir.join("creds").join(format!("{r}.toml")))
                .expect("role file");
            let key = text
                .lines()
                .find_map(|l| l.strip_prefix("key = \""))
                .expect("key line");
            key.trim_end_matches('"').to_owned()
        })
        .collect();
    for entry in std::fs::read_dir(dir.join("logs")).expect("logs") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for k in &secrets {
            assert!(!text.contains(k.as_str()), "{} shows a key", path.display());
        }
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 32: with worker.toml, a POST of a forged `Finished` for a running
/// task to its LM used to end the task at the GM and free its node while the
/// process kept running. A worker's reports are bound to the registration of the
/// worker the LM assigned the node to (its session, `x-megha-worker-session`): the
/// forged report, without that session or with another's, is refused (403 naming
/// the field), counted, and the task keeps running.
fn a_worker_key_cannot_end_a_task_it_does_not_run(cluster: &LoopbackCluster, keys: &RoleKeys) {
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
                used: None,
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
    let url = format!("{lm}/v1/worker/messages");
    for session in [None, Some("0".repeat(64))] {
        let mut headers = vec![keys.sign("worker", Role::Lm, "POST", &url, &forged, None)];
        if let Some(s) = &session {
            headers.push(("x-megha-worker-session", s.clone()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, answer) = call("POST", &url, &forged, &headers);
        assert_eq!(
            code, 403,
            "a forged Finished signed by the worker key (session {session:?}) answered {code}: {answer}"
        );
        assert!(answer.contains("x-megha-worker-session"), "{answer}");
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
    role_files(&dir);
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
    // LM 1's file given to LM 0: refused too.
    let out = std::process::Command::new(tests::procs::bin_dir().join("local-master"))
        .args(["--id", "0", "--lms", "2", "--listen", "127.0.0.1:0"])
        .env("MEGHA_CLUSTER_SECRET_FILE", dir.join("lm-1.toml"))
        .output()
        .expect("run local-master");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the credential of lm 1 given to lm 0"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
