//! The attacks of issue 16, before any legitimate work, each refused with nothing
//! applied: a direct launch at an LM, a direct start at a worker, a forged
//! `finished` report, work pushed into a GM, a slot takeover, a spoofed forward.

use crate::calls::{call, json, one_task, Cred};
use common::messages::{
    LaunchBatch, LaunchRequest, Placement, PreemptedTasks, StartTask, WorkerRegistration,
    WorkerReport,
};
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::{GmId, LmId, Micros, NodeId};
use tests::procs::{credentials, LoopbackCluster, Proc};

/// Every attack is refused (401, or 403 for a registration outside
/// --worker-networks), counted, and leaves nothing queued or started.
pub fn are_refused_with_nothing_applied(cluster: &LoopbackCluster) {
    let c = credentials();
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let lm = &cluster.lms[0].url;
    let worker = &cluster.workers[0].url;
    let started = || cluster.metric(&cluster.workers, "megha_worker_started_total");
    let refused = |procs: &[Proc]| {
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

    let launch = GmToLm::Launch(LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq: 1,
        resend: false,
        requests: vec![LaunchRequest {
            task: one_task(7),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    });
    let start = vec![LmToWorker::Start(StartTask {
        node: NodeId(0),
        dispatch: Default::default(),
        task: one_task(8),
    })];
    let forged = vec![WorkerToLm::Report(WorkerReport::Finished {
        used: None,
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
        ended: vec![],
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
}
