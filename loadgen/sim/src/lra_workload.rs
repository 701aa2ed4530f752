//! Synthetic LRA workloads after MEDEA section 7.1: HBase-like applications on a
//! cluster of 8-core / 16 GiB nodes in racks.
//!
//! Each HBase LRA has a master, a Thrift server, a secondary and ten workers, with
//! - intra-application rack affinity between its workers;
//! - node affinity between its master and its Thrift server;
//! - node anti-affinity between its master and its secondary;
//! - at most two of its workers per node (cardinality: at most one *other*).
//!
//! The paper phrases the worker cap as inter-application; over all HBase workers
//! it cannot hold beyond ~29 % memory utilisation (two 2 GiB workers per 16 GiB
//! node), yet the paper reports near-zero ILP violations at 90 %, so the cap is
//! read per application. The operator adds an inter-application constraint of its
//! own: at most four HBase masters per node. Workers take <1 core, 2 GiB>, the others <0.5 core,
//! 1 GiB>: the paper gives 1 core to every container, which would exhaust CPU
//! before memory on these nodes; halving the small ones keeps both in step.
//!
//! The seed draws a light background load of task-based containers (none by
//! default) so that nodes are not all alike.

use common::rng::{seeded, Rng};
use common::Resources;
use lra_placer::model::DeployedContainer;
use lra_placer::{
    app_tag, ClusterState, ConstraintError, ConstraintManager, ContainerRequest, LraId, LraRequest,
    NodeState, PlacementConstraint, Tag, TagSet,
};

/// The rng stream of LRA workloads (see `common::rng::streams`).
pub const LRA_STREAM: u64 = 11;

/// The node size of MEDEA 7.4.
pub const NODE: Resources = Resources {
    cpu_millis: 8000,
    memory_mb: 16384,
};

const WORKERS: usize = 10;

/// `nodes` nodes spread evenly over `racks` racks; each node carries a background
/// load of 0 to `2 * background` of its memory (and as much CPU), in steps of
/// <0.5 core, 1 GiB>.
pub fn cluster(nodes: u32, racks: u32, background: f64, seed: u64) -> ClusterState {
    let racks = racks.max(1);
    let mut rng = seeded(seed, LRA_STREAM);
    let step = Resources::new(500, 1024);
    let steps_max = (NODE.memory_mb / step.memory_mb) as f64;
    let states = (0..nodes)
        .map(|n| {
            let mut node = NodeState::empty(NODE, n * racks / nodes.max(1));
            if background > 0.0 {
                let share: f64 = rng.random::<f64>() * 2.0 * background;
                let steps = (share.min(1.0) * steps_max).floor() as u64;
                for _ in 0..steps {
                    node.free = node.free.saturating_sub(&step);
                    node.containers.push(DeployedContainer {
                        lra: None,
                        resources: step,
                        tags: vec![Tag::from("batch")],
                    });
                }
            }
            node
        })
        .collect();
    ClusterState::new(states, &[])
        .unwrap_or_else(|_| ClusterState::uniform(racks, nodes / racks, NODE))
}

fn tagged(id: LraId, role: &str) -> TagSet {
    TagSet::new([app_tag(id), Tag::from(role)])
}

/// One HBase-like LRA with its application constraints.
pub fn hbase(id: LraId) -> LraRequest {
    hbase_with(id, 0)
}

/// A variant whose workers must share their node with exactly one other worker of
/// the application (node cardinality `[1, 1]`): data-local pairs. Kubernetes-style
/// placers cannot express it, MEDEA's can.
pub fn hbase_paired(id: LraId) -> LraRequest {
    hbase_with(id, 1)
}

fn hbase_with(id: LraId, min_other_workers: u32) -> LraRequest {
    let small = Resources::new(500, 1024);
    let worker = Resources::new(1000, 2048);
    let mut containers = vec![
        ContainerRequest::new(small, ["hb", "hb_m"]),
        ContainerRequest::new(small, ["hb", "hb_t"]),
        ContainerRequest::new(small, ["hb", "hb_s"]),
    ];
    containers.extend((0..WORKERS).map(|_| ContainerRequest::new(worker, ["hb", "hb_w"])));
    let workers = tagged(id, "hb_w");
    let master = tagged(id, "hb_m");
    LraRequest {
        id,
        containers,
        constraints: vec![
            PlacementConstraint::affinity(workers.clone(), workers.clone(), "rack"),
            PlacementConstraint::cardinality(
                workers.clone(),
                workers,
                min_other_workers,
                1,
                "node",
            ),
            PlacementConstraint::affinity(master.clone(), tagged(id, "hb_t"), "node"),
            PlacementConstraint::anti_affinity(master, tagged(id, "hb_s"), "node"),
        ],
    }
}

/// The operator's constraint: at most four HBase masters per node.
pub fn operator_constraints() -> Vec<PlacementConstraint> {
    let masters = TagSet::one("hb_m");
    vec![PlacementConstraint::cardinality(
        masters.clone(),
        masters,
        0,
        3,
        "node",
    )]
}

/// A constraint manager holding the operator constraints.
pub fn manager(cluster: &ClusterState) -> Result<ConstraintManager, ConstraintError> {
    let mut m = ConstraintManager::new();
    for c in operator_constraints() {
        m.add_operator(c, cluster.groups())?;
    }
    Ok(m)
}

/// How many HBase LRAs bring the cluster's memory use to `utilisation` (0..1),
/// counting what is already used.
pub fn lras_for_utilisation(cluster: &ClusterState, utilisation: f64) -> usize {
    let (cap, free) = cluster.nodes().iter().fold((0u64, 0u64), |(c, f), n| {
        (c + n.capacity.memory_mb, f + n.free.memory_mb)
    });
    let target = cap as f64 * utilisation.clamp(0.0, 1.0);
    let used = (cap - free) as f64;
    let per = hbase(LraId(0)).total_resources().memory_mb as f64;
    ((target - used).max(0.0) / per).floor() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbase_has_the_paper_shape() {
        let lra = hbase(LraId(3));
        assert_eq!(lra.containers.len(), 13);
        assert_eq!(lra.constraints.len(), 4);
        assert_eq!(lra.total_resources(), Resources::new(11_500, 23_552));
        let paired = hbase_paired(LraId(3));
        let cap = paired.constraints[1].simple().map(|c| (c.c_min, c.c_max));
        assert_eq!(cap, Some((1, Some(1))));
    }

    #[test]
    fn clusters_are_seeded_and_racked() {
        let a = cluster(100, 10, 0.1, 7);
        let b = cluster(100, 10, 0.1, 7);
        let c = cluster(100, 10, 0.1, 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.groups().set_count(1), 10);
        assert_eq!(cluster(100, 10, 0.0, 7).nodes()[99].free, NODE);
    }

    #[test]
    fn utilisation_targets_count_what_is_used() {
        let empty = cluster(500, 10, 0.0, 1);
        // 500 * 16 GiB * 50 % / 23 GiB per LRA = 173.9
        assert_eq!(lras_for_utilisation(&empty, 0.5), 173);
        assert_eq!(lras_for_utilisation(&empty, 0.0), 0);
    }
}
