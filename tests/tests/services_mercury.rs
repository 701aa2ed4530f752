//! Mercury in the services (embedded mode, both GMs behind their HTTP APIs on
//! loopback): QUEUEABLE work fills a cluster of one-core nodes and queues at the
//! workers; GUARANTEED tasks then arrive at the NON-designated GM, which forwards
//! them to the designated one. They start at once: the LM kills running QUEUEABLE
//! tasks to make room and hands them back to their GM, which places them again.
//! In the end every task finishes exactly once and no node ran two tasks at once.

use common::cluster::ClusterSpec;
use common::events::{TaskEvent, TaskEventKind};
use common::reasons::PendingReason;
use common::{GmId, Micros, Resources, TaskId};
use loadgen::cli::replay::in_actix_system;
use loadgen::replay::embedded::{start_with, EmbeddedCluster, EmbeddedConfig};
use loadgen::sim::MercuryOptions;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tests::checks::{assert_no_overlapping_runs, metric_sum};
use tests::embedded_config;
use tests::gm_http::serve_gm_apis;
use worker::service::actor::metrics::RenderMetrics;

type Log = Arc<Mutex<Vec<TaskEvent>>>;

/// Submits a job of `n` one-core tasks of `kind` to `gm_url`; returns its id.
async fn submit(client: &reqwest::Client, gm_url: &str, n: usize, ms: u64, kind: &str) -> u64 {
    let task = json!({"resources": {"cpu_millis": 1000, "memory_mb": 64},
                      "duration_ms": ms, "kind": kind});
    let answer = client
        .post(format!("{gm_url}/v1/jobs"))
        .json(&json!({ "tasks": vec![task; n] }))
        .send()
        .await
        .expect("post");
    assert_eq!(answer.status().as_u16(), 202, "job accepted");
    answer.json::<Value>().await.expect("json")["job"]
        .as_u64()
        .expect("job id")
}

