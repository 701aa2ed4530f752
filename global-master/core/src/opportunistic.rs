//! Mercury's distributed placement of QUEUEABLE work (section 4.2), run by every GM.
//!
//! A QUEUEABLE task does not wait for free resources in the view: it goes to one of
//! the k nodes with the least estimated queuing delay (as the LMs report it) that have
//! its constraints and are large enough under the QUEUEABLE cap, chosen round-robin
//! (deterministic), and waits in that worker's queue if need be. The GM adds the
//! task's work to that node's estimate at once, so that one pass spreads its tasks.
//!
//! The k best nodes come from each LM view's sorted index of estimates
//! ([`top_k`]): walking it in order until k eligible nodes are found costs
//! O(log n + k) per LM when most nodes are eligible, instead of a scan of every node
//! ([`top_k_scan`], kept as the reference the index is tested and benchmarked
//! against). A task whose job is at its QUEUEABLE quota waits instead (see
//! [`super::quota`]).

use super::master::{Decision, DecisionOutcome, GlobalMaster, PassOutput};
use super::queue::Pending;
use super::view::LmView;
use common::messages::Placement;
use common::reasons::PendingReason;
use common::{ConstraintSet, LmId, Micros, NodeId, Resources, TaskSpec};

/// One candidate node: (estimate, LM index, node).
pub type Candidate = (Micros, usize, NodeId);

/// True when a node with these constraints and this capacity can host `task` under
/// the QUEUEABLE cap.
fn eligible(task: &TaskSpec, constraints: ConstraintSet, capacity: &Resources, cap: f64) -> bool {
    task.constraints.satisfied_by(constraints) && capacity.scaled(cap).fits(&task.resources)
}

/// The `k` nodes with the least estimate able to host `task`, best first (ties by LM,
/// then node id), over every LM's view: each LM's index walked in order.
pub fn top_k(lms: &[Option<LmView>], task: &TaskSpec, cap: f64, k: usize) -> Vec<Candidate> {
    let k = k.max(1);
    let mut best: Vec<Candidate> = Vec::with_capacity(k * 2);
    for (l, view) in lms.iter().enumerate() {
        let Some(view) = view else { continue };
        let topo = &view.topology;
        let worst = (best.len() >= k).then(|| best[k - 1]);
        let mut taken = 0;
        for (estimate, node) in view.by_delay() {
            let c = (estimate, l, node);
            if taken == k || worst.is_some_and(|w| w <= c) {
                break;
            }
            let n = node.index();
            if eligible(task, topo.constraints[n], &topo.capacity[n], cap) {
                best.push(c);
                taken += 1;
            }
        }
        best.sort_unstable();
        best.truncate(k);
    }
    best
}

/// [`top_k`] by scanning every node of every view (the reference).
pub fn top_k_scan(lms: &[Option<LmView>], task: &TaskSpec, cap: f64, k: usize) -> Vec<Candidate> {
    let k = k.max(1);
    let mut best: Vec<Candidate> = Vec::with_capacity(k + 1);
    for (l, view) in lms.iter().enumerate() {
        let Some(view) = view else { continue };
        let topo = &view.topology;
        for (n, (constraints, capacity)) in topo.constraints.iter().zip(&topo.capacity).enumerate()
        {
            if !eligible(task, *constraints, capacity, cap) {
                continue;
            }
            let estimate = view.delay(n);
            let c = (estimate, l, NodeId(n as u32));
            if best.len() == k && best.last().is_some_and(|worst| *worst <= c) {
                continue;
            }
            let at = best.partition_point(|b| *b <= c);
            best.insert(at, c);
            best.truncate(k);
        }
    }
    best
}

