//! Who may call what (issue 16), over processes on loopback with a real RabbitMQ:
//! a table over every endpoint of every role (no credential, wrong credential,
//! another user's credential, the right one), and the attacks of the issue, each
//! refused with nothing applied: a forged `finished` report to the LM, a launch sent
//! straight to an LM, a start sent straight to a worker, a slot takeover through a
//! registration naming a foreign callback, a spoofed forwarding header, work pushed
//! into a GM through its internal endpoint. Also: `/healthz` and `/metrics` stay open
//! and no log line or page shows a credential.

use common::codec;
use common::messages::{
    LaunchBatch, LaunchRequest, Placement, PreemptedTasks, StartTask, WorkerRegistration,
    WorkerReport,
};
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::{GmId, LmId, Micros, NodeId};
use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{credentials, http_raw, wait_until, LoopbackCluster};

/// What a call presents.
#[derive(Clone, Copy, Debug)]
enum Cred<'a> {
    Nothing,
    /// A bearer token nobody holds.
    WrongToken,
    /// A cluster credential that is not the secret.
    WrongSecret,
    /// A user's bearer token.
    User(&'a str),
    /// The cluster secret.
    Secret,
    /// The cluster secret, a user token and `x-megha-forwarded-by`.
    Forwarded(&'a str),
    /// A user token and `x-megha-forwarded-by`, without the cluster secret.
    SpoofedForward(&'a str),
}

fn call(method: &str, url: &str, body: &[u8], bincode: bool, cred: Cred) -> (u16, String) {
    let c = credentials();
    let bearer = |t: &str| format!("Bearer {t}");
    let headers: Vec<(&str, String)> = match cred {
        Cred::Nothing => vec![],
        Cred::WrongToken => vec![("Authorization", bearer("not-a-token-of-anyone-1234"))],
        Cred::WrongSecret => vec![("x-megha-cluster-token", "0".repeat(48))],
        Cred::User(t) => vec![("Authorization", bearer(t))],
        Cred::Secret => vec![("x-megha-cluster-token", c.secret.clone())],
        Cred::Forwarded(t) => vec![
            ("Authorization", bearer(t)),
            ("x-megha-cluster-token", c.secret.clone()),
            ("x-megha-forwarded-by", "1".into()),
        ],
        Cred::SpoofedForward(t) => vec![
            ("Authorization", bearer(t)),
            ("x-megha-forwarded-by", "1".into()),
        ],
    };
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ct = if bincode {
        codec::CONTENT_TYPE
    } else {
        "application/json"
    };
    let (status, _, body) =
        http_raw(method, url, ct, body, &headers).unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

macro_rules! enc {
    ($v:expr) => {
        codec::encode(&common::ClusterName::default(), $v).expect("encode")
    };
}

fn one_task(job: u64) -> common::TaskSpec {
    tests::task(job, 1, &[])
}

#[test]
fn only_who_may_calls_each_endpoint_and_the_attacks_are_refused() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-security-{}", std::process::id()));
    let logs = dir.join("logs");
    let cluster =
        LoopbackCluster::start_with_queues(2, 1, 2, 1, &broker.url, &logs, &["a:0.5:0", "b:0.5:1"]);
    let c = credentials();
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let lm = &cluster.lms[0].url;
    let worker = &cluster.workers[0].url;
    let started = || cluster.metric(&cluster.workers, "megha_worker_started_total");
    let refused = |procs: &[tests::procs::Proc]| {
        ["missing", "wrong"]
            .iter()
            .map(|r| {
                cluster.metric(
                    procs,
                    &format!("megha_auth_refused_total{{reason=\"{r}\"}}"),
                )
            })
            .sum::<f64>()
    };

    // --- The attacks, before any legitimate work: nothing may start. ---
    let launch = GmToLm::Launch(LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq: 1,
        requests: vec![LaunchRequest {
            task: one_task(7),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    });
    let start = vec![LmToWorker::Start(StartTask {
        node: NodeId(0),
        task: one_task(8),
    })];
    let forged = vec![WorkerToLm::Report(WorkerReport::Finished {
        attempt: 1,
        node: NodeId(0),
        task: common::TaskId::new(7, 0),
        at: Micros(1),
    })];
    let requeue = vec![LmToGm::Requeue(PreemptedTasks {
        lm: LmId(0),
        gm: GmId(0),
        tasks: (0..50).map(|i| (one_task(100 + i), Micros(0))).collect(),
    })];
    let takeover = WorkerRegistration {
        slot: 0,
        url: "http://192.0.2.10:9200".into(),
        holding: vec![],
        finished: vec![],
    };
    let lm_refused_before = refused(&cluster.lms);
    for cred in [Cred::Nothing, Cred::WrongSecret, Cred::User(&c.admin)] {
        let attacks: [(&str, String, Vec<u8>); 5] = [
            (
                "direct launch at an LM",
                format!("{lm}/v1/messages"),
                enc!(&launch),
            ),
            (
                "direct start at a worker",
                format!("{worker}/v1/messages"),
                enc!(&start),
            ),
            (
                "forged finished report",
                format!("{lm}/v1/worker/messages"),
                enc!(&forged),
            ),
            (
                "requeue pushed into a GM",
                format!("{gm0}/v1/internal/messages"),
                enc!(&requeue),
            ),
            (
                "slot takeover",
                format!("{lm}/v1/register"),
                enc!(&takeover),
            ),
        ];
        for (what, url, body) in attacks {
            let (status, answer) = call("POST", &url, &body, true, cred);
            assert_eq!(status, 401, "{what} with {cred:?}: {answer}");
            assert!(!answer.contains(&c.secret), "{answer}");
        }
    }
    // Each LM refusal was counted (3 credentials x 3 LM endpoints).
    assert_eq!(refused(&cluster.lms) - lm_refused_before, 9.0);
    // A registration with the credential but a callback outside --worker-networks:
    // 403 with the reason, and the slot stays with its worker.
    let (status, answer) = call(
        "POST",
        &format!("{lm}/v1/register"),
        &enc!(&takeover),
        true,
        Cred::Secret,
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("--worker-networks"), "{answer}");
    assert_eq!(
        cluster.metric(
            &cluster.lms,
            "megha_auth_refused_total{reason=\"forbidden\"}"
        ),
        1.0
    );
    // Spoofed forwarding: a user claiming to be a GM is refused (it is not honoured
    // as a forward: without the check GM 1 would answer 421 and GM 0 accept it).
    let guaranteed = r#"{"tasks":[{"queue":"a","kind":"guaranteed","resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}]}"#;
    for gm in [gm0, gm1] {
        let (status, answer) = call(
            "POST",
            &format!("{gm}/v1/jobs"),
            guaranteed.as_bytes(),
            false,
            Cred::SpoofedForward(&c.alice),
        );
        assert_eq!(status, 401, "spoofed forward to {gm}: {answer}");
    }
    // From a peer (with the secret) the header is honoured: GM 1 is not designated.
    let (status, answer) = call(
        "POST",
        &format!("{gm1}/v1/jobs"),
        guaranteed.as_bytes(),
        false,
        Cred::Forwarded(&c.alice),
    );
    assert_eq!(status, 421, "{answer}");
    let health = json(&call("GET", &format!("{gm0}/healthz"), b"", false, Cred::Nothing).1);
    assert_eq!(
        health["queued"], 0,
        "nothing was queued by the attacks: {health}"
    );
    assert_eq!(started(), 0.0, "no task started from an attack");

    // --- Users and queues. ---
    let short = |queue: &str| {
        format!(
            r#"{{"tasks":[{{"queue":"{queue}","resources":{{"cpu_millis":100,"memory_mb":1}},"duration_ms":10}}]}}"#
        )
    };
    let (status, answer) = call(
        "POST",
        &format!("{gm1}/v1/jobs"),
        short("b").as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 403, "alice may not use queue b: {answer}");
    assert_eq!(json(&answer)["field"], "tasks[0].queue");
    let (status, answer) = call(
        "POST",
        &format!("{gm0}/v1/jobs"),
        short("a").as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let job = json(&answer)["job"].as_u64().expect("job id");
    let lra = r#"{"queue":"a","containers":[{"resources":{"cpu_millis":100,"memory_mb":1},"tags":["t"],"duration_ms":10}]}"#;
    let (status, answer) = call(
        "POST",
        &format!("{gm0}/v1/lras"),
        lra.as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let lra_id = json(&answer)["lra"].as_u64().expect("lra id");
    // The slot takeover failed: alice's task runs on the registered worker.
    wait_until("alice's job finished", Duration::from_secs(30), || {
        let (_, body) = call(
            "GET",
            &format!("{gm0}/v1/jobs/{job}"),
            b"",
            false,
            Cred::User(&c.alice),
        );
        json(&body)["state"] == "finished"
    });

    // --- The table: every endpoint of every role. ---
    use Cred::*;
    let no_such_job = job + 1_000_000;
    // (role endpoint, method, url, body, bincode, [(credential, expected status)])
    let empty_reports = enc!(&Vec::<WorkerToLm>::new());
    let empty_orders = enc!(&Vec::<LmToWorker>::new());
    let empty_lm_msgs = enc!(&Vec::<LmToGm>::new());
    let garbage = b"\x00garbage".to_vec();
    let user_rows = |ok: u16, other: u16| {
        vec![
            (Nothing, 401),
            (WrongToken, 401),
            (Secret, 401),
            (User(c.bob.as_str()), other),
            (User(c.alice.as_str()), ok),
        ]
    };
    let internal_rows = |ok: u16| {
        vec![
            (Nothing, 401),
            (WrongSecret, 401),
            (User(c.admin.as_str()), 401),
            (Secret, ok),
        ]
    };
    let open_rows = || vec![(Nothing, 200), (WrongToken, 200), (WrongSecret, 200)];
    type Row<'a> = (&'a str, String, Vec<u8>, bool, Vec<(Cred<'a>, u16)>);
    let mut table: Vec<Row> = vec![
        (
            "POST",
            format!("{gm0}/v1/jobs"),
            short("a").into_bytes(),
            false,
            user_rows(202, 202),
        ),
        (
            "GET",
            format!("{gm0}/v1/jobs"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/jobs/{job}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm0}/v1/tasks/{job}/0"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm0}/v1/pending"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/overview"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/cluster"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/no-such-page"),
            vec![],
            false,
            vec![(Nothing, 401)],
        ),
        (
            "POST",
            format!("{gm0}/v1/lras"),
            lra.as_bytes().to_vec(),
            false,
            user_rows(202, 202),
        ),
        (
            "GET",
            format!("{gm0}/v1/lras/{lra_id}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm1}/v1/lras/{lra_id}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "POST",
            format!("{gm0}/v1/internal/messages"),
            empty_lm_msgs,
            true,
            internal_rows(200),
        ),
        (
            "POST",
            format!("{lm}/v1/messages"),
            garbage.clone(),
            true,
            internal_rows(400),
        ),
        (
            "POST",
            format!("{lm}/v1/worker/messages"),
            empty_reports,
            true,
            internal_rows(200),
        ),
        (
            "POST",
            format!("{lm}/v1/register"),
            garbage,
            true,
            internal_rows(400),
        ),
        (
            "POST",
            format!("{worker}/v1/messages"),
            empty_orders,
            true,
            internal_rows(200),
        ),
        (
            "GET",
            format!("{worker}/v1/tasks/{job}/0/logs"),
            vec![],
            false,
            internal_rows(404),
        ),
        (
            "GET",
            format!("{lm}/v1/no-such-route"),
            vec![],
            false,
            internal_rows(404),
        ),
    ];
    for url in [gm0, lm, worker] {
        for path in ["/healthz", "/metrics"] {
            table.push(("GET", format!("{url}{path}"), vec![], false, open_rows()));
        }
    }
    // The GM's OpenAPI document describes the API and holds nothing secret.
    table.push((
        "GET",
        format!("{gm0}/openapi.json"),
        vec![],
        false,
        open_rows(),
    ));
    // The dashboard's static files (they hold no data; see docs/dashboard.md).
    for path in ["/", "/dashboard.js", "/dashboard.css"] {
        table.push(("GET", format!("{gm0}{path}"), vec![], false, open_rows()));
    }
    let mut failures = Vec::new();
    for (method, url, body, bincode, rows) in &table {
        for (cred, expected) in rows {
            let (status, answer) = call(method, url, body, *bincode, *cred);
            if status != *expected {
                failures.push(format!(
                    "{method} {url} with {cred:?}: {status}, expected {expected}: {answer}"
                ));
            }
            for secret in [&c.secret, &c.admin, &c.alice, &c.bob] {
                assert!(
                    !answer.contains(secret.as_str()),
                    "{method} {url} shows a credential"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The dashboard's overview lists a user's own jobs only.
    let overview_jobs = |who: &str| -> Vec<u64> {
        let (_, body) = call("GET", &format!("{gm0}/v1/overview"), b"", false, User(who));
        json(&body)["jobs"]
            .as_array()
            .map(|jobs| jobs.iter().filter_map(|j| j["job"].as_u64()).collect())
            .unwrap_or_default()
    };
    assert!(overview_jobs(&c.alice).contains(&job), "alice sees her job");
    assert!(
        !overview_jobs(&c.bob).contains(&job),
        "bob does not see alice's job"
    );

    // Another user's job answers exactly like a missing one.
    let (_, theirs) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{job}"),
        b"",
        false,
        User(&c.bob),
    );
    let (_, missing) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{no_such_job}"),
        b"",
        false,
        User(&c.bob),
    );
    assert_eq!(
        theirs.replace(&job.to_string(), "N"),
        missing.replace(&no_such_job.to_string(), "N")
    );
    // Bob's list holds none of alice's jobs; the admin's holds them.
    let listed = |t: &str| -> Vec<u64> {
        let (_, b) = call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(t));
        json(&b)["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter_map(|j| j["job"].as_u64())
            .collect()
    };
    assert!(!listed(&c.bob).contains(&job));
    assert!(listed(&c.alice).contains(&job));
    assert!(listed(&c.admin).contains(&job));

    // A new user in the tokens file works after SIGHUP (or the GM's next look at
    // the file); until then the token is unknown.
    let carol = format!("carol-{}", "c".repeat(20));
    let (status, _) = call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(&carol));
    assert_eq!(status, 401);
    let mut tokens = std::fs::read_to_string(&c.tokens_file).expect("tokens");
    tokens.push_str(&format!(
        "\n[[users]]\nname = \"carol\"\ntoken = \"{carol}\"\nqueues = [\"b\"]\n"
    ));
    std::fs::write(&c.tokens_file, tokens).expect("write tokens");
    std::process::Command::new("kill")
        .args(["-HUP", &cluster.gms[0].pid().to_string()])
        .status()
        .expect("kill -HUP");
    wait_until("carol's token to work", Duration::from_secs(10), || {
        call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(&carol)).0 == 200
    });
    let (status, _) = call(
        "POST",
        &format!("{gm0}/v1/jobs"),
        short("a").as_bytes(),
        false,
        User(&carol),
    );
    assert_eq!(status, 403, "carol may use queue b only");
    assert!(cluster.metric(&cluster.gms[..1], "megha_gm_tokens_reloads_total") >= 1.0);

    // No credential in any log line.
    for entry in std::fs::read_dir(&logs).expect("logs") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for secret in [&c.secret, &c.admin, &c.alice, &c.bob] {
            assert!(
                !text.contains(secret.as_str()),
                "{} shows a credential",
                path.display()
            );
        }
        assert!(!text.contains("OPEN MODE"), "{} runs open", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ownership survives a GM restart: the job's user is in the GM's journal, so after a
/// crash its submitter still sees it and another user still gets 404.
#[test]
fn a_users_job_stays_theirs_across_a_gm_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-security-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extra = tests::procs::RoleArgs {
        gm: vec![
            "--data-dir".into(),
            dir.join("gm0-data").display().to_string(),
        ],
        ..Default::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let c = credentials();
    let task = r#"{"tasks":[{"resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}]}"#;
    let gm = cluster.gms[0].url.clone();
    let (status, answer) = call(
        "POST",
        &format!("{gm}/v1/jobs"),
        task.as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let job = json(&answer)["job"].as_u64().expect("job id");
    cluster.crash_and_restart_gm(0, Duration::from_millis(200));
    let gm = cluster.gms[0].url.clone();
    let url = format!("{gm}/v1/jobs/{job}");
    wait_until(
        "the restarted GM to know alice's job",
        Duration::from_secs(20),
        || call("GET", &url, b"", false, Cred::User(&c.admin)).0 == 200,
    );
    assert_eq!(call("GET", &url, b"", false, Cred::User(&c.alice)).0, 200);
    assert_eq!(call("GET", &url, b"", false, Cred::User(&c.bob)).0, 404);
    let (_, list) = call(
        "GET",
        &format!("{gm}/v1/jobs"),
        b"",
        false,
        Cred::User(&c.alice),
    );
    assert!(
        list.contains(&job.to_string()),
        "alice lists her job: {list}"
    );
    let (_, list) = call(
        "GET",
        &format!("{gm}/v1/jobs"),
        b"",
        false,
        Cred::User(&c.bob),
    );
    assert!(!list.contains(&job.to_string()), "bob does not: {list}");
    let _ = std::fs::remove_dir_all(&dir);
}
