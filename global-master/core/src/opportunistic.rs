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

use crate::cluster_view::ClusterView;
use crate::view::LmView;
use common::messages::Placement;
use common::{ConstraintSet, GmId, Micros, NodeId, Resources, TaskSpec};

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
    top_k_where(lms, task, cap, k, |_| true)
}

/// [`top_k`] over the nodes whose attributes `also` accepts (a soft branch's set).
pub fn top_k_where(
    lms: &[Option<LmView>],
    task: &TaskSpec,
    cap: f64,
    k: usize,
    also: impl Fn(ConstraintSet) -> bool,
) -> Vec<Candidate> {
    let k = k.max(1);
    let mut best: Vec<Candidate> = Vec::with_capacity(k * 2);
    for (l, view) in lms.iter().enumerate() {
        let Some(view) = view.as_ref().filter(|v| !v.is_busy()) else {
            continue;
        };
        let topo = &view.topology;
        let worst = (best.len() >= k).then(|| best[k - 1]);
        let mut taken = 0;
        for (estimate, node) in view.by_delay() {
            let c = (estimate, l, node);
            if taken == k || worst.is_some_and(|w| w <= c) {
                break;
            }
            let n = node.index();
            if eligible(task, topo.constraints[n], &topo.capacity[n], cap)
                && also(topo.constraints[n])
            {
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
        let Some(view) = view.as_ref().filter(|v| !v.is_busy()) else {
            continue;
        };
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

/// Where a QUEUEABLE task goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueableChoice {
    /// No node can ever host it under the cap.
    Nowhere,
    /// One of the top-k nodes, chosen round-robin; `candidates` were considered.
    Node {
        lm: usize,
        node: NodeId,
        placement: Placement,
        candidates: usize,
    },
}

/// The QUEUEABLE placement state: the round-robin pointer over the top-k candidates.
#[derive(Debug)]
pub struct Opportunistic {
    rr: usize,
    cap: f64,
    top_k: usize,
}

impl Opportunistic {
    /// `start`: where the round-robin starts (GMs start at different candidates so
    /// that they do not herd).
    pub fn new(start: usize, cap: f64, top_k: usize) -> Self {
        Opportunistic {
            rr: start,
            cap,
            top_k,
        }
    }

    /// Chooses a node for `task` among the top-k over `view` and adds the task's work
    /// to that node's estimate, so that the next choice of a pass spreads.
    pub fn choose(&mut self, view: &mut ClusterView, task: &TaskSpec, me: GmId) -> QueueableChoice {
        self.choose_where(view, task, me, |_| true)
    }

    /// [`Opportunistic::choose`] among the nodes whose attributes `also` accepts (a
    /// soft branch's set; alsched); `Nowhere` when none of them can host the task.
    pub fn choose_where(
        &mut self,
        view: &mut ClusterView,
        task: &TaskSpec,
        me: GmId,
        also: impl Fn(ConstraintSet) -> bool,
    ) -> QueueableChoice {
        let candidates = top_k_where(view.lms(), task, self.cap, self.top_k, also);
        if candidates.is_empty() {
            return QueueableChoice::Nowhere;
        }
        let pick = self.rr % candidates.len();
        self.rr = self.rr.wrapping_add(1);
        let (_, l, node) = candidates[pick];
        let placement = view.placement_of(l, node, me);
        if let Some(view) = view.get_mut(l) {
            let n = node.index();
            let capacity = view.topology.capacity[n];
            let work = task.resources.node_time(task.duration, &capacity);
            view.set_delay(n, view.delay(n) + work);
        }
        QueueableChoice::Node {
            lm: l,
            node,
            placement,
            candidates: candidates.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::LmTopology;
    use common::{LmId, TaskId};
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