impl GlobalMaster {
    pub(crate) fn place_queueable(
        &mut self,
        mut pending: Box<Pending>,
        out: &mut PassOutput,
    ) -> Decision {
        let task_id = pending.task.id;
        if let Some(limit) = self.quota.over(task_id.job) {
            let reason = PendingReason::OverQueueableQuota { limit };
            pending.reason = Some(reason.clone());
            self.quota.hold(pending);
            self.stats_mut().quota_held += 1;
            return Decision {
                task: task_id,
                partitions: 0,
                words: 0,
                outcome: DecisionOutcome::Requeued(reason),
            };
        }
        let (cap, k) = (self.config().queueable_cap, self.config().queueable_top_k);
        let candidates = top_k(self.lm_views(), &pending.task, cap, k);
        let words = candidates.len() as u64;
        if candidates.is_empty() {
            let (with_constraints, _) =
                self.host_count_pub(pending.task.constraints, pending.task.resources);
            self.stats_mut().unplaceable += 1;
            let reason = if with_constraints == 0 {
                PendingReason::NoNodeWithConstraints
            } else {
                PendingReason::NoNodeLargeEnough
            };
            return Decision {
                task: task_id,
                partitions: 0,
                words,
                outcome: DecisionOutcome::Unplaceable(reason),
            };
        }
        let pick = self.rr_queueable % candidates.len();
        self.rr_queueable = self.rr_queueable.wrapping_add(1);
        let (_, l, node) = candidates[pick];
        let me = self.id();
        let placement = match self.lm_views()[l].as_ref() {
            Some(view) if view.topology.home.get(node.index()) == Some(&me) => Placement::Internal,
            _ => Placement::Repartition,
        };
        if let Some(view) = self.lm_view_mut(l) {
            let n = node.index();
            let capacity = view.topology.capacity[n];
            let work = pending
                .task
                .resources
                .node_time(pending.task.duration, &capacity);
            view.set_delay(n, view.delay(n) + work);
        }
        let batch = self.dispatch(l, node, placement, &mut pending, out, false);
        self.stats_mut().dispatched_queueable += 1;
        Decision {
            task: task_id,
            partitions: 1,
            words,
            outcome: DecisionOutcome::Dispatched {
                lm: LmId(l as u16),
                node,
                placement,
                batch,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::LmTopology;
    use common::{ConstraintSet, GmId, Resources, TaskId};
    use std::sync::Arc;

    fn view(delays: &[u64]) -> LmView {
        let n = delays.len();
        let topo = LmTopology {
            lm: LmId(0),
            gms: 1,
            home: vec![GmId(0); n],
            constraints: (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        ConstraintSet::from_ids([3]).unwrap_or(ConstraintSet::EMPTY)
                    } else {
                        ConstraintSet::EMPTY
                    }
                })
                .collect(),
            capacity: vec![Resources::cores(2, 100); n],
        };
        let mut v = LmView::build(Arc::new(topo));
        for (n, d) in delays.iter().enumerate() {
            v.set_delay(n, Micros(*d));
        }
        v
    }

    fn task(cores: u64, constraints: &[u64]) -> TaskSpec {
        TaskSpec::short(TaskId::new(1, 0), Resources::cores(cores, 1), Micros(5))
            .with_constraints(ConstraintSet::from_ids(constraints.iter().copied()).unwrap())
    }

    #[test]
    fn picks_the_least_loaded_nodes_with_the_constraints() {
        let lms = vec![Some(view(&[50, 10, 40, 0, 30, 20]))];
        let nodes = |c: Vec<Candidate>| c.into_iter().map(|(_, _, n)| n.0).collect::<Vec<_>>();
        for find in [top_k, top_k_scan] {
            assert_eq!(nodes(find(&lms, &task(1, &[]), 1.0, 3)), vec![3, 1, 5]);
            assert_eq!(nodes(find(&lms, &task(1, &[3]), 1.0, 2)), vec![4, 2]);
            // Two cores under a 50 % cap of a two-core node: nowhere.
            assert!(find(&lms, &task(2, &[]), 0.5, 3).is_empty());
        }
    }
}
