//! Unit tests of the LM state machine ([`crate::core`]).
use super::*;
use common::cluster::NodeSpec;
use common::messages::LaunchRequest;
use common::reasons::RejectReason;
use common::{ConstraintSet, TaskSpec};

fn lm_with(partitions: &[usize], cores: u64) -> LocalMaster {
    let node = NodeSpec {
        capacity: Resources::cores(cores, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: partitions.iter().map(|n| vec![node; *n]).collect(),
    };
    LocalMaster::new(
        &spec,
        partitions.len() as u16,
        LmConfig::default(),
        Micros(0),
    )
}

fn launch(gm: u16, seq: u64, reqs: &[(u64, u32, Placement, u64)]) -> LaunchBatch {
    LaunchBatch {
        gm: GmId(gm),
        lm: LmId(0),
        seq,
        requests: reqs
            .iter()
            .map(|&(task, node, placement, cores)| LaunchRequest {
                task: TaskSpec::short(TaskId::new(task, 0), Resources::cores(cores, 10), Micros(5)),
                node: NodeId(node),
                placement,
            })
            .collect(),
    }
}

#[test]
fn repartition_lends_exactly_the_request_and_returns_it() {
    // GM0 owns node 0, GM1 owns node 1; both 4 cores.
    let mut lm = lm_with(&[1, 1], 4);
    let fx = lm
        .handle_launch_batch(
            Micros(10),
            launch(0, 1, &[(1, 1, Placement::Repartition, 3)]),
        )
        .unwrap();
    let resp = fx.response.unwrap();
    assert_eq!(
        resp.outcomes[0].1,
        LaunchOutcome::Launched {
            placement: Placement::Repartition
        }
    );
    assert_eq!(lm.free()[1], Resources::new(1000, 1014));
    assert_eq!(resp.snapshot.free[1], Resources::new(1000, 1014));
    assert_eq!(resp.snapshot.applied_batches, vec![1, 0]);
    // GM1's own view of node 1 was stale: asking for 2 cores is refused with the truth.
    let fx = lm
        .handle_launch_batch(Micros(11), launch(1, 1, &[(2, 1, Placement::Internal, 2)]))
        .unwrap();
    assert_eq!(
        fx.response.unwrap().outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::InsufficientResources {
            free: Resources::new(1000, 1014)
        })
    );
    lm.handle_worker_report(
        Micros(20),
        WorkerReport::Finished {
            node: NodeId(1),
            task: TaskId::new(1, 0),
            at: Micros(20),
        },
    )
    .unwrap();
    assert!(lm.is_idle());
}

#[test]
fn a_batch_is_validated_request_by_request() {
    let mut lm = lm_with(&[2], 1);
    let fx = lm
        .handle_launch_batch(
            Micros(0),
            launch(
                0,
                1,
                &[
                    (1, 0, Placement::Internal, 1),
                    (2, 0, Placement::Internal, 1),
                    (3, 1, Placement::Internal, 1),
                ],
            ),
        )
        .unwrap();
    let outcomes: Vec<bool> = fx
        .response
        .unwrap()
        .outcomes
        .iter()
        .map(|(_, o)| matches!(o, LaunchOutcome::Launched { .. }))
        .collect();
    assert_eq!(outcomes, vec![true, false, true]);
    assert_eq!(fx.starts.len(), 2);
}

#[test]
fn duplicates_and_unknown_reports_are_refused() {
    let mut lm = lm_with(&[2], 1);
    lm.handle_launch_batch(Micros(0), launch(0, 1, &[(1, 0, Placement::Internal, 1)]))
        .unwrap();
    let fx = lm
        .handle_launch_batch(Micros(0), launch(0, 2, &[(1, 1, Placement::Internal, 1)]))
        .unwrap();
    assert_eq!(
        fx.response.unwrap().outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::Duplicate)
    );
    let err = lm
        .handle_worker_report(
            Micros(1),
            WorkerReport::Finished {
                node: NodeId(1),
                task: TaskId::new(1, 0),
                at: Micros(1),
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        LmError::UnknownTask {
            task: TaskId::new(1, 0),
            node: NodeId(1)
        }
    );
}

#[test]
fn heartbeats_follow_the_period() {
    let mut lm = lm_with(&[1], 1);
    assert!(lm.tick(Micros(0)).heartbeat.is_some());
    assert!(lm.tick(Micros(5)).heartbeat.is_none());
    assert_eq!(lm.next_wakeup(), Micros::from_secs(10));
    assert!(lm.tick(Micros::from_secs(10)).heartbeat.is_some());
}

#[test]
fn a_batch_sent_again_gets_the_same_answer_and_runs_nothing_twice() {
    let mut lm = lm_with(&[2], 1);
    let batch = launch(
        0,
        1,
        &[
            (1, 0, Placement::Internal, 1),
            (2, 0, Placement::Internal, 1),
        ],
    );
    let first = lm.handle_launch_batch(Micros(0), batch.clone()).unwrap();
    assert_eq!(first.starts.len(), 1);
    // The answer was lost; the GM sends the very same batch (same seq) again.
    let again = lm.handle_launch_batch(Micros(5), batch).unwrap();
    assert!(again.starts.is_empty(), "nothing is started twice");
    assert_eq!(
        again.response.unwrap().outcomes,
        first.response.unwrap().outcomes
    );
    assert_eq!(lm.running().len(), 1);
}
