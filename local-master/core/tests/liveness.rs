//! A worker that stops answering: its tasks end `Lost` at the GMs that launched them,
//! its nodes are down (no free resources offered, launches refused), late reports of
//! the lost tasks change nothing, and when the worker is back its nodes are offered
//! again and the lost tasks it still holds are killed.

use common::events::{TaskEvent, TaskEventKind};
use common::messages::{CancelRequest, LaunchOutcome, TaskFailure, WorkerReport};
use common::protocol::{GmAddress, GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::reasons::RejectReason;
use common::{GmId, JobId, LmId, Micros, NodeId, Resources, TaskId};
use lm_core::{LmInput, LocalMaster};

mod support;
use support::launch_run;

/// Two GMs; two nodes of 2 cores each, node 0 in GM 0's partition, node 1 in GM 1's.
fn lm() -> LocalMaster {
    support::lm(&[1, 1], 2)
}

fn launch(lm: &mut LocalMaster, gm: u16, seq: u64, task: u64, node: u32) -> LaunchOutcome {
    launch_run(lm, gm, seq, task, node, 1)
}

/// The worker of node 0 is declared lost (at 10 µs), for `reason`.
fn lose_node0(lm: &mut LocalMaster, reason: &str) -> lm_core::LmOutput {
    let input = LmInput::WorkerLost {
        nodes: vec![NodeId(0)],
        reason: reason.into(),
    };
    lm.step(Micros(10), input).expect("a node of this LM")
}

fn report(lm: &mut LocalMaster, r: WorkerReport) -> lm_core::LmOutput {
    lm.step(Micros(20), LmInput::Worker(WorkerToLm::Report(r)))
        .expect("absorbed")
}

#[test]
fn a_lost_worker_ends_its_tasks_lost_at_their_gms_and_its_nodes_go_down() {
    let mut lm = lm();
    assert!(matches!(
        launch(&mut lm, 0, 1, 1, 0),
        LaunchOutcome::Launched { .. }
    ));
    assert!(matches!(
        launch(&mut lm, 1, 1, 2, 1),
        LaunchOutcome::Launched { .. }
    ));
    let out = lm
        .step(
            Micros(10),
            LmInput::WorkerLost {
                nodes: vec![NodeId(0)],
                reason: "no answer for 10 s".into(),
            },
        )
        .unwrap();
    // Exactly task 1, to GM 0, lost with the reason; task 2 (node 1) is untouched.
    let ends: Vec<_> = out
        .to_gms
        .iter()
        .filter_map(|(to, m)| match m {
            LmToGm::Ended(e) => Some((*to, e.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0].0, GmAddress::One(GmId(0)));
    let end = &ends[0].1.ends[..];
    assert_eq!(end.len(), 1);
    assert_eq!(end[0].task, TaskId::new(1, 0));
    assert!(
        matches!(&end[0].failure, Some(TaskFailure::Lost { reason }) if reason.contains("no answer for 10 s")),
        "{:?}",
        end[0].failure
    );
    assert!(lm.running().contains_key(&TaskId::new(2, 0)));
    assert!(!lm.running().contains_key(&TaskId::new(1, 0)));
    assert!(lm.is_down(NodeId(0)) && !lm.is_down(NodeId(1)));
    // The GMs see nothing free on the down node.
    let snapshot = lm.snapshot(Micros(11));
    assert_eq!(snapshot.free[0], Resources::ZERO);
    assert_eq!(snapshot.free[1], Resources::cores(1, 1014));
    // A launch there is refused, saying why.
    assert_eq!(
        launch(&mut lm, 0, 2, 3, 0),
        LaunchOutcome::Rejected(RejectReason::NodeDown)
    );
    // Declared lost twice: nothing more is reported.
    let again = lose_node0(&mut lm, "again");
    assert!(again.to_gms.is_empty() && again.events.is_empty());
}

#[test]
fn late_reports_of_a_lost_task_change_nothing_and_a_start_is_answered_with_a_kill() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    lose_node0(&mut lm, "silent");
    let started = report(
        &mut lm,
        WorkerReport::Started {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
            at: Micros(15),
        },
    );
    assert!(matches!(
        &started.to_workers[..],
        [LmToWorker::Kill(k)] if k.task == TaskId::new(1, 0) && k.node == NodeId(0)
    ));
    assert!(started.to_gms.is_empty() && started.events.is_empty());
    let finished = report(
        &mut lm,
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
            at: Micros(16),
        },
    );
    assert!(
        finished.to_gms.is_empty() && finished.events.is_empty() && finished.to_workers.is_empty()
    );
    // Absorbed once; a second copy is an ordinary unknown report.
    assert!(lm
        .step(
            Micros(21),
            LmInput::Worker(WorkerToLm::Report(WorkerReport::Finished {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(1, 0),
                at: Micros(16),
            }))
        )
        .is_err());
}

#[test]
fn a_worker_back_gets_its_nodes_offered_again_and_its_lost_tasks_killed() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    lose_node0(&mut lm, "silent");
    let out = lm
        .step(
            Micros(30),
            LmInput::WorkerBack {
                nodes: vec![NodeId(0)],
                holding: vec![
                    (NodeId(0), TaskId::new(1, 0), 1),
                    (NodeId(0), TaskId::new(9, 0), 1),
                ],
            },
        )
        .unwrap();
    // The lost task is killed; the unknown one is left for adoption.
    assert!(matches!(
        &out.to_workers[..],
        [LmToWorker::Kill(k)] if k.task == TaskId::new(1, 0)
    ));
    assert!(!lm.is_down(NodeId(0)));
    assert_eq!(lm.snapshot(Micros(31)).free[0], Resources::cores(2, 1024));
    assert!(matches!(
        launch(&mut lm, 0, 2, 3, 0),
        LaunchOutcome::Launched { .. }
    ));
    assert!(lm
        .step(
            Micros(32),
            LmInput::WorkerBack {
                nodes: vec![NodeId(7)],
                holding: vec![]
            }
        )
        .is_err());
}

