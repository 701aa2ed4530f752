//! A GM stopped gracefully (SIGTERM) while its job has more tasks than the cluster
//! runs at once, with an observer on the event exchange (`task.#`) and the drain
//! timeout short (1 s), so that tasks are still queued when the drain gives up.
//!
//! - With a journal (`--data-dir`) the queued tasks will resume: the stop reports
//!   them `task.suspended` (not final), never `task.failed`; restarted, the GM
//!   resumes and finishes them, its status API never showing a task `failed`, and
//!   every task runs exactly once.
//! - Without a journal they will not run: the stop reports them `task.failed`.
//!
//! Fails (never skips) without RabbitMQ.

use common::events::TaskEventKind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::observer::Observer;
use tests::procs::{get_json, submit_tasks, wait_until, LoopbackCluster, RoleArgs};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("megha-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// 1 GM (with `gm_args` and a 1 s drain), 1 LM of 2 one-core nodes, 1 worker.
fn small_cluster(amqp: &str, dir: &std::path::Path, mut gm_args: Vec<String>) -> LoopbackCluster {
    gm_args.extend(["--drain-timeout-ms".into(), "1000".into()]);
    let extra = RoleArgs {
        gm: gm_args,
        ..RoleArgs::default()
    };
    LoopbackCluster::start_with_args(1, 1, 2, 1, amqp, &dir.join("logs"), &[], &extra)
}

fn running(cluster: &LoopbackCluster) -> u64 {
    get_json(&format!("{}/healthz", cluster.lms[0].url))["running"]
        .as_u64()
        .unwrap_or(0)
}

/// 6 tasks of 2 s on 2 nodes: 2 run, 4 wait in the GM's queue.
const TASK: &str = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":2000}"#;
const TASKS: usize = 6;

fn is_failed(k: &TaskEventKind) -> bool {
    matches!(k, TaskEventKind::Failed { .. })
}

#[test]
fn a_journalled_gm_stopped_with_queued_tasks_suspends_them_and_finishes_them_after_its_restart() {
    let broker = require_rabbitmq();
    let dir = scratch("gm-stop-journal");
    let data = dir.join("gm0-data");
    let observer = Observer::start(&broker.url);
    let mut cluster = small_cluster(
        &broker.url,
        &dir,
        vec!["--data-dir".into(), data.display().to_string()],
    );
    let job = submit_tasks(&cluster.gms[0].url, TASK, TASKS)["job"]
        .as_u64()
        .expect("job id");
    wait_until("two tasks running", Duration::from_secs(30), || {
        running(&cluster) == 2
    });
    cluster.stop_and_restart_gm(0, Duration::from_millis(500));
    let gm = cluster.gms[0].url.clone();
    // The tasks still queued when the drain gave up were suspended.
    let suspended_tasks = |events: &BTreeMap<u32, Vec<TaskEventKind>>| -> BTreeSet<u32> {
        (events.iter())
            .filter(|(_, kinds)| {
                (kinds.iter()).any(|k| matches!(k, TaskEventKind::Suspended { .. }))
            })
            .map(|(i, _)| *i)
            .collect()
    };
    let reported_failed = |events: &BTreeMap<u32, Vec<TaskEventKind>>| -> BTreeSet<u32> {
        (events.iter())
            .filter(|(_, kinds)| kinds.iter().any(is_failed))
            .map(|(i, _)| *i)
            .collect()
    };
    let at_stop = observer.settle(job, |e| {
        !suspended_tasks(e).is_empty() || !reported_failed(e).is_empty()
    });
    // `failed` is final, and these tasks will resume: never reported so.
    assert!(
        reported_failed(&at_stop).is_empty(),
        "the stop reported tasks of the journal failed: {at_stop:#?}; logs in {}",
        dir.display()
    );
    assert!(
        !suspended_tasks(&at_stop).is_empty(),
        "the stop left tasks queued and said so: {at_stop:#?}; logs in {}",
        dir.display()
    );
    // The restarted GM knows the job at once (its journal) and finishes it; its
    // status API never shows a task (or the job) failed meanwhile.
    let mut polls = 0;
    wait_until(
        "the job to finish at the restarted GM",
        Duration::from_secs(90),
        || {
            let status = get_json(&format!("{gm}/v1/jobs/{job}"));
            polls += 1;
            assert_eq!(status["tasks"], TASKS, "{status}");
            assert_ne!(status["state"], "failed", "{status}");
            assert!(
                status["states"]["failed"].as_u64().unwrap_or(0) == 0,
                "{status}"
            );
            status["state"] == "finished"
        },
    );
    assert!(polls > 1, "the status was seen before the job finished");
    // No run failed: every task finished as its first run, the suspended ones too
    // (the stop wrote their runs as never sent; issue 33).
    for index in 0..TASKS as u32 {
        let task = get_json(&format!("{gm}/v1/tasks/{job}/{index}"));
        assert_eq!(task["state"], "finished", "{task}");
        assert_eq!(task["attempt"], 1, "task {index}: {task}");
    }

    // On the event stream: each task finished, none ever failed.
    wait_until(
        "every task's end on the event stream",
        Duration::from_secs(30),
        || {
            let events = observer.of_job(job);
            (0..TASKS as u32).all(|i| {
                (events.get(&i)).is_some_and(|k| {
                    k.iter()
                        .any(|k| matches!(k, TaskEventKind::Finished { .. }))
                })
            })
        },
    );
    let events = observer.of_job(job);
    for (index, kinds) in &events {
        assert!(
            !kinds.iter().any(is_failed),
            "task {index} was reported failed: {kinds:?}; logs in {}",
            dir.display()
        );
    }
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        TASKS as f64,
        "every task started exactly once; logs in {}",
        dir.display()
    );
    cluster.terminate_all_cleanly();
    observer.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gm_without_a_journal_stopped_with_queued_tasks_reports_them_failed() {
    let broker = require_rabbitmq();
    let dir = scratch("gm-stop-memory");
    let observer = Observer::start(&broker.url);
    let mut cluster = small_cluster(&broker.url, &dir, Vec::new());
    let job = submit_tasks(&cluster.gms[0].url, TASK, TASKS)["job"]
        .as_u64()
        .expect("job id");
    wait_until("two tasks running", Duration::from_secs(30), || {
        running(&cluster) == 2
    });
    let status = cluster.gms[0].terminate(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    // The tasks never dispatched (still queued when the drain gave up) failed: they
    // will not run, nothing holds them any more. None was suspended.
    let never_dispatched = |events: &BTreeMap<u32, Vec<TaskEventKind>>| -> BTreeSet<u32> {
        (events.iter())
            .filter(|(_, kinds)| {
                !(kinds.iter()).any(|k| matches!(k, TaskEventKind::Dispatched { .. }))
            })
            .map(|(i, _)| *i)
            .collect()
    };
    let failed_tasks = |events: &BTreeMap<u32, Vec<TaskEventKind>>| -> BTreeSet<u32> {
        (events.iter())
            .filter(|(_, kinds)| kinds.iter().any(is_failed))
            .map(|(i, _)| *i)
            .collect()
    };
    let events = observer.settle(job, |e| {
        !failed_tasks(e).is_empty() && failed_tasks(e) == never_dispatched(e)
    });
    let (never_dispatched, failed) = (never_dispatched(&events), failed_tasks(&events));
    assert!(!never_dispatched.is_empty(), "{events:#?}");
    assert_eq!(failed, never_dispatched, "{events:#?}");
    assert!(
        !(events.values().flatten()).any(|k| matches!(k, TaskEventKind::Suspended { .. })),
        "{events:#?}"
    );
    // The rest of the cluster stops cleanly.
    for p in cluster.workers.iter_mut().chain(&mut cluster.lms) {
        let status = p.terminate(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "{}: {status:?}",
            p.name
        );
    }
    observer.close();
    let _ = std::fs::remove_dir_all(&dir);
}
