//! The exact solve of a batch of jobs with utility trees (issue 36, Deliver 3;
//! `GmConfig::soft_ilp_ms`, docs/alsched.md): where the greedy step, one task at a
//! time, spends a node another job needed, the ILP finds the better total.

use common::attributes::Attributes;
use common::utility::{compile, UtilityTree};
use common::{GmId, JobId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{GlobalMaster, GmConfig};
use std::sync::Arc;
use tests::{ClusterBuilder, Harness};

const GPU: u64 = 5;
const SSD: u64 = 6;

fn utility(json: &str) -> Arc<common::utility::Utility> {
    let mut names = Attributes::new();
    names.name_bit("gpu", GPU as usize).expect("test fixture");
    names.name_bit("ssd", SSD as usize).expect("test fixture");
    let tree: UtilityTree = serde_json::from_str(json).expect("test fixture");
    Arc::new(compile(&tree, &names, 1, "utility").expect("test fixture"))
}

/// Two one-core nodes in the GM's partition, a GPU one and an SSD one. Job 1
/// prefers either, job 2 the GPU only. Greedily job 1 takes the GPU (the first
/// node of its set) and job 2 falls back to the SSD node: total utility 1. The
/// batch solve puts job 1 on the SSD node and job 2 on the GPU: 2. Only the
/// designated GM (GM 0) solves: GM 1 of two, given the option, places greedily.
#[test]
fn the_batch_solve_beats_the_greedy_step_where_it_is_suboptimal() {
    // (GMs, the GM placing, the option, each job's slot in its partition (0: the
    // GPU node, 1: the SSD node), the total utility)
    let table = [
        (1, 0, None, [0, 1], 1.0),
        (1, 0, Some(5_000), [1, 0], 2.0),
        (2, 0, Some(5_000), [1, 0], 2.0),
        (2, 1, Some(5_000), [0, 1], 1.0),
    ];
    for (gms, gm, soft_ilp_ms, expected_slots, expected_total) in table {
        let row = format!("GM {gm} of {gms}, option {soft_ilp_ms:?}");
        let cluster = ClusterBuilder::new(gms, 1, 2)
            .node_constraints(0, gm, 0, &[GPU])
            .node_constraints(0, gm, 1, &[SSD])
            .build();
        let mut h = Harness::new(&cluster);
        let g = gm as usize;
        h.gms[g] = GlobalMaster::new(GmConfig {
            soft_ilp_ms,
            ..GmConfig::new(GmId(gm), gms, 1)
        });
        h.heartbeat(Micros(0));
        let trees = [
            r#"{"prefer": {"set": {"or": ["gpu", "ssd"]}}}"#,
            r#"{"prefer": {"set": "gpu"}}"#,
        ];
        for (j, tree) in trees.iter().enumerate() {
            let job = j as u64 + 1;
            h.gms[g].set_utility(JobId(job), utility(tree));
            let task = TaskSpec::short(
                TaskId::new(job, 0),
                Resources::cores(1, 1),
                Micros::from_secs(1),
            );
            h.gms[g].submit(Micros(0), task);
        }
        let out = h.gms[g].schedule(Micros(0));
        let mut nodes = [u32::MAX; 2];
        for r in out.batches.iter().flat_map(|b| &b.requests) {
            nodes[r.task.id.job.0 as usize - 1] = r.node.0;
        }
        // Node ids run partition by partition, two nodes each.
        let expected_nodes = expected_slots.map(|slot| 2 * u32::from(gm) + slot);
        assert_eq!(nodes, expected_nodes, "{row}");
        let total: f64 = [1, 2]
            .iter()
            .map(|&j| h.gms[g].soft().job_utility(JobId(j)).expect("a tree"))
            .sum();
        assert!((total - expected_total).abs() < 1e-9, "{row}: {total}");
        let branch = h.gms[g]
            .soft()
            .choice(TaskId::new(2, 0))
            .and_then(|c| c.branch.clone());
        let want = (expected_total > 1.5).then(|| "utility.prefer".to_owned());
        assert_eq!(branch, want, "{row}: job 2's branch");
        assert_eq!(
            h.gms[g].stats().soft_ilp_solves,
            u64::from(expected_total > 1.5),
            "{row}"
        );
    }
}