/// Found by `loadgen faults` (seed 359): a worker back from a partition listed the
/// lost run as finished, and the GM's retry was answered `Duplicate` forever.
#[test]
fn a_lost_run_listed_finished_does_not_make_the_retry_a_duplicate() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    lose_node0(&mut lm, "silent");
    // Its end arrives late (absorbed), then the worker lists it finished.
    report(
        &mut lm,
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
            at: Micros(12),
        },
    );
    lm.ended_before_restart(&common::messages::TaskEnd::finished(
        TaskId::new(1, 0),
        1,
        NodeId(0),
        Micros(12),
    ));
    lm.step(
        Micros(20),
        LmInput::WorkerBack {
            nodes: vec![NodeId(0)],
            holding: vec![],
        },
    )
    .unwrap();
    assert!(matches!(
        launch(&mut lm, 0, 2, 1, 0),
        LaunchOutcome::Launched { .. }
    ));
}

/// A cancelled task's kill was on its way to a worker that is then lost: the LM
/// stops waiting for the confirmation (the task ends `cancelled` in the event stream,
/// not `lost` at its GM, which counts it cancelled already), and kills it should the
/// worker come back still holding it.
#[test]
fn a_lost_worker_drops_the_cancel_kills_it_owed() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    let cancel = GmToLm::Cancel(CancelRequest {
        gm: GmId(0),
        lm: LmId(0),
        job: JobId(1),
    });
    let out = lm.step(Micros(5), LmInput::Gm(cancel)).unwrap();
    assert!(matches!(
        &out.to_workers[..],
        [LmToWorker::Kill(k)] if k.task == TaskId::new(1, 0)
    ));
    assert!(lm.is_cancelling(TaskId::new(1, 0)));

    let lost = lose_node0(&mut lm, "silent");
    assert!(!lm.is_cancelling(TaskId::new(1, 0)), "kill still awaited");
    assert!(lost.to_gms.is_empty(), "{:?}", lost.to_gms);
    assert!(
        matches!(
            &lost.events[..],
            [TaskEvent { task, kind: TaskEventKind::Cancelled { gm: GmId(0) }, .. }] if *task == TaskId::new(1, 0)
        ),
        "{:?}",
        lost.events
    );

    let back = lm
        .step(
            Micros(30),
            LmInput::WorkerBack {
                nodes: vec![NodeId(0)],
                holding: vec![(NodeId(0), TaskId::new(1, 0), 1)],
            },
        )
        .unwrap();
    assert!(matches!(
        &back.to_workers[..],
        [LmToWorker::Kill(k)] if k.task == TaskId::new(1, 0)
    ));
}

