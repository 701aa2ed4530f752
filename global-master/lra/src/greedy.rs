//! The one-container-at-a-time placement state shared by the heuristic placers:
//! free resources and per-node-set tag counts, the cost of putting a container on a
//! node, and all-or-nothing bookkeeping per LRA.

use super::compiled::{Compiled, UNBOUNDED};
use super::model::ClusterState;
use super::problem::{LraOutcome, NotPlaced, Problem, Solution};
use common::{NodeId, Resources};

/// Which constraint terms a cost looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Terms {
    /// Every constraint (MEDEA heuristics).
    All,
    /// Affinity and anti-affinity only, as Kubernetes (J-KUBE) understands them.
    AffinityOnly,
}

pub(crate) struct Greedy<'a> {
    pub c: &'a Compiled,
    pub cluster: &'a ClusterState,
    pub free: Vec<Resources>,
    counts: Vec<Vec<u32>>,
    totals: Vec<u32>,
    /// Unplaced containers of the batch matching each pattern.
    unplaced: Vec<u32>,
    pub at: Vec<Vec<Option<usize>>>,
    pub failed: Vec<Option<NotPlaced>>,
}

impl<'a> Greedy<'a> {
    pub fn new(c: &'a Compiled, cluster: &'a ClusterState) -> Self {
        let mut unplaced = vec![0; c.patterns.len()];
        for item in c.new.iter().flatten() {
            for &p in &item.matches {
                unplaced[p] += 1;
            }
        }
        let totals = c.base.iter().map(|sets| sets.iter().sum()).collect();
        Greedy {
            c,
            cluster,
            free: cluster.nodes().iter().map(|n| n.free).collect(),
            counts: c.base.clone(),
            totals,
            unplaced,
            at: c.new.iter().map(|l| vec![None; l.len()]).collect(),
            failed: vec![None; c.new.len()],
        }
    }

    pub fn fits(&self, i: usize, j: usize, node: usize) -> bool {
        self.free[node].fits(&self.c.new[i][j].resources)
    }

    fn apply(&mut self, i: usize, j: usize, node: usize, add: bool) {
        let item = &self.c.new[i][j];
        self.c
            .count(self.cluster, &mut self.counts, item, node, add);
        for &p in &item.matches {
            for &k in &self.c.keys_by_pattern[p] {
                self.totals[k] = if add {
                    self.totals[k] + 1
                } else {
                    self.totals[k].saturating_sub(1)
                };
            }
            self.unplaced[p] = if add {
                self.unplaced[p].saturating_sub(1)
            } else {
                self.unplaced[p] + 1
            };
        }
        let r = item.resources;
        self.free[node] = if add {
            self.free[node].saturating_sub(&r)
        } else {
            self.free[node].add(&r)
        };
    }

    pub fn place(&mut self, i: usize, j: usize, node: usize) {
        self.apply(i, j, node, true);
        self.at[i][j] = Some(node);
    }

    /// Takes back every placed container of LRA `i` and records why it failed.
    pub fn fail(&mut self, i: usize, reason: NotPlaced) {
        for j in 0..self.at[i].len() {
            if let Some(node) = self.at[i][j].take() {
                self.apply(i, j, node, false);
            }
        }
        self.failed[i] = Some(reason);
    }

    /// Why container (i, j) fits nowhere now.
    pub fn no_fit_reason(&self, i: usize, j: usize) -> NotPlaced {
        let resources = self.c.new[i][j].resources;
        if self.cluster.nodes().iter().any(|n| n.free.fits(&resources)) {
            NotPlaced::NoRoomLeft { container: j }
        } else {
            NotPlaced::NoNodeFits {
                container: j,
                resources,
            }
        }
    }

