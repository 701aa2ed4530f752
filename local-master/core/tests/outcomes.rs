//! A worker's report of how a task ended becomes the event observers see: a clean
//! end `Finished`, a failure `Failed` with its reason; both return the resources.

use common::cluster::{LmSpec, NodeSpec};
use common::events::TaskEventKind;
use common::messages::{LaunchBatch, LaunchRequest, Placement, TaskFailure, WorkerReport};
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use lm_core::{LmConfig, LocalMaster};

/// LM 0 of one GM, with one node (2 cores, 1 GiB).
fn one_node_lm() -> LocalMaster {
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node]],
    };
    LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0))
}

fn launched(task: u64) -> LocalMaster {
    let mut lm = one_node_lm();
    let batch = LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq: 1,
        resend: false,
        requests: vec![LaunchRequest {
            task: TaskSpec::short(TaskId::new(task, 0), Resources::cores(1, 10), Micros(5)),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    };
    lm.handle_launch_batch(Micros(1), batch).expect("launch");
    lm
}

#[test]
fn a_failed_task_is_reported_failed_with_its_reason_and_frees_its_node() {
    let mut lm = launched(1);
    let fx = lm
        .handle_worker_report(
            Micros(9),
            WorkerReport::Failed {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(1, 0),
                at: Micros(9),
                failure: TaskFailure::Exit { code: 3 },
            },
        )
        .expect("a known task");
    let kinds: Vec<&TaskEventKind> = fx.events.iter().map(|e| &e.kind).collect();
    let [TaskEventKind::Failed { detail, .. }] = &kinds[..] else {
        panic!("one Failed event, got {kinds:?}");
    };
    assert!(detail.contains("exited with code 3"), "{detail}");
    assert!(lm.is_idle(), "the node's resources came back");
}

#[test]
fn a_clean_end_is_still_finished() {
    let mut lm = launched(2);
    let fx = lm
        .handle_worker_report(
            Micros(9),
            WorkerReport::Finished {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(2, 0),
                at: Micros(9),
            },
        )
        .expect("a known task");
    assert!(matches!(
        &fx.events[..],
        [e] if matches!(e.kind, TaskEventKind::Finished { .. })
    ));
    assert!(lm.is_idle());
}

/// Through `step`: an end goes to the GM that launched the task, as one
/// `LmToGm::Ended` addressed to it, with the failure if any; a repeated report
/// (the worker resends after a lost answer) is refused and sends nothing.
#[test]
fn an_end_is_reported_to_the_gm_that_launched_the_task() {
    use common::protocol::{GmAddress, LmToGm, WorkerToLm};
    use lm_core::LmInput;
    let mut lm = launched(3);
    let report = WorkerReport::Failed {
        used: None,
        attempt: 1,
        node: NodeId(0),
        task: TaskId::new(3, 0),
        at: Micros(9),
        failure: TaskFailure::Exit { code: 4 },
    };
    let out = lm
        .step(
            Micros(9),
            LmInput::Worker(WorkerToLm::Report(report.clone())),
        )
        .expect("a known task");
    let ended: Vec<_> = out
        .to_gms
        .iter()
        .filter_map(|(to, m)| match m {
            LmToGm::Ended(e) => Some((*to, e)),
            _ => None,
        })
        .collect();
    let [(GmAddress::One(GmId(0)), e)] = &ended[..] else {
        panic!("one Ended message for GM 0, got {:?}", out.to_gms);
    };
    assert_eq!((e.lm, e.gm), (LmId(0), GmId(0)));
    let [end] = &e.ends[..] else {
        panic!("one end, got {:?}", e.ends);
    };
    assert_eq!(end.task, TaskId::new(3, 0));
    assert_eq!(end.failure, Some(TaskFailure::Exit { code: 4 }));
    assert!(lm
        .step(Micros(10), LmInput::Worker(WorkerToLm::Report(report)))
        .is_err());
}

/// A task that finished cleanly is remembered: launching it again (a restarted GM
/// resubmitting its journal) is a `Duplicate`, so it does not run twice. A failed
/// task is not: its GM may retry it.
#[test]
fn a_finished_task_launched_again_is_a_duplicate_and_a_failed_one_may_retry() {
    use common::messages::LaunchOutcome;
    use common::reasons::RejectReason;
    let relaunch = |lm: &mut LocalMaster, task: u64, seq: u64| {
        let batch = LaunchBatch {
            gm: GmId(0),
            life: 0,
            lm: LmId(0),
            seq,
            resend: false,
            requests: vec![LaunchRequest {
                task: TaskSpec::short(TaskId::new(task, 0), Resources::cores(1, 10), Micros(5)),
                node: NodeId(0),
                placement: Placement::Internal,
            }],
        };
        let fx = lm.handle_launch_batch(Micros(30), batch).expect("launch");
        fx.response.expect("answered").outcomes[0].1.clone()
    };
    let mut lm = launched(4);
    lm.handle_worker_report(
        Micros(9),
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(4, 0),
            at: Micros(9),
        },
    )
    .expect("known");
    let before = lm.snapshot(Micros(29)).version;
    assert_eq!(
        relaunch(&mut lm, 4, 2),
        LaunchOutcome::Rejected(RejectReason::Duplicate)
    );
    // The state changed for the GM (the batch is applied: it may stop deducting the
    // task's room), so the version moves and the GM does not discard it as stale.
    assert!(lm.snapshot(Micros(31)).version > before);
    let mut lm = launched(5);
    lm.handle_worker_report(
        Micros(9),
        WorkerReport::Failed {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(5, 0),
            at: Micros(9),
            failure: TaskFailure::Exit { code: 1 },
        },
    )
    .expect("known");
    assert!(matches!(
        relaunch(&mut lm, 5, 2),
        LaunchOutcome::Launched { .. }
    ));
}

