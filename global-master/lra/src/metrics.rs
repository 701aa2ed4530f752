//! Placement quality (MEDEA section 7.4) and the objective used to compare two
//! answers to the same problem.
//!
//! - % of containers violating at least one constraint whose subject they are;
//! - % of fragmented nodes: free resources below a threshold (MEDEA: 1 core / 2 GB)
//!   in some dimension without the node being completely full;
//! - coefficient of variation of the nodes' memory utilisation (load imbalance);
//! - placement latency per LRA: measured by the caller (this library reads no
//!   clock), averaged with [`latency_per_lra_ms`].

use super::compiled::{compile, Compiled};
use super::constraints::PlacementConstraint;
use super::model::{ClusterState, LraId};
use super::problem::ObjectiveWeights;
use common::Resources;

/// The fragmentation threshold of MEDEA 7.4: one core and 2 GB.
pub const FRAGMENT_THRESHOLD: Resources = Resources {
    cpu_millis: 1000,
    memory_mb: 2048,
};

/// Quality of a cluster's LRA placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    pub containers: usize,
    pub violating_containers: usize,
    pub violation_pct: f64,
    pub nodes: usize,
    pub fragmented_nodes: usize,
    pub fragmentation_pct: f64,
    pub memory_utilisation_cv: f64,
    pub memory_utilisation_mean: f64,
}

/// True when a node has some room left, but less than `threshold` in a dimension.
pub fn is_fragmented(free: &Resources, threshold: &Resources) -> bool {
    !free.fits(threshold) && !free.any_zero()
}

/// Measures every container running in `cluster` against `constraints`.
pub fn quality(
    cluster: &ClusterState,
    constraints: &[PlacementConstraint],
    threshold: &Resources,
) -> Quality {
    quality_of(cluster, constraints, threshold, |_| true)
}

/// As [`quality`], counting violations only among the containers of the
/// applications `counted` accepts (`None`: containers of no application).
pub fn quality_of(
    cluster: &ClusterState,
    constraints: &[PlacementConstraint],
    threshold: &Resources,
    counted: impl Fn(Option<LraId>) -> bool,
) -> Quality {
    let c = compile(cluster, &[], constraints, false);
    let violating = c
        .deployed
        .iter()
        .zip(&c.deployed_lra)
        .filter(|(_, lra)| counted(**lra))
        .filter(|((node, item), _)| c.violated(cluster, &c.base, item, *node).1 > 0)
        .count();
    let containers: usize = cluster
        .nodes()
        .iter()
        .flat_map(|n| &n.containers)
        .filter(|c| counted(c.lra))
        .count();
    let nodes = cluster.nodes().len();
    let fragmented = cluster
        .nodes()
        .iter()
        .filter(|n| is_fragmented(&n.free, threshold))
        .count();
    let utils: Vec<f64> = cluster
        .nodes()
        .iter()
        .filter(|n| n.capacity.memory_mb > 0)
        .map(|n| 1.0 - n.free.memory_mb as f64 / n.capacity.memory_mb as f64)
        .collect();
    let (mean, cv) = mean_and_cv(&utils);
    Quality {
        containers,
        violating_containers: violating,
        violation_pct: pct(violating, containers),
        nodes,
        fragmented_nodes: fragmented,
        fragmentation_pct: pct(fragmented, nodes),
        memory_utilisation_cv: cv,
        memory_utilisation_mean: mean,
    }
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Mean and coefficient of variation (population standard deviation / mean; 0 when
/// the mean is 0).
pub fn mean_and_cv(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt() / mean)
}

/// Average placement latency per LRA, in milliseconds, from a caller's measurement.
pub fn latency_per_lra_ms(elapsed_micros: u64, lras: usize) -> f64 {
    if lras == 0 {
        0.0
    } else {
        elapsed_micros as f64 / 1000.0 / lras as f64
    }
}

/// The objective value of one answer (higher is better), as the ILP sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Score {
    pub placed: usize,
    pub violated_weight: f64,
    pub fragmented: usize,
    pub value: f64,
}

/// How many (subject container, constraint) pairs the batch holds: the violation
/// term's normaliser (at least 1).
pub(crate) fn subject_pairs(c: &Compiled) -> usize {
    c.new
        .iter()
        .flatten()
        .map(|item| {
            item.matches
                .iter()
                .map(|&p| c.rules_by_subject[p].len())
                .sum::<usize>()
        })
        .sum::<usize>()
        .max(1)
}

/// Scores `at` (node per container, `None` for containers of unplaced LRAs) with
/// the weights of equation 1: placed LRAs, weighted violations of new and running
/// containers, nodes left with less than `rmin` free.
pub(crate) fn score(
    c: &Compiled,
    cluster: &ClusterState,
    at: &[Vec<Option<usize>>],
    w: &ObjectiveWeights,
    rmin: &Resources,
) -> Score {
    let mut counts = c.base.clone();
    let mut free: Vec<Resources> = cluster.nodes().iter().map(|n| n.free).collect();
    let mut placed = 0;
    for (items, nodes) in c.new.iter().zip(at) {
        if nodes.len() != items.len() || nodes.iter().any(Option::is_none) {
            continue;
        }
        placed += 1;
        for (item, node) in items.iter().zip(nodes.iter().flatten()) {
            c.count(cluster, &mut counts, item, *node, true);
            free[*node] = free[*node].saturating_sub(&item.resources);
        }
    }
    let mut violated = 0.0;
    for (items, nodes) in c.new.iter().zip(at) {
        for (item, node) in items.iter().zip(nodes.iter()) {
            if let Some(node) = node {
                violated += c.violated(cluster, &counts, item, *node).0;
            }
        }
    }
    for (node, item) in &c.deployed {
        violated += c.violated(cluster, &counts, item, *node).0;
    }
    let fragmented = free.iter().filter(|f| !f.fits(rmin)).count();
    let k = c.new.len().max(1) as f64;
    let n = free.len().max(1) as f64;
    let value = w.placed * placed as f64 / k
        - w.violations * violated / subject_pairs(c) as f64
        - w.fragmentation * fragmented as f64 / n;
    Score {
        placed,
        violated_weight: violated,
        fragmented,
        value,
    }
}
