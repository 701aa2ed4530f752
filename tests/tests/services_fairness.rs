//! Fairness in the services (embedded mode, the same actors as the binaries): two
//! queues with 50 % shares on different GMs. Queue `a` fills the whole cluster with
//! long tasks; then a task of queue `b` (under its share) arrives and finds no room.
//! Its GM asks the LM to preempt one of `a`'s tasks; the LM verifies `a` is over its
//! share, kills the victim on its worker and launches `b`'s task in its room; the
//! victim goes back to GM 0, waits (its queue is over share: it never preempts) and
//! runs to completion once `b`'s task is done.

use common::cluster::ClusterSpec;
use common::events::{TaskEvent, TaskEventKind};
use common::fairness::{FairnessConfig, SharePolicy};
use common::preemption::PreemptionRules;
use common::reasons::PendingReason;
use common::{JobId, Micros, QueueId, Resources, TaskId, TaskSpec};
use loadgen::cli::replay::in_actix_system;
use loadgen::replay::driver::{replay, ReplayOptions, ReplayResult};
use loadgen::replay::embedded::{self, EmbeddedConfig};
use loadgen::replay::queues::assign_queues;
use loadgen::sim::workload::{build, ConstraintMode, Job, WorkloadOptions};
use loadgen::trace::{read_all, tr::TrReader};
use service_kit::links::Sink;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::checks::assert_no_overlapping_runs;
use tests::embedded_config;
use tests::gm_http::serve_gm_apis_with_queues;
use tests::procs::workspace_root;

/// A job of `n` one-core tasks of `duration` in `queue`, arriving at `arrival_ms`.
fn job(id: u64, arrival_ms: u64, n: u32, duration: Micros, queue: u16) -> Job {
    Job {
        id,
        dag: None,
        arrival: Micros::from_millis(arrival_ms),
        tasks: (0..n)
            .map(|i| TaskSpec {
                queue: QueueId(queue),
                ..TaskSpec::short(TaskId::new(id, i), Resources::cores(1, 512), duration)
            })
            .collect(),
    }
}

/// Runs `jobs` on an embedded cluster; returns the replay result and every event.
fn run(cfg: &EmbeddedConfig, jobs: &[Job], speedup: f64) -> (ReplayResult, Vec<TaskEvent>) {
    let seen: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
    let opts = ReplayOptions {
        speedup,
        rate_cap: None,
        timeout: Duration::from_secs(30),
        quiet: true,
        gms: cfg.cluster.gms as usize,
        queues: cfg.fairness.clone(),
        gangs: None,
    };
    let log = seen.clone();
    let result = in_actix_system(async move {
        let (tx, events) = tokio::sync::mpsc::unbounded_channel::<TaskEvent>();
        let sink: Sink<Vec<TaskEvent>> = Arc::new(move |evs: Vec<TaskEvent>| {
            log.lock().expect("event log").extend(evs.iter().cloned());
            for e in evs {
                let _ = tx.send(e);
            }
        });
        let cluster = embedded::start(cfg, sink).await.expect("cluster starts");
        replay(
            jobs,
            embedded::submitter(cluster.gms.clone()),
            events,
            &opts,
        )
        .await
    });
    let events = std::mem::take(&mut *seen.lock().expect("event log"));
    (result, events)
}

fn count(events: &[TaskEvent], task: TaskId, kind: fn(&TaskEventKind) -> bool) -> usize {
    events
        .iter()
        .filter(|e| e.task == task && kind(&e.kind))
        .count()
}

/// Queue shares without the preemption hold: an immediate kill (Algorithm 2).
fn no_hold(spec: &str) -> FairnessConfig {
    let rules = PreemptionRules {
        hold: Micros::ZERO,
        ..PreemptionRules::default()
    };
    FairnessConfig::parse(spec, SharePolicy::Drf, 2)
        .expect("queues")
        .with_rules(rules)
}

