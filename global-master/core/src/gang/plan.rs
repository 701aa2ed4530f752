//! Where a gang's members go: a node for each, from the GM's view, across every LM
//! it knows. The GM's own partitions first (the LMs in turn from a rotating start,
//! so that gangs spread), then the other GMs' partitions (a repartition, as for a
//! single task). Each pick is deducted from a scratch copy so that the next member
//! sees it; the view itself is not touched here.

use crate::cluster_view::ClusterView;
use common::messages::Placement;
use common::{GmId, LmId, NodeId, Resources, TaskSpec};
use std::collections::HashMap;

/// One member's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// The member's index in the gang's task list.
    pub member: usize,
    pub lm: LmId,
    pub node: NodeId,
    pub placement: Placement,
}

/// Places as many of `tasks` as fit (in order; a member that fits nowhere is
/// skipped), starting with LM `start`. First fit, resuming after the last pick, so
/// that a gang of equal members costs one scan of the nodes.
pub fn plan(view: &ClusterView, gm: GmId, tasks: &[TaskSpec], start: usize) -> Vec<Pick> {
    let lms = view.lms().len();
    let mut taken: HashMap<(usize, u32), Resources> = HashMap::new();
    let mut picks = Vec::with_capacity(tasks.len());
    // Every (LM, node), internal partitions first.
    let mut order: Vec<(usize, u32, Placement)> = Vec::new();
    for internal in [true, false] {
        for k in 0..lms {
            let l = (start + k) % lms;
            let Some(v) = view.get(l) else { continue };
            if v.is_busy() {
                continue;
            }
            for (n, home) in v.topology.home.iter().enumerate() {
                if (*home == gm) == internal {
                    let placement = if internal {
                        Placement::Internal
                    } else {
                        Placement::Repartition
                    };
                    order.push((l, n as u32, placement));
                }
            }
        }
    }
    let mut cursor = 0;
    for (member, task) in tasks.iter().enumerate() {
        for k in 0..order.len() {
            let i = (cursor + k) % order.len();
            let (l, n, placement) = order[i];
            let Some((has, free)) = view.get(l).and_then(|v| v.node_now(n)) else {
                continue;
            };
            let used = taken.get(&(l, n)).copied().unwrap_or(Resources::ZERO);
            if task.constraints.satisfied_by(has)
                && free.saturating_sub(&used).fits(&task.resources)
            {
                *taken.entry((l, n)).or_insert(Resources::ZERO) = used.add(&task.resources);
                picks.push(Pick {
                    member,
                    lm: LmId(l as u16),
                    node: NodeId(n),
                    placement,
                });
                cursor = i;
                break;
            }
        }
    }
    picks
}
