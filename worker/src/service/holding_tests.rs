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
/// not listed as finished: a restarted LM would publish it `Finished` and tell its
/// GM so. A run that finished is listed.
#[actix_rt::test]
async fn a_failed_run_is_not_listed_as_finished() {
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
    let (held, finished, incarnation) = worker.send(Holding).await.unwrap();
    assert!(held.is_empty(), "nothing is held any more: {held:?}");
    assert_eq!(incarnation, Some(1));
    let jobs: Vec<u64> = finished.iter().map(|(t, _)| t.job.0).collect();
    assert_eq!(jobs, vec![2], "only the finished run is listed");
}