#[test]
fn a_queue_under_its_share_preempts_the_queue_over_it() {
    // 2 GMs, 1 LM, 2 nodes per partition: 4 one-core nodes.
    let fairness = no_hold("a:0.5:0,b:0.5:1");
    let cfg = EmbeddedConfig {
        fairness: Some(Arc::new(fairness)),
        ..embedded_config(ClusterSpec::generate(2, 1, 2, Resources::cores(1, 4096), 3))
    };
    let long = Micros::from_millis(1500);
    let jobs = vec![
        job(0, 0, 4, long, 0),
        job(1, 400, 1, Micros::from_millis(300), 1),
    ];
    let (result, events) = run(&cfg, &jobs, 1.0);
    assert!(result.unsubmitted.is_empty(), "{:?}", result.unsubmitted);
    assert!(result.refusals.is_empty(), "{:?}", result.refusals);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );

    // Exactly one of a's tasks was preempted, losing the work it had done.
    let preempted: Vec<(TaskId, Micros)> = events
        .iter()
        .filter_map(|e| match e.kind {
            TaskEventKind::Preempted { lost, .. } => Some((e.task, lost)),
            _ => None,
        })
        .collect();
    assert_eq!(preempted.len(), 1, "{events:#?}");
    let (victim, lost) = preempted[0];
    assert_eq!(
        victim.job,
        first_job(&events, 0),
        "the victim is one of a's tasks"
    );
    assert!(lost > Micros::ZERO, "a running task loses work");
    assert_eq!(result.outcome.counters.preemptions, 1);
    assert_eq!(result.outcome.counters.wasted, lost);

    // The victim went back to its own GM (gm0) with the reason, ran again, and
    // finished exactly once; b's task started once, before it.
    let requeued_by_gm0 = events.iter().any(|e| {
        e.task == victim
            && matches!(&e.kind, TaskEventKind::Requeued { gm, reason: PendingReason::Preempted { .. } } if gm.0 == 0)
    });
    assert!(requeued_by_gm0, "{events:#?}");
    let started = |k: &TaskEventKind| matches!(k, TaskEventKind::Started { .. });
    let finished = |k: &TaskEventKind| matches!(k, TaskEventKind::Finished { .. });
    assert_eq!(count(&events, victim, started), 2);
    assert_eq!(count(&events, victim, finished), 1);
    let b_task = TaskId {
        job: first_job(&events, 1),
        index: 0,
    };
    assert_eq!(count(&events, b_task, started), 1);
    assert_eq!(count(&events, b_task, finished), 1);
    for t in 0..4 {
        let a_task = TaskId {
            job: victim.job,
            index: t,
        };
        assert_eq!(count(&events, a_task, finished), 1, "{a_task}");
    }

    // b's task did not wait for an a task to finish: it started before any did.
    let b_start = events
        .iter()
        .find(|e| e.task == b_task && started(&e.kind))
        .expect("b started")
        .at;
    let first_a_finish = events
        .iter()
        .filter(|e| e.task.job == victim.job && finished(&e.kind))
        .map(|e| e.at)
        .min()
        .expect("a finished");
    assert!(
        b_start < first_a_finish,
        "b waited for a to finish instead of preempting"
    );

    assert_no_overlapping_runs(&events);
}

/// Queue shares with a preemption hold of `hold`.
fn held(spec: &str, hold: Micros) -> FairnessConfig {
    no_hold(spec).with_rules(PreemptionRules {
        hold,
        ..PreemptionRules::default()
    })
}

/// The first start (or finish) of `task` among `events`.
fn first_at(events: &[TaskEvent], task: TaskId, kind: fn(&TaskEventKind) -> bool) -> Micros {
    (events.iter())
        .find(|e| e.task == task && kind(&e.kind))
        .map(|e| e.at)
        .unwrap_or_else(|| panic!("{task}: no such event in {events:#?}"))
}

/// Queues `a` and `b` (half each, GMs 0 and 1) on 2 GMs x 1 LM x 2 one-core nodes
/// with preemption held for `hold`: runs `jobs`, checks every task ended and none
/// started twice, and gives the result and the event stream.
fn run_held(hold: Micros, jobs: &[Job]) -> (ReplayResult, Vec<TaskEvent>) {
    let fairness = held("a:0.5:0,b:0.5:1", hold);
    let cfg = EmbeddedConfig {
        fairness: Some(Arc::new(fairness)),
        ..embedded_config(ClusterSpec::generate(2, 1, 2, Resources::cores(1, 4096), 3))
    };
    let (result, events) = run(&cfg, jobs, 1.0);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );
    (result, events)
}

