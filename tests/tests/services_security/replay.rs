//! Issue 32: a captured LM -> worker start order, replayed verbatim after its task
//! finished, ran the command a second time. A worker now knows the runs (task,
//! attempt) it was ordered to start in this life: a start for one of them is
//! refused by run identity (not by its bytes), counted, and nothing runs again.

use crate::calls::{call, Cred};
use common::messages::StartTask;
use common::protocol::LmToWorker;
use common::{Micros, NodeId, Resources, TaskId, TaskSpec};
use std::time::Duration;
use tests::procs::{wait_until, LoopbackCluster};

pub fn a_replayed_start_runs_nothing_again(cluster: &LoopbackCluster) {
    let worker = &cluster.workers[0].url;
    let metric = |name: &str| cluster.metric(&cluster.workers[..1], name);
    let order = vec![LmToWorker::Start(StartTask {
        node: NodeId(0),
        task: TaskSpec::short(
            TaskId::new(3_200_000, 0),
            Resources {
                cpu_millis: 100,
                memory_mb: 1,
            },
            Micros::from_millis(20),
        ),
    })];
    let captured = enc!(&order);
    let (started, finished) = (
        metric("megha_worker_started_total"),
        metric("megha_worker_finished_total"),
    );
    let url = format!("{worker}/v1/messages");
    let (status, answer) = call("POST", &url, &captured, true, Cred::Secret);
    assert_eq!(status, 200, "{answer}");
    wait_until("the ordered run to finish", Duration::from_secs(10), || {
        metric("megha_worker_finished_total") > finished
    });
    assert_eq!(metric("megha_worker_started_total"), started + 1.0);
    // The same bytes again, after the run finished; and once more.
    for _ in 0..2 {
        let (status, answer) = call("POST", &url, &captured, true, Cred::Secret);
        assert_eq!(
            status, 200,
            "a replay is answered like a retried order: {answer}"
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        metric("megha_worker_started_total"),
        started + 1.0,
        "the replayed start ran the task again"
    );
    assert!(
        metric("megha_worker_replayed_starts_total") >= 2.0,
        "the replays are counted"
    );
}
