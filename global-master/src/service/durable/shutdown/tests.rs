//! A graceful stop whose drain times out with tasks queued (the GM has no LM state,
//! so it places nothing): what the event stream says of them, with and without a
//! journal, and what the next life on the same journal shows.

use super::drain;
use crate::core::GmConfig;
use crate::lra::ContainerRequest;
use crate::service::actor::deliver::LmLink;
use crate::service::actor::lra_actor::SubmitLra;
use crate::service::actor::queries::GetTask;
use crate::service::actor::{GmActor, Submit};
use crate::service::admission::api::NewTask;
use crate::service::admission::lra_api::NewLra;
use crate::service::durable::journal::Journal;
use crate::service::observe::status::TaskState;
use actix::{Actor, Addr};
use common::events::{TaskEvent, TaskEventKind};
use common::{ClusterName, GmId, Micros, QueueId, Resources, TaskId, TaskKind};
use service_kit::links::{fn_link, LinkError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Log = Arc<Mutex<Vec<TaskEvent>>>;

/// GM 0 of 1 with one LM that never answers (and never sent its state), recording
/// its events into `log`; with the journal in `dir` if given (the doubt timeout is
/// 0, so that the jobs it reads back are resumed at once).
fn gm(log: &Log, dir: Option<&Path>) -> Addr<GmActor> {
    let unreachable: LmLink =
        fn_link(|_| async { Err(LinkError::Unreachable("no LM in this test".into())) });
    let record = log.clone();
    let events = Arc::new(move |batch: Vec<TaskEvent>| {
        record.lock().expect("events").extend(batch);
    });
    let mut actor = GmActor::new(
        GmConfig::new(GmId(0), 1, 1),
        vec![unreachable],
        events,
        1_000,
    )
    .with_doubt_timeout(Duration::ZERO);
    if let Some(dir) = dir {
        let (journal, recovered) = Journal::open(dir, &ClusterName::default()).expect("journal");
        actor = actor.with_journal(journal, recovered);
    }
    actor.start()
}

fn task() -> NewTask {
    NewTask {
        queue: QueueId(0),
        kind: TaskKind::default(),
        resources: Resources::cores(1, 100),
        constraints: Default::default(),
        duration: Micros(1_000_000),
        tags: Vec::new(),
        executor: None,
        priority: 0,
    }
}

/// One LRA container, pending until the GM has a full view (never, here).
fn lra() -> NewLra {
    NewLra {
        queue: QueueId(0),
        containers: vec![ContainerRequest::new(Resources::cores(1, 100), ["svc"])],
        durations: vec![Micros(1_000_000)],
        constraints: Vec::new(),
    }
}

/// The events of `log` after the `queued` ones, as (task, kind).
fn after_queued(log: &Log) -> Vec<(TaskId, TaskEventKind)> {
    log.lock()
        .expect("events")
        .iter()
        .filter(|e| !matches!(e.kind, TaskEventKind::Queued { .. }))
        .map(|e| (e.task, e.kind.clone()))
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("megha-gm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const DRAIN: Duration = Duration::from_millis(200);

#[test]
fn a_journalled_gm_stopping_suspends_its_queued_tasks_and_resumes_them_next_life() {
    let dir = scratch("stop-journalled");
    let log = Log::default();
    let (tasks, container) = actix_rt::System::new().block_on(async {
        let gm = gm(&log, Some(&dir));
        let (_, tasks) = gm.send(Submit(vec![task(); 3])).await.unwrap().unwrap();
        let (_, containers) = gm.send(SubmitLra(lra())).await.unwrap().unwrap();
        drain(&gm, DRAIN).await;
        (tasks, containers[0])
    });
    // The journalled tasks are suspended, nothing final; the LRA container (not
    // journalled: it will not run again) failed.
    let mut reported = after_queued(&log);
    reported.sort_by_key(|(t, _)| *t);
    let mut expected: Vec<_> = (tasks.iter())
        .map(|t| (*t, TaskEventKind::Suspended { gm: GmId(0) }))
        .chain([(
            container,
            TaskEventKind::failed("the global master shut down before placing it"),
        )])
        .collect();
    expected.sort_by_key(|(t, _)| *t);
    assert_eq!(reported, expected);

    // The next life on the same journal has the tasks queued again, not failed.
    let log = Log::default();
    let states = actix_rt::System::new().block_on(async {
        let gm = gm(&log, Some(&dir));
        let mut states = Vec::new();
        for _ in 0..100 {
            states.clear();
            for t in &tasks {
                let status = gm.send(GetTask(*t)).await.unwrap();
                states.push(status.map(|s| s.state));
            }
            if states.iter().all(|s| *s == Some(TaskState::Queued)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        states
    });
    assert_eq!(states, vec![Some(TaskState::Queued); 3]);
    assert!(
        (log.lock().expect("events").iter())
            .all(|e| !matches!(e.kind, TaskEventKind::Failed { .. })),
        "{:?}",
        log.lock()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gm_without_a_journal_stopping_fails_its_queued_tasks() {
    let log = Log::default();
    let tasks = actix_rt::System::new().block_on(async {
        let gm = gm(&log, None);
        let (_, tasks) = gm.send(Submit(vec![task(); 2])).await.unwrap().unwrap();
        drain(&gm, DRAIN).await;
        tasks
    });
    let mut reported = after_queued(&log);
    reported.sort_by_key(|(t, _)| *t);
    let failed = TaskEventKind::failed("the global master shut down before placing it");
    assert_eq!(
        reported,
        tasks
            .iter()
            .map(|t| (*t, failed.clone()))
            .collect::<Vec<_>>()
    );
}
