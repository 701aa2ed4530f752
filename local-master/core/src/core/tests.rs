//! Unit tests of the LM state machine ([`crate::core`]).
use super::*;
use common::cluster::NodeSpec;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{LaunchBatch, LaunchOutcome, LaunchRequest, Placement, WorkerReport};
use common::reasons::RejectReason;
use common::{ConstraintSet, GmId, NodeId, TaskSpec};

pub(super) fn spec_with(partitions: &[usize], cores: u64) -> LmSpec {
    let node = NodeSpec {
        capacity: Resources::cores(cores, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    LmSpec {
        id: LmId(0),
        partitions: partitions.iter().map(|n| vec![node; *n]).collect(),
    }
}

pub(super) fn lm_with(partitions: &[usize], cores: u64) -> LocalMaster {
    let spec = spec_with(partitions, cores);
    LocalMaster::new(
        &spec,
        partitions.len() as u16,
        LmConfig::default(),
        Micros(0),
    )
}

pub(super) fn launch(gm: u16, seq: u64, reqs: &[(u64, u32, Placement, u64)]) -> LaunchBatch {
    LaunchBatch {
        gm: GmId(gm),
        life: 0,
        lm: LmId(0),
        seq,
        resend: false,
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
            used: None,
            attempt: 1,
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
                used: None,
                attempt: 1,
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

#[test]
fn a_victim_that_starts_and_finishes_before_its_kill_lands_reports_both() {
    let fairness = common::fairness::FairnessConfig::parse(
        "a:0.5:0,b:0.5:1",
        common::fairness::SharePolicy::Drf,
        2,
    )
    .unwrap()
    // One node: taking a's only task takes it below its protected share.
    .with_rules(common::preemption::PreemptionRules::UNBOUNDED);
    let mut lm = lm_with(&[1, 0], 1).with_fairness(std::sync::Arc::new(fairness));
    let fx = lm
        .handle_launch_batch(Micros(0), launch(0, 1, &[(1, 0, Placement::Internal, 1)]))
        .unwrap();
    assert_eq!(fx.starts.len(), 1);
    // Queue a (0) holds the whole LM; b's task preempts it before its start report.
    let request = common::messages::PreemptRequest {
        gm: GmId(1),
        life: 0,
        lm: LmId(0),
        task: TaskSpec::short(TaskId::new(2, 0), Resources::cores(1, 10), Micros(5))
            .with_queue(QueueId(1)),
        victim: QueueId(0),
        seq: 1,
    };
    let fx = lm.handle_preempt(Micros(1), request).unwrap();
    assert_eq!(fx.kills.len(), 1);
    let victim = TaskId::new(1, 0);
    let started = lm
        .handle_worker_report(
            Micros(2),
            WorkerReport::Started {
                attempt: 1,
                node: NodeId(0),
                task: victim,
                at: Micros(2),
            },
        )
        .unwrap();
    assert!(matches!(
        started.events[..],
        [TaskEvent {
            kind: TaskEventKind::Started { .. },
            ..
        }]
    ));
    let finished = lm
        .handle_worker_report(
            Micros(3),
            WorkerReport::Finished {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: victim,
                at: Micros(3),
            },
        )
        .unwrap();
    assert!(finished.requeues.is_empty(), "the finish stands");
    assert!(matches!(
        finished.events[..],
        [TaskEvent {
            kind: TaskEventKind::Finished { .. },
            ..
        }]
    ));
}

/// `free_changed` names, per block of 64 nodes and then per sub-block of 8, the
/// last version whose snapshot changed it: a launch on node 70 (block 1, sub-block
/// 8) changes those alone; a snapshot of an unchanged state repeats the word; the
/// first snapshot of a life names every block.
#[test]
fn free_changed_names_the_blocks_each_version_changed() {
    let mut lm = lm_with(&[100, 100], 4);
    let first = lm.snapshot(Micros(1));
    let v1 = first.version;
    assert_eq!(
        first.free_changes(),
        Some((&[v1; 4][..], Some(&[v1; 25][..])))
    );
    lm.handle_launch_batch(Micros(2), launch(0, 1, &[(1, 70, Placement::Internal, 1)]))
        .unwrap();
    let second = lm.snapshot(Micros(3));
    let v2 = second.version;
    assert!(v2 > v1);
    let mut subs = [v1; 25];
    subs[8] = v2;
    assert_eq!(
        second.free_changes(),
        Some((&[v1, v2, v1, v1][..], Some(&subs[..])))
    );
    let again = lm.snapshot(Micros(4));
    assert_eq!(again.free_changed, second.free_changed, "nothing changed");
    lm.handle_launch_batch(Micros(5), launch(1, 1, &[(2, 199, Placement::Internal, 1)]))
        .unwrap();
    let third = lm.snapshot(Micros(6));
    subs[24] = third.version;
    assert_eq!(
        third.free_changes(),
        Some((&[v1, v2, v1, third.version][..], Some(&subs[..])))
    );
    // The table itself: a block differs, or the previous snapshot is of another size.
    let one = Resources::cores(1, 1);
    let free = vec![one; 130];
    let mut moved = free.clone();
    moved[64] = Resources::ZERO;
    let before: Vec<u64> = [1, 2, 3].into_iter().chain(1..=17).collect();
    let mut after = before.clone();
    (after[1], after[3 + 8]) = (9, 9);
    assert_eq!(free_changed(Some((&free, &before)), &moved, 9), after);
    assert_eq!(
        free_changed(Some((&free[..129], &before)), &free, 9),
        vec![9; 20]
    );
    assert_eq!(
        free_changed(Some((&free, &[1, 2, 3])), &free, 9),
        vec![9; 20]
    );
    assert_eq!(free_changed(None, &free, 4), vec![4; 20]);
}

/// Snapshots built while earlier ones are still held (messages on their way) go
/// into spare buffers or copies, never into a held one: every snapshot equals the
/// one an LM that holds nothing builds, and a held one never changes.
#[test]
fn snapshots_built_while_earlier_ones_are_held_match_fresh_ones() {
    let (mut held_lm, mut twin) = (lm_with(&[150, 150], 4), lm_with(&[150, 150], 4));
    let mut held: Vec<(LmSnapshot, Vec<Resources>)> = Vec::new();
    let mut seed = 7u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for step in 1..=200u64 {
        for k in 0..=next(3) {
            let node = next(300) as u32;
            let batch = launch(
                0,
                step * 4 + k,
                &[(step * 4 + k, node, Placement::Internal, 1)],
            );
            held_lm
                .handle_launch_batch(Micros(step), batch.clone())
                .unwrap();
            twin.handle_launch_batch(Micros(step), batch).unwrap();
        }
        let (a, b) = (held_lm.snapshot(Micros(step)), twin.snapshot(Micros(step)));
        assert_eq!(
            (&a.free, &a.free_changed),
            (&b.free, &b.free_changed),
            "step {step}"
        );
        // Hold up to six, let go of a random one (often the oldest).
        let copy = a.free.to_vec();
        held.push((a, copy));
        while held.len() > next(7) as usize {
            let i = if next(2) == 0 {
                0
            } else {
                next(held.len() as u64) as usize
            };
            let (snapshot, copy) = held.remove(i);
            assert_eq!(*snapshot.free, copy, "a held snapshot changed");
        }
    }
}

/// A standby GM took over (a newer life of GM 0): the replaced primary's batches
/// are refused without touching anything, and counted; the new life's are applied,
/// numbered from its own life (the old life's answers are not reused).
#[test]
fn a_gm_life_older_than_one_seen_is_refused() {
    let mut lm = lm_with(&[2], 1);
    let of_life = |life: u64, seq: u64, task: u64| LaunchBatch {
        life,
        ..launch(0, seq, &[(task, 0, Placement::Internal, 1)])
    };
    lm.handle_launch_batch(Micros(1), of_life(1_000, 1_001, 1))
        .unwrap();
    let fx = lm
        .handle_launch_batch(Micros(2), of_life(2_000, 1_001, 2))
        .unwrap();
    // Same number as the old life's batch, but another life: validated, not
    // answered with the old life's answer (which was task 1's).
    let r = fx.response.unwrap();
    assert_eq!(r.outcomes[0].0, TaskId::new(2, 0));
    let before = lm.free().to_vec();
    let err = lm
        .handle_launch_batch(Micros(3), of_life(1_000, 1_002, 3))
        .unwrap_err();
    assert_eq!(
        err,
        LmError::OlderGmLife {
            gm: GmId(0),
            life: 1_000,
            newest: 2_000
        }
    );
    let preempt = common::messages::PreemptRequest {
        gm: GmId(0),
        life: 1_000,
        lm: LmId(0),
        task: TaskSpec::short(TaskId::new(4, 0), Resources::cores(1, 10), Micros(5)),
        victim: common::QueueId(0),
        seq: 1,
    };
    assert!(matches!(
        lm.handle_preempt(Micros(4), preempt),
        Err(LmError::OlderGmLife { newest: 2_000, .. })
    ));
    assert_eq!(lm.free(), &before[..]);
    assert_eq!(lm.older_gm_life_refused(), 2);
}
