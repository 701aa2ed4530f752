//! Table tests of the GM's match and repartition decisions and of LM validation,
//! over small hand-built clusters.

use common::messages::Placement;
use common::reasons::{PendingReason, RejectReason};
use common::{LmId, Micros, NodeId};
use global_master::core::DecisionOutcome;
use tests::{task, ClusterBuilder, Harness};

fn dispatched(o: &DecisionOutcome) -> Option<(u16, u32, Placement)> {
    match o {
        DecisionOutcome::Dispatched {
            lm,
            node,
            placement,
            ..
        } => Some((lm.0, node.0, *placement)),
        _ => None,
    }
}

#[test]
fn nothing_is_placed_before_every_lm_has_reported() {
    let mut h = Harness::new(&ClusterBuilder::new(1, 2, 2).build());
    h.gms[0].submit(Micros(0), task(1, 1, &[]));
    let snapshot = h.lms[0].snapshot(Micros(0));
    h.gms[0].apply_snapshot(Micros(0), &snapshot);
    assert!(h.gms[0].schedule(Micros(0)).decisions.is_empty());
    h.heartbeat(Micros(1));
    assert_eq!(h.gms[0].schedule(Micros(1)).decisions.len(), 1);
}

#[test]
fn internal_partitions_round_robin_across_lms() {
    // 2 GMs x 3 LMs, 2 nodes per partition. GM 1's internal nodes are 2 and 3 of each LM.
    let mut h = Harness::new(&ClusterBuilder::new(2, 3, 2).build());
    h.heartbeat(Micros(0));
    for job in 0..4 {
        h.gms[1].submit(Micros(0), task(job, 1, &[]));
    }
    let out = h.gms[1].schedule(Micros(0));
    let got: Vec<_> = out
        .decisions
        .iter()
        .map(|d| dispatched(&d.outcome))
        .collect();
    assert_eq!(
        got,
        vec![
            Some((0, 2, Placement::Internal)),
            Some((1, 2, Placement::Internal)),
            Some((2, 2, Placement::Internal)),
            Some((0, 3, Placement::Internal)),
        ]
    );
    // one batch per LM
    assert_eq!(out.batches.len(), 3);
    assert_eq!(out.batches[0].requests.len(), 2);
}

#[test]
fn full_internal_partitions_lead_to_a_repartition() {
    let mut h = Harness::new(&ClusterBuilder::new(2, 1, 1).build());
    h.heartbeat(Micros(0));
    h.gms[0].submit(Micros(0), task(1, 1, &[]));
    h.gms[0].submit(Micros(0), task(2, 1, &[]));
    let out = h.gms[0].schedule(Micros(0));
    let got: Vec<_> = out
        .decisions
        .iter()
        .map(|d| dispatched(&d.outcome))
        .collect();
    assert_eq!(
        got,
        vec![
            Some((0, 0, Placement::Internal)),
            Some((0, 1, Placement::Repartition))
        ]
    );
    // The LM lends exactly the task's resources of node 1 to GM 0's partition.
    let effects = h.deliver(
        Micros(1),
        out.batches.into_iter().next().expect("one batch"),
    );
    assert_eq!(effects.starts.len(), 2);
    let lm = &h.lms[0];
    let alloc = &lm.running()[&task(2, 1, &[]).id];
    assert_eq!(
        (alloc.node, alloc.placement),
        (NodeId(1), Placement::Repartition)
    );
    assert_eq!(lm.free()[1].cpu_millis, 0);
    assert_eq!(h.gms[0].stats().dispatched_repartition, 1);
}

#[test]
fn constraints_select_the_node_even_across_partitions() {
    // Only node 1 of GM 1's partition has constraint 7.
    let cluster = ClusterBuilder::new(2, 1, 3)
        .node_constraints(0, 1, 1, &[7])
        .build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].submit(Micros(0), task(1, 1, &[7]));
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(
        dispatched(&out.decisions[0].outcome),
        Some((0, 4, Placement::Repartition))
    );
}

