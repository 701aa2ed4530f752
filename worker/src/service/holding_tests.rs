//! What a worker lists when it registers again with a restarted LM.

use super::actor::{Assign, FromLm, Holding, WorkerActor};
use actix::Actor;
use common::messages::{StartTask, WorkerAssignment, WorkerReport};
use common::protocol::LmToWorker;
use common::{JobId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use service_kit::links::fn_link;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn start(node: u32, job: u64, duration_ms: u64) -> LmToWorker {
    let id = TaskId {
        job: JobId(job),
        index: 0,
    };
    LmToWorker::Start(StartTask {
        node: NodeId(node),
        dispatch: Default::default(),
        task: TaskSpec::short(id, Resources::new(1000, 1), Micros(duration_ms * 1000)),
    })
}

/// A run that failed (here: a start refused for a node the worker does not run) is
/// listed as failed, with its cause: a restarted LM tells its GM so (not "lost"),
/// never `Finished`. A run that finished is listed finished. Both with the time
/// the worker saw them end.
#[actix_rt::test]
async fn ended_runs_are_listed_as_they_ended() {
    let reports: Arc<Mutex<Vec<WorkerReport>>> = Arc::default();
    let seen = reports.clone();
    let link = fn_link(move |batch: Vec<WorkerReport>| {
        seen.lock().unwrap().extend(batch);
        async { Ok(()) }
    });
    let worker = WorkerActor::new(link).start();
    worker
        .send(Assign(WorkerAssignment {
            lm: LmId(0),
            slot: 0,
            nodes: vec![(NodeId(0), Resources::new(4000, 4096))],
            incarnation: 1,
            lease_ms: 0,
            orders_from: 0,
        }))
        .await
        .unwrap();
    worker
        .send(FromLm(vec![start(7, 1, 0), start(0, 2, 10)]))
        .await
        .unwrap();
    let ended = |r: &WorkerReport| {
        matches!(
            r,
            WorkerReport::Finished { .. } | WorkerReport::Failed { .. }
        )
    };
    for _ in 0..500 {
        if reports.lock().unwrap().iter().filter(|r| ended(r)).count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = reports.lock().unwrap().clone();
    assert!(
        got.iter()
            .any(|r| matches!(r, WorkerReport::Failed { task, .. } if task.job == JobId(1))),
        "the refused start is reported failed: {got:?}"
    );
    assert!(
        got.iter()
            .any(|r| matches!(r, WorkerReport::Finished { task, .. } if task.job == JobId(2))),
        "the synthetic task finishes: {got:?}"
    );
    let (held, mut ended, incarnation) = worker.send(Holding).await.unwrap();
    assert!(held.is_empty(), "nothing is held any more: {held:?}");
    assert_eq!(incarnation, Some(1));
    ended.sort_by_key(|e| e.task.job);
    let listed: Vec<(u64, bool)> = ended
        .iter()
        .map(|e| (e.task.job.0, e.failure.is_some()))
        .collect();
    assert_eq!(listed, vec![(1, true), (2, false)], "{ended:?}");
    let reported: Vec<_> = got
        .iter()
        .filter_map(common::messages::TaskEnd::of_report)
        .collect();
    for end in &ended {
        assert!(reported.contains(end), "listed as reported: {end:?}");
    }
}