/// With the hold (the default rules), a held request over the services: `a`
/// fills the 4 nodes and has 4 more tasks waiting at its GM; `b`'s task asks to
/// preempt and the LM holds it. The first `a` task that ends frees a node: it goes
/// to `b`'s task, with no kill, before any of `a`'s waiting tasks.
#[test]
fn a_held_request_gets_the_first_room_that_frees_with_no_kill() {
    let jobs = vec![
        job(0, 0, 8, Micros::from_millis(1000), 0),
        job(1, 300, 1, Micros::from_millis(300), 1),
    ];
    let (result, events) = run_held(Micros::from_secs(60), &jobs);
    let preempted = |k: &TaskEventKind| matches!(k, TaskEventKind::Preempted { .. });
    assert!(!events.iter().any(|e| preempted(&e.kind)), "{events:#?}");
    assert_eq!(result.outcome.counters.preemptions, 0);
    let started = |k: &TaskEventKind| matches!(k, TaskEventKind::Started { .. });
    let finished = |k: &TaskEventKind| matches!(k, TaskEventKind::Finished { .. });
    let (a, b) = (first_job(&events, 0), first_job(&events, 1));
    let b_task = TaskId { job: b, index: 0 };
    let b_start = first_at(&events, b_task, started);
    let a_tasks = (0..8).map(|index| TaskId { job: a, index });
    let a_starts: Vec<Micros> = a_tasks
        .clone()
        .map(|t| first_at(&events, t, started))
        .collect();
    let first_end = (a_tasks
        .clone()
        .map(|t| first_at(&events, t, finished))
        .min())
    .expect("a");
    assert!(b_start >= first_end, "b took room that freed: {events:#?}");
    let mut later: Vec<Micros> = a_starts.into_iter().filter(|s| *s > first_end).collect();
    later.sort();
    assert_eq!(later.len(), 4, "a's last 4 tasks waited: {events:#?}");
    assert!(b_start <= later[0], "b's held task went first: {events:#?}");
    assert_eq!(count(&events, b_task, started), 1);
    assert_no_overlapping_runs(&events);
}

/// A hold that nothing serves ends in a kill: `a`'s tasks run long, `b`'s held
/// request preempts one of them once its (short) hold is over, well before any
/// of `a`'s tasks ends.
#[test]
fn a_held_request_that_no_room_serves_kills_after_the_hold() {
    let jobs = vec![
        job(0, 0, 4, Micros::from_millis(4000), 0),
        job(1, 300, 1, Micros::from_millis(300), 1),
    ];
    let (_, events) = run_held(Micros::from_millis(500), &jobs);
    let preempted: Vec<&TaskEvent> = (events.iter())
        .filter(|e| matches!(e.kind, TaskEventKind::Preempted { .. }))
        .collect();
    assert_eq!(preempted.len(), 1, "{events:#?}");
    let started = |k: &TaskEventKind| matches!(k, TaskEventKind::Started { .. });
    let finished = |k: &TaskEventKind| matches!(k, TaskEventKind::Finished { .. });
    let (a, b) = (first_job(&events, 0), first_job(&events, 1));
    let b_task = TaskId { job: b, index: 0 };
    let b_queued = (events.iter())
        .find(|e| e.task == b_task && matches!(e.kind, TaskEventKind::Queued { .. }))
        .expect("b queued")
        .at;
    let b_start = first_at(&events, b_task, started);
    assert!(
        b_start >= b_queued + Micros::from_millis(500),
        "b's task waited out the hold before the kill: {events:#?}"
    );
    let first_a_end = ((0..4).map(|index| first_at(&events, TaskId { job: a, index }, finished)))
        .min()
        .expect("a");
    assert!(
        b_start < first_a_end,
        "b killed for, not waiting: {events:#?}"
    );
    assert_eq!(preempted[0].task.job, a);
    assert_no_overlapping_runs(&events);
}

