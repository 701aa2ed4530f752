//! Where a gang's members go: a node for each, from the GM's view, across every LM
//! it knows. The GM's own partitions first (the LMs in turn from a rotating start,
//! so that gangs spread), then the other GMs' partitions (a repartition, as for a
//! single task). Each pick is deducted from a scratch copy so that the next member
//! sees it; the view itself is not touched here.

use crate::cluster_view::ClusterView;
use common::messages::Placement;
use common::{ConstraintSet, GmId, LmId, NodeId, Resources, TaskSpec};
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

/// The nodes with anything free, in the order members try them, read from the view
/// once per pass (every waiting gang plans over the same list).
#[derive(Debug, Default)]
pub struct Candidates {
    nodes: Vec<(LmId, NodeId, Placement, ConstraintSet, Resources)>,
    /// The sum of their free resources: a gang asking more cannot fit.
    pub total: Resources,
}

impl Candidates {
    /// Every node of every LM not passed by (busy), with something free in every
    /// dimension: `gm`'s own partitions first, then the others', each from LM `start`.
    pub fn read(view: &ClusterView, gm: GmId, start: usize) -> Self {
        let lms = view.lms().len();
        let mut c = Candidates::default();
        for internal in [true, false] {
            let placement = if internal {
                Placement::Internal
            } else {
                Placement::Repartition
            };
            for k in 0..lms {
                let l = (start + k) % lms;
                let Some(v) = view.get(l) else { continue };
                if v.is_busy() {
                    continue;
                }
                for (n, home) in v.topology.home.iter().enumerate() {
                    if (*home == gm) != internal {
                        continue;
                    }
                    let Some((has, free)) = v.node_now(n as u32) else {
                        continue;
                    };
                    if free.any_zero() {
                        continue;
                    }
                    c.total = c.total.add(&free);
                    c.nodes
                        .push((LmId(l as u16), NodeId(n as u32), placement, has, free));
                }
            }
        }
        c
    }

    /// Takes a pick's room out (the next gang of the pass plans without it).
    pub fn take(&mut self, picks: &[Pick], tasks: &[TaskSpec]) {
        for p in picks {
            let need = tasks[p.member].resources;
            if let Some(slot) = (self.nodes.iter_mut()).find(|c| c.0 == p.lm && c.1 == p.node) {
                slot.4 = slot.4.saturating_sub(&need);
            }
            self.total = self.total.saturating_sub(&need);
        }
    }
}

/// Places as many of `tasks` as fit (in order; a member that fits nowhere is
/// skipped). First fit, resuming after the last pick, so that a gang of equal
/// members costs one scan of the nodes.
pub fn plan(candidates: &Candidates, tasks: &[TaskSpec]) -> Vec<Pick> {
    let order = &candidates.nodes;
    let mut taken: HashMap<usize, Resources> = HashMap::new();
    let mut picks = Vec::with_capacity(tasks.len());
    let mut cursor = 0;
    for (member, task) in tasks.iter().enumerate() {
        for k in 0..order.len() {
            let i = (cursor + k) % order.len();
            let (lm, node, placement, has, free) = order[i];
            let used = taken.get(&i).copied().unwrap_or(Resources::ZERO);
            if task.constraints.satisfied_by(has)
                && free.saturating_sub(&used).fits(&task.resources)
            {
                taken.insert(i, used.add(&task.resources));
                picks.push(Pick {
                    member,
                    lm,
                    node,
                    placement,
                });
                cursor = i;
                break;
            }
        }
    }
    picks
}