/// A restarted GM asks which of its tasks an LM holds or finished: running ones
/// with their node, clean finishes; unknown ones are not mentioned; nothing changes.
#[test]
fn reconcile_names_held_and_finished_tasks() {
    use common::messages::ReconcileRequest;
    use common::protocol::{GmToLm, LmToGm};
    let mut lm = launched(1);
    let batch = LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq: 2,
        resend: false,
        requests: vec![LaunchRequest {
            task: TaskSpec::short(TaskId::new(2, 0), Resources::cores(1, 10), Micros(5)),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    };
    lm.handle_launch_batch(Micros(2), batch).expect("launch");
    lm.handle_worker_report(
        Micros(9),
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(2, 0),
            at: Micros(9),
        },
    )
    .expect("known");
    let before = lm.snapshot(Micros(10)).version;
    let request = GmToLm::Reconcile(ReconcileRequest {
        gm: GmId(0),
        lm: LmId(0),
        tasks: vec![
            (TaskId::new(1, 0), 1),
            (TaskId::new(2, 0), 1),
            (TaskId::new(3, 0), 1),
        ],
        forget: false,
        life: 0,
        preempts: Vec::new(),
        preempt_seq: 0,
    });
    let out = lm
        .step(Micros(11), lm_core::LmInput::Gm(request))
        .expect("for this LM");
    let [(_, LmToGm::ReconcileAnswer(a))] = &out.to_gms[..] else {
        panic!("one answer: {:?}", out.to_gms);
    };
    assert_eq!(a.held, vec![(TaskId::new(1, 0), NodeId(0), 1)]);
    assert_eq!(a.finished, vec![TaskId::new(2, 0)]);
    assert!(out.to_workers.is_empty());
    assert_eq!(lm.snapshot(Micros(12)).version, before);
}

