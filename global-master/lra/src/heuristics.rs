//! MEDEA's heuristic placers (section 5.3). Both consider every container of the
//! interval's LRAs, pick an order, and put each container on its cheapest node
//! (fewest weighted violations, then most free memory). An LRA whose container fits
//! nowhere is taken back whole.
//!
//! - Tag popularity (TP): containers whose tags appear in the most constraints first.
//! - Node candidates (NC): the container with the fewest violation-free nodes (N_c)
//!   first; N_c is recomputed only for containers whose constraints count a tag the
//!   last placed container carries, and once per group of identical containers.

use super::compiled::{compile, Compiled};
use super::greedy::{Greedy, Terms};
use super::problem::{Problem, Solution};
use std::collections::HashMap;

/// Places the interval's LRAs with the tag-popularity heuristic.
#[derive(Clone, Copy, Debug, Default)]
pub struct TagPopularityPlacer;

/// Places the interval's LRAs with the node-candidates heuristic.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeCandidatesPlacer;

impl TagPopularityPlacer {
    pub fn solve(&self, problem: &Problem<'_>) -> Solution {
        let c = compile(problem.cluster, problem.lras, &problem.constraints, true);
        let mut g = Greedy::new(&c, problem.cluster);
        tag_popularity(&c, &mut g);
        g.into_solution(problem, "tp")
    }
}

impl NodeCandidatesPlacer {
    pub fn solve(&self, problem: &Problem<'_>) -> Solution {
        let c = compile(problem.cluster, problem.lras, &problem.constraints, true);
        let mut g = Greedy::new(&c, problem.cluster);
        node_candidates(&c, &mut g);
        g.into_solution(problem, "nc")
    }
}

/// How many constraints mention a tag set the container matches.
fn popularity(c: &Compiled, i: usize, j: usize) -> usize {
    c.new[i][j]
        .matches
        .iter()
        .map(|&p| {
            let as_target: usize = c.keys_by_pattern[p]
                .iter()
                .map(|&k| c.atoms_by_key[k].len())
                .sum();
            c.rules_by_subject[p].len() + as_target
        })
        .sum()
}

fn place_one(g: &mut Greedy<'_>, i: usize, j: usize) {
    if g.failed[i].is_some() {
        return;
    }
    match g.best_node(i, j, Terms::All) {
        Some(node) => g.place(i, j, node),
        None => {
            let reason = g.no_fit_reason(i, j);
            g.fail(i, reason);
        }
    }
}

pub(crate) fn tag_popularity(c: &Compiled, g: &mut Greedy<'_>) {
    let mut order: Vec<(usize, usize)> = c
        .new
        .iter()
        .enumerate()
        .flat_map(|(i, l)| (0..l.len()).map(move |j| (i, j)))
        .collect();
    // Stable: ties keep submission order.
    order.sort_by_key(|&(i, j)| std::cmp::Reverse(popularity(c, i, j)));
    for (i, j) in order {
        place_one(g, i, j);
    }
}

/// Containers of one LRA with the same tags-of-interest and demand are
/// interchangeable for N_c; they share one entry.
struct Class {
    lra: usize,
    members: Vec<usize>,
    candidates: usize,
    stale: bool,
}

fn count_candidates(g: &Greedy<'_>, i: usize, j: usize) -> usize {
    (0..g.free.len())
        .filter(|&n| g.fits(i, j, n) && g.own_cost(i, j, n, Terms::All).0 <= 1e-9)
        .count()
}

pub(crate) fn node_candidates(c: &Compiled, g: &mut Greedy<'_>) {
    let mut classes: Vec<Class> = Vec::new();
    for (i, l) in c.new.iter().enumerate() {
        let mut by_shape: HashMap<(&[usize], u64, u64), usize> = HashMap::new();
        for (j, item) in l.iter().enumerate() {
            let shape = (
                item.matches.as_slice(),
                item.resources.cpu_millis,
                item.resources.memory_mb,
            );
            let next = classes.len();
            let k = *by_shape.entry(shape).or_insert(next);
            if k == next {
                classes.push(Class {
                    lra: i,
                    members: Vec::new(),
                    candidates: 0,
                    stale: true,
                });
            }
            classes[k].members.push(j);
        }
    }
    // Patterns each class's constraints count: placing a container matching one of
    // them changes the class's N_c.
    let watched: Vec<Vec<usize>> = classes
        .iter()
        .map(|cl| {
            let item = &c.new[cl.lra][cl.members[0]];
            let mut pats: Vec<usize> = item
                .matches
                .iter()
                .flat_map(|&p| &c.rules_by_subject[p])
                .flat_map(|&r| c.rules[r].clauses.iter().flatten())
                .map(|&a| c.keys[c.atoms[a].key].pattern)
                .collect();
            pats.sort_unstable();
            pats.dedup();
            pats
        })
        .collect();
    loop {
        for cl in classes
            .iter_mut()
            .filter(|cl| cl.stale && !cl.members.is_empty())
        {
            cl.candidates = count_candidates(g, cl.lra, cl.members[0]);
            cl.stale = false;
        }
        let next = classes
            .iter()
            .enumerate()
            .filter(|(_, cl)| !cl.members.is_empty() && g.failed[cl.lra].is_none())
            .min_by_key(|(k, cl)| (cl.candidates, *k))
            .map(|(k, _)| k);
        let Some(k) = next else { break };
        let (i, j) = (classes[k].lra, classes[k].members.remove(0));
        place_one(g, i, j);
        let placed = &c.new[i][j];
        for (cl, pats) in classes.iter_mut().zip(&watched) {
            if pats.iter().any(|&p| placed.matches(p)) {
                cl.stale = true;
            }
        }
    }
}