#[test]
fn unplaceable_tasks_leave_with_the_reason() {
    let mut h = Harness::new(&ClusterBuilder::new(1, 2, 2).capacity(2, 1024).build());
    h.heartbeat(Micros(0));
    h.gms[0].submit(Micros(0), task(1, 1, &[3]));
    h.gms[0].submit(Micros(0), task(2, 3, &[]));
    let out = h.gms[0].schedule(Micros(0));
    let outcomes: Vec<_> = out.decisions.iter().map(|d| d.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        vec![
            DecisionOutcome::Unplaceable(PendingReason::NoNodeWithConstraints),
            DecisionOutcome::Unplaceable(PendingReason::NoNodeLargeEnough),
        ]
    );
    assert!(h.gms[0].queues().is_empty());
}

#[test]
fn busy_cluster_requeues_until_resources_return() {
    let mut h = Harness::new(&ClusterBuilder::new(1, 1, 1).build());
    h.heartbeat(Micros(0));
    h.gms[0].submit(Micros(0), task(1, 1, &[]));
    h.gms[0].submit(Micros(0), task(2, 1, &[]));
    let out = h.gms[0].schedule(Micros(0));
    assert_eq!(
        out.decisions[1].outcome,
        DecisionOutcome::Requeued(PendingReason::NoFreeResources { eligible_nodes: 1 })
    );
    h.deliver(Micros(1), out.batches.into_iter().next().expect("batch"));
    // No new resources in the view: a pass does not even look at the blocked task.
    assert!(h.gms[0].schedule(Micros(2)).decisions.is_empty());
    let pending: Vec<_> = h.gms[0].queues().iter().map(|p| p.reason.clone()).collect();
    assert_eq!(
        pending,
        vec![Some(PendingReason::NoFreeResources { eligible_nodes: 1 })]
    );
    // Task 1 finishes; the next heartbeat shows the node free again.
    h.lms[0]
        .handle_worker_report(
            Micros(3),
            common::messages::WorkerReport::Finished {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: task(1, 1, &[]).id,
                at: Micros(3),
            },
        )
        .expect("task 1 runs");
    h.heartbeat(Micros(4));
    let out = h.gms[0].schedule(Micros(4));
    assert_eq!(
        dispatched(&out.decisions[0].outcome),
        Some((0, 0, Placement::Internal))
    );
}

#[test]
fn stale_views_are_refused_by_the_lm_and_the_task_is_retried() {
    // GM 0 owns node 0, GM 1 owns node 1; one core each.
    let mut h = Harness::new(&ClusterBuilder::new(2, 1, 1).build());
    h.heartbeat(Micros(0));
    // GM 1 fills its own node and then borrows GM 0's node; GM 0 does not know yet.
    h.gms[1].submit(Micros(0), task(10, 1, &[]));
    h.gms[1].submit(Micros(0), task(11, 1, &[]));
    let out = h.gms[1].schedule(Micros(0));
    for b in out.batches {
        h.deliver(Micros(1), b);
    }
    h.gms[0].submit(Micros(2), task(1, 1, &[]));
    let out = h.gms[0].schedule(Micros(2));
    assert_eq!(
        dispatched(&out.decisions[0].outcome),
        Some((0, 0, Placement::Internal))
    );
    let batch = out.batches.into_iter().next().expect("batch");
    let effects = h.deliver(Micros(3), batch);
    assert!(effects.starts.is_empty());
    assert!(effects.events.iter().any(|e| matches!(
        &e.kind,
        common::events::TaskEventKind::Rejected {
            lm: LmId(0),
            reason: RejectReason::InsufficientResources { .. }
        }
    )));
    // The refusal carried the LM's state: GM 0 now knows the cluster is full.
    let pending: Vec<_> = h.gms[0].queues().iter().map(|p| p.reason.clone()).collect();
    assert!(matches!(
        pending.as_slice(),
        [Some(PendingReason::RejectedByLm {
            rejection: RejectReason::InsufficientResources { .. }
        })]
    ));
    let out = h.gms[0].schedule(Micros(4));
    assert!(matches!(
        out.decisions[0].outcome,
        DecisionOutcome::Requeued(_)
    ));
    assert_eq!(h.gms[0].stats().lm_rejections, 1);
}

