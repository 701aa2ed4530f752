//! The LRA placer's picture of the data center, built from the GM's LM views.
//!
//! Nodes are numbered LM by LM in node-id order. Free resources are the view's (the
//! LMs' last report minus what this GM has sent since); the `rack` group puts
//! `nodes_per_rack` consecutive nodes of one LM in a rack (0: each LM is one rack);
//! deployed containers are the LRA containers this GM has placed that still run or
//! await their LM's answer, with their tags (including `appID`).

use crate::view::LmView;
use common::{LmId, NodeId, Resources};
use lra_placer::model::DeployedContainer;
use lra_placer::{ClusterState, LraRequest, NodeGroupSpec, NodeState};

/// The cluster and, per placer node index, its (LM index, LM node id).
pub fn build_cluster<'a>(
    views: &[Option<LmView>],
    deployed: impl Iterator<Item = (&'a LraRequest, usize, (LmId, NodeId))>,
    nodes_per_rack: u32,
    groups: &[NodeGroupSpec],
) -> (ClusterState, Vec<(usize, NodeId)>) {
    let mut nodes = Vec::new();
    let mut at = Vec::new();
    let mut offset = vec![0usize; views.len()];
    let mut rack_base = 0u32;
    for (l, view) in views.iter().enumerate() {
        offset[l] = nodes.len();
        let Some(view) = view else { continue };
        let topology = &view.topology;
        let count = topology.node_count() as u32;
        let per_rack = if nodes_per_rack == 0 {
            count.max(1)
        } else {
            nodes_per_rack
        };
        for n in 0..count {
            let capacity = topology.capacity[n as usize];
            let (p, slot) = view.slot_of[n as usize];
            let free = view.partitions[p as usize].free[slot as usize];
            // The view never shows more than the capacity; clamp all the same so a
            // skewed report cannot make the cluster description invalid.
            let free = Resources::new(
                free.cpu_millis.min(capacity.cpu_millis),
                free.memory_mb.min(capacity.memory_mb),
            );
            nodes.push(NodeState {
                capacity,
                free,
                rack: rack_base + n / per_rack,
                containers: Vec::new(),
            });
            at.push((l, NodeId(n)));
        }
        rack_base += count.div_ceil(per_rack);
    }
    for (lra, j, (lm, node)) in deployed {
        let Some(base) = offset.get(lm.index()) else {
            continue;
        };
        let Some(state) = nodes.get_mut(base + node.index()) else {
            continue;
        };
        if at.get(base + node.index()).map(|a| a.0) != Some(lm.index()) {
            continue;
        }
        state.containers.push(DeployedContainer {
            lra: Some(lra.id),
            resources: lra.containers[j].resources,
            tags: lra.container_tags(j),
        });
    }
    // The operator's groups name node indices; a set beyond this cluster's nodes (an
    // LM missing, or a configuration for a larger cluster) cannot be honoured.
    let cluster = match ClusterState::new(nodes.clone(), groups) {
        Ok(c) => Ok(c),
        Err(e) => {
            tracing::error!(error = %e, "operator node groups do not fit the cluster; placing without them");
            ClusterState::new(nodes, &[])
        }
    };
    let cluster = match cluster {
        Ok(c) => c,
        // Unreachable: free is clamped to capacity and container tags come sorted.
        Err(e) => {
            tracing::error!(error = %e, "cannot describe the cluster to the LRA placer");
            ClusterState::uniform(0, 0, Resources::ZERO)
        }
    };
    (cluster, at)
}
