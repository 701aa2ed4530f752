//! The GM core's `abandon_batch`: a batch that never reached its LM puts its tasks
//! back in the queue with the reason and returns the resources to the view, so the
//! next pass can place them again.

use common::cluster::{LmSpec, NodeSpec};
use common::reasons::PendingReason;
use common::{ConstraintSet, GmId, LmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use local_master::{LmConfig, LocalMaster};

#[test]
fn abandoned_batch_requeues_and_restores_the_view() {
    let node = NodeSpec {
        capacity: Resources::cores(1, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node]],
    };
    let mut lm = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0));
    let mut gm = GlobalMaster::new(GmConfig {
        batch_size: 10,
        ..GmConfig::new(GmId(0), 1, 1)
    });
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    let task = TaskSpec::short(TaskId::new(1, 0), Resources::cores(1, 10), Micros(5));
    gm.submit(Micros(1), task);
    let out = gm.schedule(Micros(2));
    assert_eq!(out.batches.len(), 1);
    let batch = &out.batches[0];
    assert_eq!(gm.outstanding(), 1);

    let requeued = gm.abandon_batch(Micros(3), LmId(0), batch.seq, &[TaskId::new(1, 0)]);
    assert_eq!(requeued, 1);
    assert_eq!(gm.outstanding(), 0);
    let pending: Vec<_> = gm.queues().iter().collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].reason,
        Some(PendingReason::LmUnreachable { lm: LmId(0) })
    );

    // The only node is free again in the view: the task is dispatched once more.
    let again = gm.schedule(Micros(4));
    assert!(matches!(
        again.decisions[0].outcome,
        DecisionOutcome::Dispatched { .. }
    ));
    // Abandoning an unknown batch changes nothing.
    assert_eq!(
        gm.abandon_batch(Micros(5), LmId(0), 99, &[TaskId::new(7, 0)]),
        0
    );
    let _ = lm.tick(Micros(6));
}

/// Through `step`: the output names the tasks that went back to their queue and why
/// (the service marks exactly those pending); a second notice for the same batch
/// names none.
#[test]
fn an_undelivered_batch_lists_the_tasks_it_requeued() {
    use common::protocol::{ClientToGm, GmToLm, LmToGm};
    use global_master::core::{GmInput, Undelivered};
    let node = NodeSpec {
        capacity: Resources::cores(2, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node]],
    };
    let mut lm = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0));
    let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, 1));
    gm.step(
        Micros(0),
        GmInput::Lm(LmToGm::State(lm.snapshot(Micros(0)))),
    );
    let tasks: Vec<TaskSpec> = (0..2)
        .map(|j| TaskSpec::short(TaskId::new(1, j), Resources::cores(1, 10), Micros(5)))
        .collect();
    gm.step(Micros(1), GmInput::Client(ClientToGm::Submit(tasks)));
    let out = gm.step(Micros(2), GmInput::Schedule);
    let [message @ GmToLm::Launch(_)] = &out.to_lms[..] else {
        panic!("one launch batch, got {:?}", out.to_lms);
    };
    let notice = Undelivered::of(message);
    let back = gm.step(Micros(3), GmInput::Undelivered(notice.clone()));
    let reason = PendingReason::LmUnreachable { lm: LmId(0) };
    assert_eq!(
        back.requeued,
        vec![
            (TaskId::new(1, 0), reason.clone()),
            (TaskId::new(1, 1), reason)
        ]
    );
    assert_eq!(back.affected, 2);
    let again = gm.step(Micros(4), GmInput::Undelivered(notice));
    assert!(again.requeued.is_empty() && again.affected == 0);
}