/// Waits until `done` holds for the events seen so far (fails after 30 s).
async fn wait_events(log: &Log, what: &str, done: impl Fn(&[TaskEvent]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if done(&log.lock().expect("events")) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn count(events: &[TaskEvent], job: u64, kind: fn(&TaskEventKind) -> bool) -> usize {
    events
        .iter()
        .filter(|e| e.task.job.0 == job && kind(&e.kind))
        .count()
}

/// Starts a 4-node embedded cluster (2 GMs, 1 LM, one-core nodes) with `mercury`,
/// recording events into `log`; returns it and the GMs' URLs (GM 0 designated).
async fn cluster(mercury: MercuryOptions, log: &Log) -> (EmbeddedCluster, Vec<String>) {
    let cfg = EmbeddedConfig {
        mercury: Some(mercury),
        ..embedded_config(ClusterSpec::generate(2, 1, 2, Resources::cores(1, 4096), 5))
    };
    let record = log.clone();
    let sink = Arc::new(move |batch: Vec<TaskEvent>| {
        record.lock().expect("events").extend(batch);
    });
    let cluster = start_with(&cfg, &|c| c, sink)
        .await
        .expect("embedded cluster");
    let urls = serve_gm_apis(&cluster, GmId(0)).await;
    (cluster, urls)
}

fn started(k: &TaskEventKind) -> bool {
    matches!(k, TaskEventKind::Started { .. })
}

fn finished(k: &TaskEventKind) -> bool {
    matches!(k, TaskEventKind::Finished { .. })
}

#[test]
fn guaranteed_work_forwarded_to_the_designated_gm_reclaims_queueable_room() {
    let log: Log = Arc::default();
    let seen = log.clone();
    let events = in_actix_system(async move {
        let log = seen;
        let (_cluster, urls) = cluster(MercuryOptions::default(), &log).await;
        let client = reqwest::Client::new();
        let other = &urls[1];

        // Eight QUEUEABLE tasks of 2 s on four nodes: four run, four queue.
        let q_job = submit(&client, other, 8, 2000, "queueable").await;
        assert_eq!(
            q_job >> 48,
            1,
            "QUEUEABLE work stays with the GM it was sent to"
        );
        wait_events(&log, "four QUEUEABLE tasks running", |evs| {
            count(evs, q_job, started) == 4
        })
        .await;

        // Two GUARANTEED tasks sent to GM 1 are forwarded to GM 0 and start at once.
        let g_job = submit(&client, other, 2, 300, "guaranteed").await;
        assert_eq!(
            g_job >> 48,
            0,
            "the designated GM accepted the forwarded job"
        );
        wait_events(&log, "every task finished", |evs| {
            count(evs, q_job, finished) >= 8 && count(evs, g_job, finished) >= 2
        })
        .await;
        // Let late duplicates (if any) show up before judging.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let events = log.lock().expect("events").clone();
        events
    });

    let job_of = |kind: fn(&TaskEventKind) -> bool, gm: u16| {
        events
            .iter()
            .find(|e| kind(&e.kind) && e.task.job.0 >> 48 == gm as u64)
            .map(|e| e.task.job.0)
            .expect("job seen")
    };
    let (q_job, g_job) = (job_of(started, 1), job_of(started, 0));

    // The GUARANTEED tasks were placed by the designated GM and started before any
    // QUEUEABLE task could have finished on its own.
    assert!(events.iter().any(|e| e.task.job.0 == g_job
        && matches!(e.kind, TaskEventKind::Dispatched { gm: GmId(0), .. })));
    let first_q_finish = events
        .iter()
        .filter(|e| e.task.job.0 == q_job && finished(&e.kind))
        .map(|e| e.at)
        .min()
        .expect("a QUEUEABLE task finished");
    for e in events
        .iter()
        .filter(|e| e.task.job.0 == g_job && started(&e.kind))
    {
        assert!(
            e.at < first_q_finish,
            "GUARANTEED {} waited for QUEUEABLE work to end instead of reclaiming",
            e.task
        );
    }

    // QUEUEABLE tasks (only they) were killed to make room, and each went back to
    // its GM (GM 1) to be queued again.
    let killed: Vec<TaskId> = events
        .iter()
        .filter(|e| matches!(e.kind, TaskEventKind::Preempted { .. }))
        .map(|e| e.task)
        .collect();
    assert!(
        !killed.is_empty(),
        "no QUEUEABLE task was killed: {events:#?}"
    );
    assert!(
        killed.iter().all(|t| t.job.0 == q_job),
        "only QUEUEABLE work is killed: {killed:?}"
    );
    for t in &killed {
        let requeued = events.iter().any(|e| {
            e.task == *t
                && matches!(
                    &e.kind,
                    TaskEventKind::Requeued {
                        gm: GmId(1),
                        reason: PendingReason::Preempted { .. }
                    }
                )
        });
        assert!(requeued, "killed task {t} was not requeued by its GM");
    }

    // Every task finished exactly once; no node ever ran two tasks at once.
    let mut finishes: HashMap<TaskId, usize> = HashMap::new();
    for e in events.iter().filter(|e| finished(&e.kind)) {
        *finishes.entry(e.task).or_default() += 1;
    }
    assert_eq!(finishes.len(), 10, "{finishes:?}");
    assert!(finishes.values().all(|n| *n == 1), "{finishes:?}");
    assert_no_overlapping_runs(&events);
}

/// With promotion on, QUEUEABLE tasks that have run long enough become GUARANTEED
/// (a `promoted` event each, the worker told): a later GUARANTEED arrival no longer
/// kills them and waits for one to finish instead.
#[test]
fn promoted_queueable_tasks_are_not_killed_for_guaranteed_work() {
    let log: Log = Arc::default();
    let seen = log.clone();
    let events = in_actix_system(async move {
        let log = seen;
        let mercury = MercuryOptions {
            promote_after: Some(Micros::from_millis(100)),
            ..MercuryOptions::default()
        };
        let (cluster, urls) = cluster(mercury, &log).await;
        let client = reqwest::Client::new();
        let q_job = submit(&client, &urls[1], 4, 1500, "queueable").await;
        wait_events(&log, "four QUEUEABLE tasks promoted", |evs| {
            count(evs, q_job, |k| matches!(k, TaskEventKind::Promoted { .. })) == 4
        })
        .await;
        let g_job = submit(&client, &urls[1], 1, 100, "guaranteed").await;
        wait_events(&log, "every task finished", |evs| {
            count(evs, q_job, finished) >= 4 && count(evs, g_job, finished) >= 1
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Every worker heard of the promotions of its tasks.
        let mut promoted = 0.0;
        for w in &cluster.workers {
            let page = w
                .send(RenderMetrics)
                .await
                .expect("worker metrics")
                .encode();
            promoted += metric_sum(&page, "megha_worker_promoted_total");
        }
        assert_eq!(promoted, 4.0, "promote orders reached the workers");
        let events = log.lock().expect("events").clone();
        events
    });
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, TaskEventKind::Preempted { .. })),
        "a promoted task was killed: {events:#?}"
    );
    let at = |kind: fn(&TaskEventKind) -> bool, gm: u64| {
        events
            .iter()
            .filter(|e| kind(&e.kind) && e.task.job.0 >> 48 == gm)
            .map(|e| e.at)
            .min()
            .expect("event seen")
    };
    assert!(
        at(started, 0) >= at(finished, 1),
        "the GUARANTEED task started before any promoted task ended"
    );
    assert_no_overlapping_runs(&events);
}