/// Found by `loadgen faults` (seed 11, `retry_killed_as_lost`): a retry launched on
/// the node of its lost run was taken for that run (its start answered with a kill,
/// its end absorbed), and nothing ever ended it. Every report names its run now.
#[test]
fn a_retry_on_the_node_of_its_lost_run_is_not_taken_for_that_run() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    lose_node0(&mut lm, "silent");
    let back = LmInput::WorkerBack {
        nodes: vec![NodeId(0)],
        holding: vec![],
    };
    lm.step(Micros(15), back).unwrap();
    assert!(matches!(
        launch_run(&mut lm, 0, 2, 1, 0, 2),
        LaunchOutcome::Launched { .. }
    ));
    let run = |attempt, finished| {
        let (node, task, at) = (NodeId(0), TaskId::new(1, 0), Micros(16));
        match finished {
            false => WorkerReport::Started {
                node,
                task,
                attempt,
                at,
            },
            true => WorkerReport::Finished {
                used: None,
                node,
                task,
                attempt,
                at,
            },
        }
    };
    // The retry starts: its GM hears it, nothing is killed.
    let out = report(&mut lm, run(2, false));
    assert!(out.to_workers.is_empty(), "{:?}", out.to_workers);
    assert!(out
        .to_gms
        .iter()
        .any(|(_, m)| matches!(m, LmToGm::Started(s) if s.starts[0].attempt == 2)));
    // The lost run's late start is answered with a kill of that run only.
    let out = report(&mut lm, run(1, false));
    assert!(matches!(
        &out.to_workers[..],
        [LmToWorker::Kill(k)] if k.attempt == 1
    ));
    // Its late end is absorbed: the retry still runs.
    let out = report(&mut lm, run(1, true));
    assert!(out.to_gms.is_empty(), "{:?}", out.to_gms);
    assert!(lm.running().contains_key(&TaskId::new(1, 0)));
    // The retry's end reaches its GM, naming the retry.
    let out = report(&mut lm, run(2, true));
    let ends: Vec<_> = out
        .to_gms
        .iter()
        .filter_map(|(_, m)| match m {
            LmToGm::Ended(e) => Some(e.ends.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!((ends[0].attempt, ends[0].failure.clone()), (2, None));
    assert!(!lm.running().contains_key(&TaskId::new(1, 0)));
}

/// A worker back from a partition holding the lost run and (after the GM's retry
/// landed on the same node) the retry: only the lost run is killed.
#[test]
fn a_worker_back_holding_a_lost_run_and_its_retry_has_only_the_lost_run_killed() {
    let mut lm = lm();
    launch(&mut lm, 0, 1, 1, 0);
    lose_node0(&mut lm, "silent");
    let back = LmInput::WorkerBack {
        nodes: vec![NodeId(0)],
        holding: vec![(NodeId(0), TaskId::new(1, 0), 1)],
    };
    let out = lm.step(Micros(15), back).unwrap();
    assert!(matches!(&out.to_workers[..], [LmToWorker::Kill(k)] if k.attempt == 1));
    launch_run(&mut lm, 0, 2, 1, 0, 2);
    let back = LmInput::WorkerBack {
        nodes: vec![NodeId(0)],
        holding: vec![(NodeId(0), TaskId::new(1, 0), 2)],
    };
    let out = lm.step(Micros(16), back).unwrap();
    assert!(out.to_workers.is_empty(), "{:?}", out.to_workers);
}
