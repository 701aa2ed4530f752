//! J-KUBE, the baseline (MEDEA section 7.1): the Kubernetes scheduling algorithm
//! applied to LRAs. One request at a time in submission order, each container
//! placed on its own: filter (resources, hard affinity / anti-affinity), then score
//! every node with inter-pod affinity (weight 2, normalised to 0..100 over the
//! feasible nodes), least-requested and balanced-allocation (0..100 each), and take
//! the highest score. Like Kubernetes it understands affinity and anti-affinity but
//! not cardinality constraints. All-or-nothing per LRA, as for the other placers.

use super::compiled::compile;
use super::constraints::HARD_WEIGHT;
use super::greedy::{Greedy, Terms};
use super::problem::{Problem, Solution};
use common::Resources;

/// The Kubernetes-style baseline placer.
#[derive(Clone, Copy, Debug, Default)]
pub struct KubePlacer;

const AFFINITY_WEIGHT: f64 = 2.0;

fn least_requested(free: &Resources, capacity: &Resources) -> f64 {
    let share = |f: u64, c: u64| if c == 0 { 0.0 } else { f as f64 / c as f64 };
    50.0 * (share(free.cpu_millis, capacity.cpu_millis) + share(free.memory_mb, capacity.memory_mb))
}

fn balanced(free: &Resources, capacity: &Resources) -> f64 {
    let used = |f: u64, c: u64| {
        if c == 0 {
            0.0
        } else {
            1.0 - f as f64 / c as f64
        }
    };
    let diff = (used(free.cpu_millis, capacity.cpu_millis)
        - used(free.memory_mb, capacity.memory_mb))
    .abs();
    100.0 * (1.0 - diff)
}

impl KubePlacer {
    pub fn solve(&self, problem: &Problem<'_>) -> Solution {
        let c = compile(problem.cluster, problem.lras, &problem.constraints, true);
        let mut g = Greedy::new(&c, problem.cluster);
        let nodes = problem.cluster.nodes();
        for i in 0..c.new.len() {
            for j in 0..c.new[i].len() {
                // Filter, remembering each feasible node's affinity cost.
                let feasible: Vec<(usize, f64)> = (0..nodes.len())
                    .filter(|&n| g.fits(i, j, n))
                    .map(|n| {
                        let (violated, pending) = g.own_cost(i, j, n, Terms::AffinityOnly);
                        (n, violated + pending, n)
                    })
                    .filter(|&(_, own, _)| own < HARD_WEIGHT)
                    .map(|(n, own, _)| (n, own + g.caused_cost(i, j, n, Terms::AffinityOnly)))
                    .collect();
                if feasible.is_empty() {
                    let reason = g.no_fit_reason(i, j);
                    g.fail(i, reason);
                    break;
                }
                let (lo, hi) = feasible.iter().fold(
                    (f64::INFINITY, f64::NEG_INFINITY),
                    |(lo, hi), &(_, cost)| (lo.min(cost), hi.max(cost)),
                );
                let mut best: Option<(f64, usize)> = None;
                for &(n, cost) in &feasible {
                    let affinity = if hi - lo > 1e-9 {
                        100.0 * (hi - cost) / (hi - lo)
                    } else {
                        100.0
                    };
                    let after = g.free[n].saturating_sub(&c.new[i][j].resources);
                    let score = AFFINITY_WEIGHT * affinity
                        + least_requested(&after, &nodes[n].capacity)
                        + balanced(&after, &nodes[n].capacity);
                    if best.is_none_or(|(b, _)| score > b + 1e-9) {
                        best = Some((score, n));
                    }
                }
                if let Some((_, n)) = best {
                    g.place(i, j, n);
                }
            }
        }
        g.into_solution(problem, "j-kube")
    }
}
