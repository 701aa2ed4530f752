//! The LM's memory of finished tasks names the run (issue 37): a finish stands for
//! that run and earlier ones, never for a later one. A gang restarted whole runs
//! its members again as their next run; a restarted LM whose worker lists a void
//! run's finish (its memory of void runs died with its previous life) must not
//! answer the next run finished, nor refuse it as a duplicate.

use common::gang::ANY_GENERATION;
use common::messages::{
    GangOp, GangOutcome, GangRequest, LaunchOutcome, LaunchRequest, Placement, ReconcileRequest,
    TaskEnd,
};
use common::protocol::{GmToLm, LmToGm, LmToWorker};
use common::reasons::RejectReason;
use common::{GmId, JobId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use lm_core::{LmInput, LocalMaster};

mod support;

/// The answer `pick` finds among an LM's messages to its GMs.
fn answered<T>(out: &lm_core::LmOutput, pick: impl Fn(&LmToGm) -> Option<T>) -> T {
    (out.to_gms.iter())
        .find_map(|(_, m)| pick(m))
        .expect("answered")
}

/// The tasks GM 0 asks about (with the run it asks about) that the LM answers
/// finished.
fn reconciled_finished(lm: &mut LocalMaster, tasks: Vec<(TaskId, u32)>) -> Vec<TaskId> {
    let request = GmToLm::Reconcile(ReconcileRequest {
        gm: GmId(0),
        lm: LmId(0),
        tasks,
        forget: false,
        life: 0,
        preempts: Vec::new(),
        preempt_seq: 0,
    });
    let out = lm
        .step(Micros(5), LmInput::Gm(request))
        .expect("for this LM");
    answered(&out, |m| match m {
        LmToGm::ReconcileAnswer(a) => Some(a.finished.clone()),
        _ => None,
    })
}

#[test]
fn a_finish_stands_for_its_run_and_earlier_ones_never_for_a_later_one() {
    let mut lm = support::lm(&[2], 1);
    let task = TaskId::new(5, 0);
    // A restarted LM's worker lists run 1 as finished (a run its gang voided).
    let end = TaskEnd::finished(task, 1, NodeId(0), Micros(1));
    assert!(lm.ended_before_restart(&end), "announced once");
    assert!(!lm.ended_before_restart(&end), "not twice");
    assert_eq!(
        reconciled_finished(&mut lm, vec![(task, 1)]),
        vec![task],
        "run 1 asked about: finished"
    );
    assert!(
        reconciled_finished(&mut lm, vec![(task, 2)]).is_empty(),
        "run 2 asked about: not finished (run 1's finish is not run 2's)"
    );
    assert_eq!(
        support::launch_run(&mut lm, 0, 1, 5, 0, 1),
        LaunchOutcome::Rejected(RejectReason::Duplicate),
        "run 1 again: a duplicate"
    );
    assert!(
        matches!(
            support::launch_run(&mut lm, 0, 2, 5, 0, 2),
            LaunchOutcome::Launched { .. }
        ),
        "run 2 launches"
    );
    // A journal resume may name an earlier run than the one that finished.
    let later = TaskId::new(6, 0);
    lm.ended_before_restart(&TaskEnd::finished(later, 3, NodeId(1), Micros(6)));
    assert_eq!(reconciled_finished(&mut lm, vec![(later, 2)]), vec![later]);
}

/// A finish a worker reports to an LM that does not hold the run (it restarted
/// since): remembered with its run.
#[test]
fn an_unowned_finish_is_remembered_with_its_run() {
    let mut lm = support::lm(&[1], 1);
    let task = TaskId::new(7, 0);
    let report = common::messages::WorkerReport::Finished {
        node: NodeId(0),
        task,
        attempt: 1,
        at: Micros(2),
        used: None,
    };
    let out = lm
        .step(
            Micros(2),
            LmInput::Worker(common::protocol::WorkerToLm::Report(report)),
        )
        .expect("for this LM");
    assert_eq!(out.unowned_finished, vec![task]);
    assert_eq!(reconciled_finished(&mut lm, vec![(task, 1)]), vec![task]);
    assert!(reconciled_finished(&mut lm, vec![(task, 2)]).is_empty());
}

/// One gang request of GM 0's life `life`: its outcome and the runs it killed
/// (each kill then confirmed by its worker).
fn gang_step(
    lm: &mut LocalMaster,
    now: Micros,
    (life, generation): (u64, u32),
    op: GangOp,
) -> (GangOutcome, Vec<u32>) {
    let request = GmToLm::Gang(GangRequest {
        gm: GmId(0),
        life,
        lm: LmId(0),
        job: JobId(1),
        generation,
        op,
    });
    let out = lm.step(now, LmInput::Gm(request)).expect("for this LM");
    let outcome = answered(&out, |m| match m {
        LmToGm::GangAnswer(a) => Some(a.outcome.clone()),
        _ => None,
    });
    let kills: Vec<_> = (out.to_workers.iter())
        .filter_map(|o| match o {
            LmToWorker::Kill(k) => Some((k.task, k.attempt)),
            _ => None,
        })
        .collect();
    for &(task, attempt) in &kills {
        let report = common::messages::WorkerReport::Killed {
            node: NodeId(task.index),
            task,
            attempt,
            at: now,
        };
        let report = LmInput::Worker(common::protocol::WorkerToLm::Report(report));
        lm.step(now, report).expect("for this LM");
    }
    (outcome, kills.into_iter().map(|k| k.1).collect())
}

/// The runs a gang request killed.
fn gang(lm: &mut LocalMaster, now: Micros, life: u64, generation: u32, op: GangOp) -> Vec<u32> {
    gang_step(lm, now, (life, generation), op).1
}

/// A gang request's outcome.
fn outcome(lm: &mut LocalMaster, life: u64, generation: u32, op: GangOp) -> GangOutcome {
    gang_step(lm, Micros(3), (life, generation), op).0
}

fn part(attempt: u32) -> Vec<LaunchRequest> {
    (0..2)
        .map(|i| {
            let mut task = TaskSpec::short(TaskId::new(1, i), Resources::cores(1, 10), Micros(5));
            task.attempt = attempt;
            LaunchRequest {
                task,
                node: NodeId(i),
                placement: Placement::Internal,
            }
        })
        .collect()
}

/// A GM restarted after a partial commit stops the gang with
/// [`ANY_GENERATION`]: what its earlier life committed is killed, a part that
/// life still holds is given back, and a copy of the stop arriving after this
/// life committed its own generation kills nothing.
#[test]
fn a_restarted_gms_stop_ends_an_earlier_lifes_commit_never_its_own() {
    let hold_for = Micros(30_000_000);
    let mut lm = support::lm(&[2], 1);
    let reserve = |attempt| GangOp::Reserve {
        requests: part(attempt),
        hold_for,
    };
    // Life 1 committed generation 3 here.
    assert_eq!(outcome(&mut lm, 1, 3, reserve(1)), GangOutcome::Held);
    assert_eq!(
        outcome(&mut lm, 1, 3, GangOp::Commit),
        GangOutcome::Committed
    );
    assert_eq!(lm.running().len(), 2);
    // Life 2 stops it: both members killed, their runs before 2 void.
    let members = vec![(TaskId::new(1, 0), 2), (TaskId::new(1, 1), 2)];
    let stop = GangOp::Stop {
        members: members.clone(),
    };
    let kills = gang(&mut lm, Micros(4), 2, ANY_GENERATION, stop.clone());
    assert_eq!(kills, vec![1, 1], "the earlier life's runs are killed");
    // Life 2's generations start over: generation 3 is not stale here.
    assert_eq!(outcome(&mut lm, 2, 3, reserve(2)), GangOutcome::Held);
    assert_eq!(lm.gang_hold(GmId(0), JobId(1)).map(|h| h.0), Some(3));
    // A copy of the stop given back the hold of life 2 (safe: its commit then
    // finds nothing and the gang is restarted whole) ...
    gang(&mut lm, Micros(5), 2, ANY_GENERATION, stop.clone());
    assert_eq!(lm.gang_holds(), 0);
    assert_eq!(outcome(&mut lm, 2, 4, reserve(2)), GangOutcome::Held);
    assert_eq!(
        outcome(&mut lm, 2, 4, GangOp::Commit),
        GangOutcome::Committed
    );
    // ... but never kills what life 2 committed.
    let kills = gang(&mut lm, Micros(6), 2, ANY_GENERATION, stop);
    assert!(kills.is_empty(), "life 2's own commit runs on: {kills:?}");
    assert!(lm.running().values().all(|a| a.task.attempt == 2));
    assert_eq!(lm.running().len(), 2);
}

/// A gang's stop names its own job's tasks as members: one naming a task of
/// another job (which would void that job's runs, perhaps another GM's) is
/// refused whole, before its life is admitted, and nothing is applied.
#[test]
fn a_gang_stop_naming_another_jobs_task_is_refused_with_nothing_applied() {
    let mut lm = support::lm(&[2], 1);
    let reserve = GangOp::Reserve {
        requests: part(1),
        hold_for: Micros(30_000_000),
    };
    assert_eq!(outcome(&mut lm, 1, 3, reserve), GangOutcome::Held);
    assert_eq!(
        outcome(&mut lm, 1, 3, GangOp::Commit),
        GangOutcome::Committed
    );
    let foreign = TaskId::new(2, 0);
    for generation in [3, ANY_GENERATION] {
        let stop = GmToLm::Gang(GangRequest {
            gm: GmId(0),
            life: 9,
            lm: LmId(0),
            job: JobId(1),
            generation,
            op: GangOp::Stop {
                members: vec![(TaskId::new(1, 0), 2), (foreign, 5)],
            },
        });
        let refused = lm.step(Micros(4), LmInput::Gm(stop)).unwrap_err();
        assert_eq!(
            refused,
            lm_core::LmError::ForeignGangMember {
                job: JobId(1),
                task: foreign
            }
        );
        assert_eq!(lm.running().len(), 2, "nothing killed");
    }
    // Life 9 was not admitted: life 1's requests still are.
    assert_eq!(
        outcome(&mut lm, 1, 3, GangOp::Release),
        GangOutcome::Released
    );
    // The gang's own stop still works.
    let stop = GangOp::Stop {
        members: vec![(TaskId::new(1, 0), 2), (TaskId::new(1, 1), 2)],
    };
    assert_eq!(
        gang(&mut lm, Micros(5), 2, ANY_GENERATION, stop),
        vec![1, 1]
    );
}

/// The same generation reserved again by a later GM life (which numbers its
/// generations anew) with other requests is a new hold, not the earlier life's.
#[test]
fn a_reserve_of_the_same_generation_with_other_runs_replaces_the_hold() {
    let mut lm = support::lm(&[2], 1);
    let reserve = |attempt| GangOp::Reserve {
        requests: part(attempt),
        hold_for: Micros(30_000_000),
    };
    assert_eq!(outcome(&mut lm, 1, 1, reserve(1)), GangOutcome::Held);
    assert_eq!(outcome(&mut lm, 2, 1, reserve(2)), GangOutcome::Held);
    assert_eq!(
        outcome(&mut lm, 2, 1, GangOp::Commit),
        GangOutcome::Committed
    );
    let runs: Vec<u32> = lm.running().values().map(|a| a.task.attempt).collect();
    assert_eq!(runs, vec![2, 2], "the later life's runs launch");
}
