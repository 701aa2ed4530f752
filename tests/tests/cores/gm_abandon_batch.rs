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