    /// The weight of the constraints container (i, j) would violate on `node`, given
    /// what is placed so far, and a smaller penalty for lower bounds not met yet that
    /// the batch's waiting containers could still meet (the fewer missing, the
    /// smaller: affinity groups gather in the node set where they started).
    pub fn own_cost(&self, i: usize, j: usize, node: usize, terms: Terms) -> (f64, f64) {
        let item = &self.c.new[i][j];
        let groups = self.cluster.groups();
        let (mut violated, mut pending) = (0.0, 0.0);
        for &p in &item.matches {
            for &r in &self.c.rules_by_subject[p] {
                let rule = &self.c.rules[r];
                let mut best_clause: Option<f64> = None;
                for cl in &rule.clauses {
                    let mut shortfall = Some(0.0);
                    for &a in cl {
                        let atom = self.c.atoms[a];
                        if terms == Terms::AffinityOnly && !atom.is_affinity_like() {
                            continue;
                        }
                        let key = self.c.keys[atom.key];
                        let count = self.counts[atom.key][groups.set_of(key.group, node)];
                        let waiting = self.unplaced[key.pattern]
                            .saturating_sub(u32::from(item.matches(key.pattern)));
                        if count > atom.max || count + waiting < atom.min {
                            shortfall = None;
                            break;
                        }
                        if count < atom.min {
                            let missing = f64::from(atom.min - count) / f64::from(atom.min);
                            shortfall = shortfall.map(|s| s + 0.5 * missing);
                        }
                    }
                    if let Some(s) = shortfall {
                        best_clause = Some(best_clause.map_or(s, |b: f64| b.min(s)));
                    }
                }
                match best_clause {
                    Some(s) => pending += rule.weight * s.min(0.9),
                    None => violated += rule.weight,
                }
            }
        }
        (violated, pending)
    }

    /// The change in violated weight that container (i, j) on `node` causes to the
    /// containers already there (single-clause constraints; subjects are assumed to
    /// be counted by the target tag when the target tags are among theirs).
    pub fn caused_cost(&self, i: usize, j: usize, node: usize, terms: Terms) -> f64 {
        let item = &self.c.new[i][j];
        let groups = self.cluster.groups();
        let mut cost = 0.0;
        for &p in &item.matches {
            for &k in &self.c.keys_by_pattern[p] {
                let set = groups.set_of(self.c.keys[k].group, node);
                for &a in &self.c.atoms_by_key[k] {
                    let atom = self.c.atoms[a];
                    let rule = &self.c.rules[atom.rule];
                    if rule.clauses.len() != 1
                        || (terms == Terms::AffinityOnly && !atom.is_affinity_like())
                    {
                        continue;
                    }
                    let subjects = self.counts[atom.subject_key][set];
                    if subjects == 0 {
                        continue;
                    }
                    let self_counted =
                        self.c.patterns[p].is_subset_of(&self.c.patterns[rule.subject]);
                    let before = self.counts[k][set].saturating_sub(u32::from(self_counted));
                    if atom.max != UNBOUNDED && before == atom.max {
                        cost += rule.weight * f64::from(subjects);
                    } else if before + 1 == atom.min {
                        cost -= rule.weight * f64::from(subjects);
                    }
                }
            }
        }
        cost
    }

    /// The node with the lowest cost for container (i, j); ties go to the node with
    /// the most free memory, then CPU, then the lowest index. `None` when nothing fits.
    pub fn best_node(&self, i: usize, j: usize, terms: Terms) -> Option<usize> {
        let mut best: Option<(f64, Resources, usize)> = None;
        for node in 0..self.free.len() {
            if !self.fits(i, j, node) {
                continue;
            }
            let (violated, pending) = self.own_cost(i, j, node, terms);
            let cost = violated + pending + self.caused_cost(i, j, node, terms);
            let free = self.free[node];
            let better = match best {
                None => true,
                Some((bc, bf, _)) => {
                    cost < bc - 1e-9
                        || ((cost - bc).abs() <= 1e-9
                            && (free.memory_mb, free.cpu_millis) > (bf.memory_mb, bf.cpu_millis))
                }
            };
            if better {
                best = Some((cost, free, node));
            }
        }
        best.map(|(_, _, n)| n)
    }

    /// The solution as it stands: LRAs with every container placed, others failed.
    pub fn into_solution(self, problem: &Problem<'_>, placer: &'static str) -> Solution {
        let outcomes = problem
            .lras
            .iter()
            .enumerate()
            .map(|(i, lra)| {
                let outcome = match (
                    &self.failed[i],
                    self.at[i].iter().copied().collect::<Option<Vec<_>>>(),
                ) {
                    (None, Some(nodes)) => {
                        LraOutcome::Placed(nodes.into_iter().map(|n| NodeId(n as u32)).collect())
                    }
                    (Some(reason), _) => LraOutcome::NotPlaced(reason.clone()),
                    (None, None) => LraOutcome::NotPlaced(NotPlaced::NoRoomLeft { container: 0 }),
                };
                (lra.id, outcome)
            })
            .collect();
        Solution {
            placer,
            outcomes,
            fallback: None,
        }
    }
}
