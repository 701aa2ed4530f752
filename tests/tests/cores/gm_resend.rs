//! A launch batch whose answer was lost is sent again until the LM answers (the
//! service's `call_until_settled_refreshing`). Before each resend the GM keeps only
//! the runs still in doubt (`GlobalMaster::still_in_doubt`): a run whose end came
//! on the LM's stream is left out, since an LM restarted meanwhile no longer knows
//! the batch and would run it again. Found by `loadgen faults` (seed 440: a start
//! refused, its retry finished elsewhere, then the resent batch ran run 1 again at
//! the restarted LM).

use common::cluster::{LmSpec, NodeSpec};
use common::messages::{LaunchBatch, LaunchOutcome, WorkerReport};
use common::protocol::{ClientToGm, GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use global_master::core::{GlobalMaster, GmConfig, GmInput};
use local_master::{LmConfig, LmInput, LocalMaster};

fn lm() -> LocalMaster {
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

/// A GM that sent one batch of two tasks to `lm`, whose answer it never got.
fn batch_in_doubt(lm: &mut LocalMaster) -> (GlobalMaster, LaunchBatch) {
    let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, 1));
    gm.step(
        Micros(0),
        GmInput::Lm(LmToGm::State(lm.snapshot(Micros(0)))),
    );
    let tasks: Vec<TaskSpec> = (0..2)
        .map(|i| TaskSpec::short(TaskId::new(1, i), Resources::cores(1, 10), Micros(5)))
        .collect();
    gm.step(Micros(1), GmInput::Client(ClientToGm::Submit(tasks)));
    let out = gm.step(Micros(2), GmInput::Schedule);
    let batch = match out.to_lms.as_slice() {
        [GmToLm::Launch(b)] => b.clone(),
        other => panic!("one launch batch expected, got {other:?}"),
    };
    assert_eq!(batch.requests.len(), 2);
    (gm, batch)
}

/// The LM's messages to the GM after `input`, the launch answer left out (lost).
fn lm_step(lm: &mut LocalMaster, now: u64, input: LmInput) -> (Vec<LmToGm>, Vec<LmToWorker>) {
    let out = lm.step(Micros(now), input).expect("a valid input");
    let to_gm = out
        .to_gms
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| !matches!(m, LmToGm::LaunchAnswer(_) | LmToGm::State(_)))
        .collect();
    (to_gm, out.to_workers)
}

fn finished(task: TaskId, at: u64) -> LmInput {
    LmInput::Worker(WorkerToLm::Report(WorkerReport::Finished {
        used: None,
        node: NodeId(0),
        task,
        attempt: 1,
        at: Micros(at),
    }))
}

fn tasks_of(batch: &LaunchBatch) -> Vec<TaskId> {
    batch.requests.iter().map(|r| r.task.id).collect()
}

#[test]
fn a_resent_batch_leaves_out_runs_whose_end_came_and_a_restarted_lm_does_not_rerun_them() {
    let mut first = lm();
    let (mut gm, batch) = batch_in_doubt(&mut first);
    let (a, b) = (TaskId::new(1, 0), TaskId::new(1, 1));
    // The LM launched both; its answer was lost. Nothing ended: all in doubt.
    lm_step(&mut first, 3, LmInput::Gm(GmToLm::Launch(batch.clone())));
    assert_eq!(
        gm.still_in_doubt(&batch).map(|r| tasks_of(&r)),
        Some(vec![a, b])
    );

    // Task a finishes; its end reaches the GM on the LM's stream.
    let (ends, _) = lm_step(&mut first, 4, finished(a, 4));
    assert_eq!(ends.len(), 1, "{ends:?}");
    for m in ends {
        gm.step(Micros(5), GmInput::Lm(m));
    }
    let rest = gm.still_in_doubt(&batch).expect("b is still in doubt");
    assert_eq!(tasks_of(&rest), vec![b]);
    assert_eq!(
        (rest.seq, rest.lm, rest.life),
        (batch.seq, batch.lm, batch.life)
    );

    // The same LM answers the shorter repeat from its record, for b only.
    let out = first.step(Micros(6), LmInput::Gm(GmToLm::Launch(rest.clone())));
    let answer = out
        .expect("a repeat")
        .to_gms
        .into_iter()
        .find_map(|(_, m)| match m {
            LmToGm::LaunchAnswer(r) => Some(r),
            _ => None,
        });
    let outcomes: Vec<TaskId> = answer
        .expect("an answer")
        .outcomes
        .iter()
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(outcomes, vec![b]);

    // A restarted LM (its record of the batch gone) launches b only: a does not
    // run twice.
    let mut restarted = lm();
    let (_, orders) = lm_step(&mut restarted, 7, LmInput::Gm(GmToLm::Launch(rest)));
    let started: Vec<TaskId> = orders
        .iter()
        .filter_map(|o| match o {
            LmToWorker::Start(s) => Some(s.task.id),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![b]);

    // Once b's end came too, nothing is left to send. The batch's deductions leave
    // the view: a restarted LM that never saw its number would never name it
    // applied, and they would stay for good (found by `loadgen faults`, seed 2081).
    let (ends, _) = lm_step(&mut first, 8, finished(b, 8));
    for m in ends {
        gm.step(Micros(9), GmInput::Lm(m));
    }
    assert!(gm.still_in_doubt(&batch).is_none());
    // An LM restarted again, that never saw the batch, reports both cores free;
    // the GM's view agrees (before: it deducted the batch's two runs for good).
    let fresh = lm().snapshot(Micros(10));
    gm.step(Micros(10), GmInput::Lm(LmToGm::State(fresh)));
    let free = gm.view(LmId(0)).and_then(|v| v.node_now(0)).map(|(_, r)| r);
    assert_eq!(free, Some(Resources::cores(2, 1024)));
}

#[test]
fn an_answered_batch_is_not_in_doubt() {
    let mut lm = lm();
    let (mut gm, batch) = batch_in_doubt(&mut lm);
    let out = lm
        .step(Micros(3), LmInput::Gm(GmToLm::Launch(batch.clone())))
        .expect("valid");
    for (_, m) in out.to_gms {
        if let LmToGm::LaunchAnswer(r) = &m {
            assert!(r
                .outcomes
                .iter()
                .all(|(_, o)| matches!(o, LaunchOutcome::Launched { .. })));
        }
        gm.step(Micros(4), GmInput::Lm(m));
    }
    assert!(gm.still_in_doubt(&batch).is_none());
}