/// The sample trace with two queues on two GMs (embedded): contention makes queues
/// preempt each other; every task still finishes exactly once, each run of a node
/// ends before the next starts, and the report counts one preemption per kill.
#[test]
fn the_sample_trace_with_queues_runs_every_task_to_the_end() {
    let fairness = no_hold("a:0.3:0,b:0.7:1");
    let trace =
        read_all(TrReader::open(&workspace_root().join("data/traces/YH_small.tr")).expect("trace"))
            .expect("trace parses");
    let mut jobs = build(
        &trace,
        &WorkloadOptions {
            default_task: Resources::cores(1, 1024),
            constraints: ConstraintMode::None,
            seed: 7,
        },
    );
    assign_queues(&mut jobs, &trace, &fairness).expect("queues");
    let total: usize = jobs.iter().map(|j| j.tasks.len()).sum();
    let cfg = EmbeddedConfig {
        heartbeat: Micros::from_millis(500),
        fairness: Some(Arc::new(fairness)),
        ..embedded_config(ClusterSpec::generate(
            2,
            2,
            2,
            Resources::cores(1, 16384),
            7,
        ))
    };
    let (result, events) = run(&cfg, &jobs, 50.0);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );
    let finished = events
        .iter()
        .filter(|e| matches!(e.kind, TaskEventKind::Finished { .. }))
        .count();
    assert_eq!(finished, total, "each task finished exactly once");
    let preempted = events
        .iter()
        .filter(|e| matches!(e.kind, TaskEventKind::Preempted { .. }))
        .count() as u64;
    assert!(
        preempted > 0,
        "the trace contends: queues preempt each other"
    );
    assert_eq!(result.outcome.counters.preemptions, preempted);
    assert_no_overlapping_runs(&events);
}

/// The GM-assigned job id of the `k`-th job queued (by the order of `Queued` events
/// of distinct jobs).
fn first_job(events: &[TaskEvent], k: usize) -> JobId {
    let mut jobs: Vec<JobId> = Vec::new();
    for e in events {
        if matches!(e.kind, TaskEventKind::Queued { .. }) && !jobs.contains(&e.task.job) {
            jobs.push(e.task.job);
        }
    }
    jobs[k]
}

/// Over the GMs' HTTP APIs with queues `a` (GM 0, designated) and `b` (GM 1): a job
/// of queue `b` that mixes a GUARANTEED task with a short one, submitted to GM 1, is
/// forwarded whole to GM 0, which accepts the queue it does not serve (the job is
/// placed there entire), and both tasks run to the end. An ordinary job of queue `b`
/// sent to GM 0 is still refused, 421 naming GM 1.
#[test]
fn a_job_with_guaranteed_work_is_placed_whole_by_the_designated_gm_whatever_its_queue() {
    let fairness =
        Arc::new(FairnessConfig::parse("a:0.5:0,b:0.5:1", SharePolicy::Drf, 2).expect("queues"));
    let log: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
    let record = log.clone();
    let cfg = EmbeddedConfig {
        fairness: Some(fairness.clone()),
        ..embedded_config(ClusterSpec::generate(2, 1, 2, Resources::cores(1, 4096), 5))
    };
    in_actix_system(async move {
        let sink: Sink<Vec<TaskEvent>> = Arc::new(move |batch: Vec<TaskEvent>| {
            record.lock().expect("events").extend(batch);
        });
        let cluster = embedded::start(&cfg, sink).await.expect("embedded cluster");
        let urls =
            serve_gm_apis_with_queues(&cluster, common::GmId(0), Some(fairness.clone())).await;
        let client = reqwest::Client::new();
        let task = |kind: &str| {
            serde_json::json!({"queue": "b", "kind": kind, "duration_ms": 50,
                               "resources": {"cpu_millis": 1000, "memory_mb": 64}})
        };
        let mixed = serde_json::json!({"tasks": [task("guaranteed"), task("short")]});
        let answer = client
            .post(format!("{}/v1/jobs", urls[1]))
            .json(&mixed)
            .send()
            .await
            .expect("post");
        let status = answer.status().as_u16();
        let body: serde_json::Value = answer.json().await.expect("json");
        assert_eq!(status, 202, "{body}");
        let job = JobId(body["job"].as_u64().expect("job id"));
        let plain = serde_json::json!({"tasks": [task("short")]});
        let refused = client
            .post(format!("{}/v1/jobs", urls[0]))
            .json(&plain)
            .send()
            .await
            .expect("post");
        assert_eq!(refused.status().as_u16(), 421);
        let why: serde_json::Value = refused.json().await.expect("json");
        assert!(
            why["error"].as_str().is_some_and(|e| e.contains("gm1")),
            "{why}"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let done = log
                .lock()
                .expect("events")
                .iter()
                .filter(|e| e.task.job == job && matches!(e.kind, TaskEventKind::Finished { .. }))
                .count();
            if done == 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the mixed job did not finish"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
