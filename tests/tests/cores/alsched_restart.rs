//! alsched soft constraints across a GM restart (issue 36): the tasks an LM still
//! holds count in their job's utility again at the restarted GM.

use super::alsched::{nodes, tasks, utility, GPU};
use common::{Micros, TaskId};
use tests::{ClusterBuilder, Harness};

/// A restarted GM counts the tasks an LM still holds in their job's utility again
/// ([`GlobalMaster::resumed_running`], from the LM's reconcile answer): a job of 2
/// under `nCk(gpu, 2)` whose first task runs on a GPU node when its GM restarts
/// places its second on the other GPU node (the set needs 1 more, and has room for
/// 1); counted from zero, it would need 2, see room for 1, and run off the GPUs.
#[test]
fn a_restarted_gm_counts_the_running_tasks_of_a_job_with_a_tree() {
    use global_master::core::{GlobalMaster, GmConfig};
    let cluster = ClusterBuilder::new(1, 1, 4)
        .node_constraints(0, 0, 2, &[GPU])
        .node_constraints(0, 0, 3, &[GPU])
        .build();
    let tree = r#"{"nCk": {"set": "gpu", "k": 2, "u": 1}}"#;
    let second = |counted: bool| {
        let mut h = Harness::new(&cluster);
        h.heartbeat(Micros(0));
        h.gms[0].set_utility(common::JobId(1), utility(tree, 2));
        h.gms[0].submit(Micros(0), tasks(1, 2).remove(0));
        let batch = h.gms[0].schedule(Micros(0)).batches.remove(0);
        let (lm, node) = (batch.lm, batch.requests[0].node);
        assert!(node.0 >= 2, "the first task on a GPU node: {node:?}");
        assert_eq!(h.deliver(Micros(1), batch).starts.len(), 1);
        // The GM restarts: a new life, the LM's state, the tree back from the spec.
        h.gms[0] = GlobalMaster::new(GmConfig::new(common::GmId(0), 1, 1));
        h.heartbeat(Micros(2));
        h.gms[0].set_utility(common::JobId(1), utility(tree, 2));
        if counted {
            assert!(h.gms[0].resumed_running(TaskId::new(1, 0), lm, node));
            assert_eq!(h.gms[0].soft().job_utility(common::JobId(1)), Some(0.0));
        }
        h.gms[0].submit(Micros(2), tasks(1, 2).remove(1));
        let out = h.gms[0].schedule(Micros(2));
        let choice = h.gms[0].soft().choice(TaskId::new(1, 1)).cloned();
        (nodes(&out), choice.expect("a choice"), node.0)
    };
    let (placed, choice, first) = second(true);
    assert_eq!(placed, vec![Some(5 - first)], "the other GPU node");
    assert_eq!(choice.branch.as_deref(), Some("utility.nCk"), "{choice:?}");
    assert!((choice.utility - 1.0).abs() < 1e-9, "{choice:?}");
    let (placed, choice, _) = second(false);
    assert!(placed[0].is_some_and(|n| n < 2), "off the GPUs: {placed:?}");
    assert_eq!(choice.branch, None, "{choice:?}");
}
