//! Unit tests of the LM state machine ([`crate::core`]) across a restart: adopted
//! tasks, versions of a new life, finished and failed runs a restarted LM learns of.
use super::tests::{launch, lm_with, spec_with};
use super::*;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{LaunchOutcome, Placement, WorkerReport};
use common::reasons::RejectReason;
use common::TaskSpec;

#[test]
fn adopting_held_tasks_rebuilds_the_state_of_a_restarted_lm() {
    use common::messages::HeldTask;
    let spec = spec_with(&[1, 1], 4);
    let mut lm = LocalMaster::new(&spec, 2, LmConfig::default(), Micros(5_000));
    let before = lm.snapshot(Micros(5_000)).version;
    let task = TaskSpec::short(TaskId::new(1, 0), Resources::new(1000, 100), Micros(5));
    let held = HeldTask {
        node: NodeId(0),
        task: task.clone(),
        started_at: Some(Micros(4_000)),
    };
    let mut fx = LmEffects::default();
    assert_eq!(lm.adopt(Micros(5_000), held.clone(), &mut fx), Ok(true));
    assert_eq!(lm.running().len(), 1);
    // Its start is reported again, at the original time.
    assert!(matches!(
        fx.events.as_slice(),
        [TaskEvent {
            at: Micros(4_000),
            kind: TaskEventKind::Started { .. },
            ..
        }]
    ));
    assert!(fx.starts.is_empty(), "an adopted task is not started again");
    let free = lm.free()[0];
    assert_eq!(
        free,
        Resources::cores(4, 1024).saturating_sub(&task.resources)
    );
    // Adopting the same task again changes nothing.
    assert_eq!(lm.adopt(Micros(5_000), held, &mut fx), Ok(true));
    assert_eq!(lm.free()[0], free);
    assert!(lm.snapshot(Micros(5_001)).version > before);
    // The worker's finish releases it as for any task.
    let fx = lm
        .handle_worker_report(
            Micros(6_000),
            WorkerReport::Finished {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: task.id,
                at: Micros(6_000),
            },
        )
        .expect("known task");
    assert_eq!(fx.events.len(), 1);
    assert!(lm.is_idle());
    // The old LM's batch, resent after the adopted task finished, does not run it
    // again (this LM has no record of the batch itself).
    let fx = lm
        .handle_launch_batch(
            Micros(6_500),
            launch(0, 1, &[(1, 0, Placement::Internal, 1)]),
        )
        .expect("batch");
    assert!(fx.starts.is_empty(), "no second run");
    assert_eq!(
        fx.response.expect("answer").outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::Duplicate)
    );
    // A node this LM does not have is refused.
    let stray = HeldTask {
        node: NodeId(10_000),
        task,
        started_at: None,
    };
    assert!(lm
        .adopt(Micros(7_000), stray, &mut LmEffects::default())
        .is_err());
}

#[test]
fn versions_of_a_restarted_lm_supersede_the_old_ones() {
    let spec = spec_with(&[1, 1], 4);
    let mut old = LocalMaster::new(&spec, 2, LmConfig::default(), Micros(1_000_000));
    for t in 0..50 {
        old.snapshot(Micros(1_000_000 + t));
        old.adopt(
            Micros(1_000_000 + t),
            common::messages::HeldTask {
                node: NodeId(0),
                task: TaskSpec::short(TaskId::new(1, t as u32), Resources::new(1, 1), Micros(5)),
                started_at: None,
            },
            &mut LmEffects::default(),
        )
        .expect("adopt");
    }
    let new = LocalMaster::new(&spec, 2, LmConfig::default(), Micros(2_000_000))
        .snapshot(Micros(2_000_000));
    assert!(new.version > old.snapshot(Micros(1_999_999)).version);
}

#[test]
fn a_task_finished_before_a_restart_is_not_launched_again() {
    let mut lm = lm_with(&[2], 4);
    lm.ended_before_restart(&common::messages::TaskEnd::finished(
        TaskId::new(1, 0),
        1,
        NodeId(0),
        Micros(1),
    ));
    let fx = lm
        .handle_launch_batch(Micros(10), launch(0, 1, &[(1, 0, Placement::Internal, 1)]))
        .expect("batch");
    assert!(fx.starts.is_empty(), "no second run");
    assert_eq!(
        fx.response.expect("answer").outcomes[0].1,
        LaunchOutcome::Rejected(RejectReason::Duplicate)
    );
    assert!(lm.is_idle());
}

