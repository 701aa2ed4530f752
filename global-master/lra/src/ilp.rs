//! The ILP placer (MEDEA section 5.2, Figure 5) over all LRAs of one scheduling
//! interval, solved with HiGHS through good_lp.
//!
//! Pipeline, each stage for a reason:
//! 1. Compile the problem, keeping only constraints the batch can affect.
//! 2. Run both MEDEA heuristics (NC, TP) and keep the better answer: it is the warm
//!    start, the yardstick, and the fallback.
//! 3. Pick candidate nodes: every node the heuristics used, then nodes in the same
//!    node sets (racks, domains) as those, most free memory first. Nodes identical
//!    in free resources, node sets and tag counts are interchangeable, so at most as
//!    many of one class as the batch has containers are kept (sound: no solution
//!    uses more). The total is capped.
//! 4. Build the model: `X[i][j][n]` binary, `S[i]` all-or-nothing, capacity per
//!    dimension, one lower and one upper cardinality row per (subject, node set)
//!    with a binary violation variable (DNF: one binary per clause, at least one
//!    clause or the violation), fragmentation binaries `z[n]`, an optional
//!    load-balance term. Objective: `w1/k Σ S - w2/m Σ weight·violation + w3/N Σ z`.
//! 5. Solve under a time cap, check capacities, score with the same objective as
//!    the heuristic and return whichever is better; the heuristic answer comes back
//!    marked as a fallback.

use super::compiled::{compile, Compiled};
use super::greedy::Greedy;
use super::heuristics::{node_candidates, tag_popularity};
pub use super::ilp_model::IlpConfig;
use super::ilp_model::{solve_model, Answer};
use super::metrics::score;
use super::problem::{LraOutcome, NotPlaced, Problem, Solution};
use common::{NodeId, Resources};
use std::collections::HashMap;

/// MEDEA-ILP.
#[derive(Clone, Copy, Debug, Default)]
pub struct IlpPlacer {
    pub config: IlpConfig,
}

fn heuristic(c: &Compiled, problem: &Problem<'_>, rmin: &Resources, nc: bool) -> Answer {
    let mut g = Greedy::new(c, problem.cluster);
    if nc {
        node_candidates(c, &mut g);
    } else {
        tag_popularity(c, &mut g);
    }
    let score = score(c, problem.cluster, &g.at, &problem.weights, rmin);
    Answer {
        at: g.at,
        reasons: g.failed,
        score,
    }
}

impl IlpPlacer {
    pub fn new(config: IlpConfig) -> Self {
        IlpPlacer { config }
    }

    pub fn solve(&self, problem: &Problem<'_>) -> Solution {
        let c = compile(problem.cluster, problem.lras, &problem.constraints, true);
        let rmin = c
            .new
            .iter()
            .flatten()
            .map(|i| i.resources)
            .reduce(|a, b| {
                Resources::new(a.cpu_millis.min(b.cpu_millis), a.memory_mb.min(b.memory_mb))
            })
            .unwrap_or(Resources::ZERO);
        let nc = heuristic(&c, problem, &rmin, true);
        let tp = heuristic(&c, problem, &rmin, false);
        let (best, other) = if tp.score.value > nc.score.value + 1e-12 {
            (tp, nc)
        } else {
            (nc, tp)
        };
        if self.config.time_limit_ms == 0 {
            return answer(
                problem,
                &best,
                "ilp",
                Some("solver time cap is zero".into()),
            );
        }
        let candidates = candidate_nodes(
            &c,
            problem,
            &best,
            &other,
            &rmin,
            self.config.max_candidate_nodes,
        );
        let solved = solve_model(&c, problem, &best, &candidates, &rmin, &self.config);
        match solved {
            Ok(at) => {
                if let Err(why) = check_capacity(&c, problem, &at) {
                    return answer(problem, &best, "ilp", Some(why));
                }
                let s = score(&c, problem.cluster, &at, &problem.weights, &rmin);
                if s.value > best.score.value + 1e-9 {
                    let reasons = best
                        .reasons
                        .iter()
                        .map(|r| Some(r.clone().unwrap_or(NotPlaced::NotChosen)))
                        .collect();
                    answer(
                        problem,
                        &Answer {
                            at,
                            reasons,
                            score: s,
                        },
                        "ilp",
                        None,
                    )
                } else {
                    answer(
                        problem,
                        &best,
                        "ilp",
                        Some("solver did not improve on the heuristic".into()),
                    )
                }
            }
            Err(why) => answer(problem, &best, "ilp", Some(why)),
        }
    }
}