#[test]
fn launches_are_batched_per_lm_up_to_the_batch_size() {
    let mut h = Harness::new(&ClusterBuilder::new(1, 1, 300).build());
    h.heartbeat(Micros(0));
    for job in 0..250 {
        h.gms[0].submit(Micros(0), task(job, 1, &[]));
    }
    let out = h.gms[0].schedule(Micros(0));
    let sizes: Vec<_> = out
        .batches
        .iter()
        .map(|b| (b.seq, b.requests.len()))
        .collect();
    assert_eq!(sizes, vec![(1, 100), (2, 100), (3, 50)]);
}

#[test]
fn a_launch_resent_to_a_restarted_lm_that_adopted_the_task_is_not_run_twice() {
    use common::messages::HeldTask;
    use local_master::{LmConfig, LocalMaster};
    let cluster = ClusterBuilder::new(1, 1, 2).build();
    let mut h = Harness::new(&cluster);
    h.heartbeat(Micros(0));
    h.gms[0].submit(Micros(0), task(1, 1, &[]));
    let out = h.gms[0].schedule(Micros(0));
    let batch = out.batches.into_iter().next().expect("batch");
    // The LM applies the batch, the worker starts the task, the answer is lost and
    // the LM crashes.
    let lost = h.lms[0]
        .handle_launch_batch(Micros(1), batch.clone())
        .expect("batch");
    let start = lost.starts.into_iter().next().expect("start order");
    assert_eq!(h.gms[0].outstanding(), 1);
    // The LM restarts empty; the worker registers again holding the task.
    h.lms[0] = LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(10));
    let held = HeldTask {
        node: start.node,
        task: start.task,
        started_at: Some(Micros(2)),
    };
    let mut fx = local_master::LmEffects::default();
    assert_eq!(h.lms[0].adopt(Micros(11), held, &mut fx), Ok(true));
    // The GM resends the batch (same sequence number): the new LM already holds the
    // task, so it is launched once, not requeued.
    let effects = h.deliver(Micros(12), batch);
    assert!(effects.starts.is_empty(), "no second start order");
    assert_eq!(h.gms[0].outstanding(), 0);
    assert!(h.gms[0].queues().is_empty());
    assert_eq!(h.gms[0].stats().launched, 1);
    assert_eq!(h.gms[0].stats().duplicates_answered, 1);
    assert_eq!(h.gms[0].stats().lm_rejections, 0);
}

/// A decision list handed back to the GM (`recycle_decisions`) is emptied before the
/// next pass fills it: the passes decide what they decide without it.
#[test]
fn a_recycled_decision_list_carries_nothing_into_the_next_pass() {
    let cluster = ClusterBuilder::new(1, 1, 2).build();
    let (mut plain, mut recycling) = (Harness::new(&cluster), Harness::new(&cluster));
    let mut passes = Vec::new();
    for h in [&mut plain, &mut recycling] {
        h.heartbeat(Micros(0));
        for job in 1..=3 {
            h.gms[0].submit(Micros(0), task(job, 1, &[]));
        }
    }
    for (at, job) in [(1, 4), (2, 5)] {
        let first = plain.gms[0].schedule(Micros(at)).decisions;
        let second = recycling.gms[0].schedule(Micros(at)).decisions;
        assert_eq!(first, second, "pass at {at}");
        assert!(!second.is_empty(), "pass at {at} decided something");
        passes.push(first.len());
        recycling.gms[0].recycle_decisions(second);
        for h in [&mut plain, &mut recycling] {
            h.gms[0].submit(Micros(at), task(job, 1, &[]));
        }
    }
    // Three tasks on two free nodes, then the newcomer alone (the view did not gain).
    assert_eq!(passes, vec![3, 1]);
}