/// A GM that saw this LM restart asks about the tasks it believes run here
/// (`forget`): one this life never heard of ends lost (reported to that GM, which
/// publishes it if it takes it: issue 33), once; a worker registering later still holding that run is told
/// to kill it; a launch of a task remembered finished is answered `Duplicate` and
/// its end goes to the GM (which may never have heard it).
#[test]
fn a_restarted_lms_unknown_tasks_end_lost_when_their_gm_asks() {
    use common::messages::ReconcileRequest;
    use common::protocol::{GmToLm, LmToGm, LmToWorker};
    let mut lm = launched(1);
    let gone = TaskId::new(7, 0);
    let ask = || {
        GmToLm::Reconcile(ReconcileRequest {
            gm: GmId(0),
            lm: LmId(0),
            tasks: vec![(TaskId::new(1, 0), 1), (gone, 2)],
            forget: true,
            life: 0,
            preempts: Vec::new(),
            preempt_seq: 0,
        })
    };
    let out = lm
        .step(Micros(10), lm_core::LmInput::Gm(ask()))
        .expect("for this LM");
    let ended: Vec<_> = out
        .to_gms
        .iter()
        .filter_map(|(_, m)| match m {
            LmToGm::Ended(e) => Some(e.ends.iter().map(|x| (x.clone(), e.publish))),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ended.len(), 1, "{:?}", out.to_gms);
    let (end, publish) = &ended[0];
    assert_eq!((end.task, end.attempt), (gone, 2));
    assert!(matches!(end.failure, Some(TaskFailure::Lost { .. })));
    // Not published here: a verdict that died with this LM would be seen as the
    // task's end while its GM runs it on.
    assert_eq!(*publish, common::messages::EndsPublished::ByGm);
    assert!(out.events.is_empty(), "{:?}", out.events);
    let answer = out.to_gms.iter().find_map(|(_, m)| match m {
        LmToGm::ReconcileAnswer(a) => Some(a.clone()),
        _ => None,
    });
    let answer = answer.expect("answered");
    assert_eq!(answer.held, vec![(TaskId::new(1, 0), NodeId(0), 1)]);
    // Asked again (a lost answer): nothing ends twice.
    let again = lm
        .step(Micros(11), lm_core::LmInput::Gm(ask()))
        .expect("for this LM");
    assert!(again.events.is_empty(), "{:?}", again.events);
    // The worker holding run 2 registers late: killed, not adopted.
    let back = lm
        .step(
            Micros(12),
            lm_core::LmInput::WorkerBack {
                nodes: vec![NodeId(0)],
                holding: vec![(NodeId(0), gone, 2)],
            },
        )
        .expect("known node");
    assert!(
        back.to_workers
            .iter()
            .any(|o| matches!(o, LmToWorker::Kill(k) if k.task == gone && k.attempt == 2)),
        "{:?}",
        back.to_workers
    );
    // A finish this life learned from a worker: a launch of it is a Duplicate
    // whose end reaches the GM.
    let done = TaskId::new(8, 0);
    lm.ended_before_restart(&common::messages::TaskEnd::finished(
        done,
        1,
        NodeId(0),
        Micros(13),
    ));
    let batch = LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq: 9,
        resend: false,
        requests: vec![LaunchRequest {
            task: TaskSpec::short(done, Resources::cores(1, 10), Micros(5)),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    };
    let fx = lm.handle_launch_batch(Micros(14), batch).expect("batch");
    assert!(fx.starts.is_empty(), "not run again");
    let ends: Vec<_> = fx.ended.iter().flat_map(|e| e.ends.clone()).collect();
    assert_eq!(ends.len(), 1);
    assert_eq!((ends[0].task, ends[0].failure.clone()), (done, None));
}

/// A restarted LM adopts a task its worker still runs on behalf of the node's home
/// partition (GM 0): it cannot know that GM 1 launched it there (a borrowed node).
/// GM 1 asks about it (its reconcile after the LM's restart): from then on the
/// task is GM 1's, so its end goes to GM 1, not GM 0.
#[test]
fn an_adopted_task_is_the_asking_gms_and_its_end_goes_there() {
    use common::messages::ReconcileRequest;
    use common::protocol::{GmAddress, GmToLm, LmToGm, WorkerToLm};
    use lm_core::LmInput;
    let mut lm = two_partition_lm();
    let task = TaskSpec::short(TaskId::new(5, 0), Resources::cores(1, 10), Micros(5));
    adopt_running(&mut lm, NodeId(0), &task);
    let ask = GmToLm::Reconcile(ReconcileRequest {
        gm: GmId(1),
        lm: LmId(0),
        tasks: vec![(task.id, 1)],
        forget: true,
        life: 0,
        preempts: Vec::new(),
        preempt_seq: 0,
    });
    let out = lm.step(Micros(2), LmInput::Gm(ask)).expect("for this LM");
    let answer = out.to_gms.iter().find_map(|(_, m)| match m {
        LmToGm::ReconcileAnswer(a) => Some(a.clone()),
        _ => None,
    });
    assert_eq!(
        answer.expect("answered").held,
        vec![(task.id, NodeId(0), 1)]
    );
    let report = WorkerReport::Finished {
        used: None,
        attempt: 1,
        node: NodeId(0),
        task: task.id,
        at: Micros(3),
    };
    let out = lm
        .step(Micros(3), LmInput::Worker(WorkerToLm::Report(report)))
        .expect("a held task");
    let to: Vec<GmAddress> = out
        .to_gms
        .iter()
        .filter(|(_, m)| matches!(m, LmToGm::Ended(_)))
        .map(|(to, _)| *to)
        .collect();
    assert_eq!(to, vec![GmAddress::One(GmId(1))], "{:?}", out.to_gms);
}

/// A restarted LM adopts a task on behalf of the GM its job id names (the services
/// stamp the accepting GM in its top bits), so its start and end go there even
/// before that GM asks (found by `loadgen faults`: ends that came before the
/// owner's reconcile went to the home partition's GM). An id naming no GM of this
/// cluster falls back to the node's home partition.
#[test]
fn an_adopted_task_is_its_job_ids_gms_from_the_start() {
    use common::protocol::{GmAddress, LmToGm, WorkerToLm};
    use common::JobId;
    use lm_core::LmInput;
    let mut lm = two_partition_lm();
    // GM 1's job on node 0 (GM 0's partition); a job id naming GM 7 on node 1.
    let gm1_job = JobId::stamped(1, 5, None).0;
    let unknown_job = JobId::stamped(7, 6, None).0;
    let ours = TaskSpec::short(TaskId::new(gm1_job, 0), Resources::cores(1, 10), Micros(5));
    let stray = TaskSpec::short(
        TaskId::new(unknown_job, 0),
        Resources::cores(1, 10),
        Micros(5),
    );
    adopt_running(&mut lm, NodeId(0), &ours);
    adopt_running(&mut lm, NodeId(1), &stray);
    let ended_to = |lm: &mut LocalMaster, node: NodeId, task: TaskId| -> Vec<GmAddress> {
        let report = WorkerReport::Finished {
            used: None,
            attempt: 1,
            node,
            task,
            at: Micros(3),
        };
        let out = lm
            .step(Micros(3), LmInput::Worker(WorkerToLm::Report(report)))
            .expect("a held task");
        out.to_gms
            .iter()
            .filter(|(_, m)| matches!(m, LmToGm::Ended(_)))
            .map(|(to, _)| *to)
            .collect()
    };
    assert_eq!(
        ended_to(&mut lm, NodeId(0), ours.id),
        vec![GmAddress::One(GmId(1))]
    );
    assert_eq!(
        ended_to(&mut lm, NodeId(1), stray.id),
        vec![GmAddress::One(GmId(1))]
    );
}

/// An LM of two one-node partitions (GM 0's and GM 1's), as a restarted one.
fn two_partition_lm() -> LocalMaster {
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node], vec![node]],
    };
    LocalMaster::new(&spec, 2, LmConfig::default(), Micros(0))
}