/// An adopted task that then fails (found by `loadgen faults --max-task-s 30`: a
/// fenced worker's lost report reached the LM that adopted the run) is not
/// remembered finished: its retry runs, and is not answered `Duplicate`.
#[test]
fn an_adopted_task_that_fails_is_launched_again() {
    use common::messages::{HeldTask, TaskFailure};
    let spec = spec_with(&[1, 1], 4);
    let mut lm = LocalMaster::new(&spec, 2, LmConfig::default(), Micros(5_000));
    let task = TaskSpec::short(TaskId::new(1, 0), Resources::new(1000, 100), Micros(5));
    let held = HeldTask {
        node: NodeId(0),
        task: task.clone(),
        started_at: Some(Micros(4_000)),
    };
    assert_eq!(
        lm.adopt(Micros(5_000), held, &mut LmEffects::default()),
        Ok(true)
    );
    let failure = TaskFailure::Lost {
        reason: "fenced".into(),
    };
    lm.handle_worker_report(
        Micros(6_000),
        WorkerReport::Failed {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: task.id,
            at: Micros(6_000),
            failure,
        },
    )
    .expect("known task");
    let mut retry = launch(0, 1, &[(1, 0, Placement::Internal, 1)]);
    retry.requests[0].task.attempt = 2;
    let fx = lm.handle_launch_batch(Micros(7_000), retry).expect("batch");
    assert_eq!(
        fx.response.expect("answer").outcomes[0].1,
        LaunchOutcome::Launched {
            placement: Placement::Internal
        }
    );
    assert_eq!(fx.starts.len(), 1, "the retry runs");
}

/// Issue 33: a failure a worker lists to a restarted LM is announced once (not on a
/// second registration), never recorded as finished (a retry of the task is not
/// `Duplicate`), and not reported lost when the GM asks about its run: its end
/// went to the GM with its cause. A run the GM asks about that no worker listed is
/// still reported lost.
#[test]
fn a_listed_failure_is_announced_once_and_not_reported_lost() {
    use common::messages::{ReconcileRequest, TaskEnd, TaskFailure};
    let mut lm = lm_with(&[2], 4);
    let (failed, unknown) = (TaskId::new(1, 0), TaskId::new(2, 0));
    let end = TaskEnd {
        failure: Some(TaskFailure::Exit { code: 3 }),
        ..TaskEnd::finished(failed, 2, NodeId(1), Micros(7))
    };
    assert!(lm.ended_before_restart(&end), "unheard: announced");
    assert!(!lm.ended_before_restart(&end), "announced once per life");
    let event = TaskEvent::reannounced(LmId(0), &end);
    assert_eq!(event.at, Micros(7), "at its real end time");
    assert!(event.kind.is_reannounced(), "{event:?}");
    let fx = lm
        .handle_reconcile(
            Micros(20),
            ReconcileRequest {
                gm: GmId(0),
                lm: LmId(0),
                tasks: vec![(failed, 2), (unknown, 1)],
                forget: true,
                life: 0,
                preempts: Vec::new(),
                preempt_seq: 0,
            },
        )
        .expect("reconcile");
    let answer = fx.reconcile_response.expect("answer");
    assert!(
        answer.held.is_empty() && answer.finished.is_empty(),
        "{answer:?}"
    );
    let lost: Vec<TaskId> = fx
        .ended
        .iter()
        .flat_map(|e| e.ends.iter().map(|x| x.task))
        .collect();
    assert_eq!(lost, vec![unknown], "only the unlisted run is lost");
    // A retry of the failed task runs.
    let fx = lm
        .handle_launch_batch(Micros(30), launch(0, 1, &[(1, 0, Placement::Internal, 1)]))
        .expect("batch");
    assert_eq!(fx.starts.len(), 1, "the retry runs");
}