fn answer(
    problem: &Problem<'_>,
    a: &Answer,
    placer: &'static str,
    fallback: Option<String>,
) -> Solution {
    let outcomes = problem
        .lras
        .iter()
        .enumerate()
        .map(|(i, lra)| {
            let placed: Option<Vec<NodeId>> = a.at[i]
                .iter()
                .map(|n| n.map(|n| NodeId(n as u32)))
                .collect();
            let outcome = match placed {
                Some(nodes) if !nodes.is_empty() => LraOutcome::Placed(nodes),
                _ => LraOutcome::NotPlaced(a.reasons[i].clone().unwrap_or(NotPlaced::NotChosen)),
            };
            (lra.id, outcome)
        })
        .collect();
    Solution {
        placer,
        outcomes,
        fallback,
    }
}

fn check_capacity(
    c: &Compiled,
    problem: &Problem<'_>,
    at: &[Vec<Option<usize>>],
) -> Result<(), String> {
    let mut free: Vec<Resources> = problem.cluster.nodes().iter().map(|n| n.free).collect();
    for (i, nodes) in at.iter().enumerate() {
        for (j, node) in nodes.iter().enumerate() {
            if let Some(n) = node {
                free[*n] = free[*n]
                    .checked_sub(&c.new[i][j].resources)
                    .ok_or_else(|| format!("solver answer overcommits node {n}"))?;
            }
        }
    }
    Ok(())
}

fn candidate_nodes(
    c: &Compiled,
    problem: &Problem<'_>,
    best: &Answer,
    other: &Answer,
    rmin: &Resources,
    cap: usize,
) -> Vec<usize> {
    let cluster = problem.cluster;
    let groups = cluster.groups();
    let mut chosen: Vec<usize> = best
        .at
        .iter()
        .chain(&other.at)
        .flatten()
        .flatten()
        .copied()
        .collect();
    chosen.sort_unstable();
    chosen.dedup();
    let mut used_groups: Vec<usize> = c.keys.iter().map(|k| k.group).filter(|&g| g != 0).collect();
    used_groups.sort_unstable();
    used_groups.dedup();
    let seed_sets: Vec<std::collections::HashSet<usize>> = used_groups
        .iter()
        .map(|&g| chosen.iter().map(|&s| groups.set_of(g, s)).collect())
        .collect();
    let no_seeds = chosen.is_empty() || used_groups.is_empty();
    let near = |n: usize| {
        no_seeds
            || used_groups
                .iter()
                .zip(&seed_sets)
                .any(|(&g, sets)| sets.contains(&groups.set_of(g, n)))
    };
    let node_keys: Vec<usize> = (0..c.keys.len())
        .filter(|&k| c.keys[k].group == 0)
        .collect();
    let total: usize = c.new.iter().map(Vec::len).sum();
    let mut pool: Vec<usize> = (0..cluster.nodes().len())
        .filter(|&n| cluster.nodes()[n].free.fits(rmin) && chosen.binary_search(&n).is_err())
        .collect();
    pool.sort_by_key(|&n| {
        let f = cluster.nodes()[n].free;
        (std::cmp::Reverse((f.memory_mb, f.cpu_millis)), n)
    });
    let mut per_class: HashMap<(Resources, Vec<usize>, Vec<u32>), usize> = HashMap::new();
    let mut extra = 0;
    for n in pool {
        if extra >= cap {
            break;
        }
        if !near(n) {
            continue;
        }
        let class = (
            cluster.nodes()[n].free,
            used_groups.iter().map(|&g| groups.set_of(g, n)).collect(),
            node_keys.iter().map(|&k| c.base[k][n]).collect(),
        );
        let seen = per_class.entry(class).or_insert(0);
        if *seen >= total {
            continue;
        }
        *seen += 1;
        chosen.push(n);
        extra += 1;
    }
    chosen.sort_unstable();
    chosen
}