/// `lm` adopts `task`, running on `node` since t = 1 µs (its worker registered
/// again holding it).
fn adopt_running(lm: &mut LocalMaster, node: NodeId, task: &TaskSpec) {
    let held = common::messages::HeldTask {
        node,
        task: task.clone(),
        started_at: Some(Micros(1)),
    };
    lm.adopt(Micros(1), held, &mut Default::default())
        .expect("a known node");
}

/// Issue 33, seed 14212: a GM restarted from its journal asks the LMs which of its
/// tasks they hold before it resumes the others. An older life's launch batch still
/// on its way must not start a task the answer said this LM does not hold: the
/// request's life fences the older one before the answer leaves.
#[test]
fn a_reconcile_fences_the_older_life_before_it_answers() {
    use common::messages::ReconcileRequest;
    use common::protocol::{GmToLm, LmToGm};
    use lm_core::LmError;
    let mut lm = one_node_lm();
    let task = TaskId::new(4, 0);
    let ask = |life| {
        GmToLm::Reconcile(ReconcileRequest {
            gm: GmId(0),
            lm: LmId(0),
            tasks: vec![(task, 1)],
            forget: false,
            life,
            preempts: Vec::new(),
            preempt_seq: 0,
        })
    };
    let out = lm
        .step(Micros(1), lm_core::LmInput::Gm(ask(200)))
        .expect("the new life is asked");
    let [(_, LmToGm::ReconcileAnswer(a))] = &out.to_gms[..] else {
        panic!("one answer: {:?}", out.to_gms);
    };
    assert!(a.held.is_empty() && a.finished.is_empty(), "{a:?}");
    // The previous life's batch, sent before the GM restarted, arrives now.
    let late = LaunchBatch {
        gm: GmId(0),
        life: 100,
        lm: LmId(0),
        seq: 101,
        resend: false,
        requests: vec![LaunchRequest {
            task: TaskSpec::short(task, Resources::cores(1, 10), Micros(5)),
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    };
    let refused = lm.handle_launch_batch(Micros(2), late).unwrap_err();
    assert!(
        matches!(
            refused,
            LmError::OlderGmLife {
                life: 100,
                newest: 200,
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(lm.is_idle(), "nothing started");
    assert_eq!(lm.older_gm_life_refused(), 1);
    // An older life's own reconcile is refused the same way (it was replaced).
    assert!(lm.step(Micros(3), lm_core::LmInput::Gm(ask(100))).is_err());
}
