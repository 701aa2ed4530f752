//! The MEDEA Figure 5 model for one scheduling interval, built over the candidate
//! nodes chosen by [`super::ilp`], warm-started from the heuristic answer and
//! solved by HiGHS under a time cap. Rows, per reason:
//! - `Σ_n X[i][j][n] = S[i]`: every container of a placed LRA exactly once, none of
//!   an unplaced one (all-or-nothing);
//! - per node and dimension `Σ r·X + rmin·z ≤ free`: capacity, and `z = 1` only when
//!   at least `rmin` stays free (fragmentation);
//! - per subject container, tag constraint and node set `S` it may land in, with
//!   `P = Σ_{n∈S} X` and `count` the other matching containers in `S`:
//!   `count + base ≥ min·(P − relax)` and `count + base ≤ max + M·(1 − P) + M·relax`,
//!   where `relax` is the violation binary (or `1 − q` for DNF clause `q`, with
//!   `Σ q + y ≥ 1`);
//! - running containers' constraints, grouped when identical, with `P = 1`.

use super::compiled::{Compiled, Item, Rule, UNBOUNDED};
use super::metrics::subject_pairs;
use super::metrics::Score;
use super::model::ClusterState;
use super::problem::NotPlaced;
use super::problem::Problem;
use common::Resources;
use good_lp::solvers::highs::highs;
use good_lp::{
    variable, Expression, ProblemVariables, ResolutionError, Solution as _, SolverModel, Variable,
    WithInitialSolution,
};
use std::collections::{BTreeMap, HashMap};

/// Knobs of the ILP placer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IlpConfig {
    /// Solver time cap per scheduling interval; 0 skips the solver (heuristic answer).
    pub time_limit_ms: u64,
    /// At most this many candidate nodes beyond those the heuristics used.
    pub max_candidate_nodes: usize,
    /// Relative optimality gap at which HiGHS may stop.
    pub mip_rel_gap: f32,
}

impl Default for IlpConfig {
    fn default() -> Self {
        IlpConfig {
            time_limit_ms: 200,
            max_candidate_nodes: 48,
            mip_rel_gap: 0.001,
        }
    }
}

/// The placer's answer: per LRA and container, its node (or none and why), and
/// its score.
pub(crate) struct Answer {
    pub at: Vec<Vec<Option<usize>>>,
    pub reasons: Vec<Option<NotPlaced>>,
    pub score: Score,
}

/// Per node set: the (LRA, container, variable) triples that count there.
type Contributors = HashMap<usize, Vec<(usize, usize, Variable)>>;

/// Variables of one subject's (or group of running subjects') violation.
struct Relax {
    y: Variable,
    /// One binary per clause for compound constraints; empty otherwise.
    q: Vec<Variable>,
}

impl Relax {
    fn clause(&self, k: usize) -> Expression {
        match self.q.get(k) {
            Some(q) => Expression::from_other_affine(1.0) - *q,
            None => Expression::from_other_affine(self.y),
        }
    }
}

fn new_relax(
    vars: &mut ProblemVariables,
    clauses: usize,
    rows: &mut Vec<good_lp::Constraint>,
) -> Relax {
    let y = vars.add(variable().binary());
    let q: Vec<Variable> = if clauses > 1 {
        (0..clauses)
            .map(|_| vars.add(variable().binary()))
            .collect()
    } else {
        Vec::new()
    };
    if !q.is_empty() {
        let sum: Expression = q
            .iter()
            .copied()
            .map(Expression::from_other_affine)
            .sum::<Expression>()
            + y;
        rows.push(sum.geq(Expression::from_other_affine(1.0)));
    }
    Relax { y, q }
}

pub(crate) fn solve_model(
    c: &Compiled,
    problem: &Problem<'_>,
    start: &Answer,
    candidates: &[usize],
    rmin: &Resources,
    config: &IlpConfig,
) -> Result<Vec<Vec<Option<usize>>>, String> {
    let cluster = problem.cluster;
    let groups = cluster.groups();
    let w = problem.weights;
    let nodes = cluster.nodes();
    let mut vars = ProblemVariables::new();
    let mut rows: Vec<good_lp::Constraint> = Vec::new();
    let mut init: Vec<(Variable, f64)> = Vec::new();
    let mut objective = Expression::default();
    let k_norm = c.new.len().max(1) as f64;
    let m_norm = subject_pairs(c) as f64;
    let n_norm = nodes.len().max(1) as f64;

    // X and S.
    let mut x: Vec<Vec<Vec<(usize, Variable)>>> = Vec::new();
    let mut s: Vec<Option<Variable>> = Vec::new();
    for (i, items) in c.new.iter().enumerate() {
        let per: Vec<Vec<usize>> = items
            .iter()
            .map(|it| {
                candidates
                    .iter()
                    .copied()
                    .filter(|&n| nodes[n].free.fits(&it.resources))
                    .collect()
            })
            .collect();
        if per.iter().any(Vec::is_empty) {
            x.push(vec![Vec::new(); items.len()]);
            s.push(None);
            continue;
        }
        let placed = start.at[i].iter().all(Option::is_some) && !start.at[i].is_empty();
        let si = vars.add(variable().binary());
        init.push((si, f64::from(u8::from(placed))));
        objective += w.placed / k_norm * si;
        let mut xi = Vec::new();
        for (j, cand) in per.iter().enumerate() {
            let xs: Vec<(usize, Variable)> = cand
                .iter()
                .map(|&n| (n, vars.add(variable().binary())))
                .collect();
            for &(n, v) in &xs {
                init.push((v, f64::from(u8::from(placed && start.at[i][j] == Some(n)))));
            }
            let sum: Expression = xs
                .iter()
                .map(|&(_, v)| Expression::from_other_affine(v))
                .sum();
            rows.push((sum - si).eq(Expression::default()));
            xi.push(xs);
        }
        x.push(xi);
        s.push(Some(si));
    }

    // Capacity and fragmentation per candidate node.
    let mut used: BTreeMap<usize, (Expression, Expression)> = BTreeMap::new();
    for (i, xi) in x.iter().enumerate() {
        for (j, xs) in xi.iter().enumerate() {
            let r = c.new[i][j].resources;
            for &(n, v) in xs {
                let e = used.entry(n).or_default();
                e.0.add_mul(r.cpu_millis as f64, v);
                e.1.add_mul(r.memory_mb as f64, v);
            }
        }
    }
    let mut start_free: Vec<Resources> = nodes.iter().map(|n| n.free).collect();
    for (i, at) in start.at.iter().enumerate() {
        if at.iter().all(Option::is_some) {
            for (j, n) in at.iter().enumerate() {
                if let Some(n) = n {
                    start_free[*n] = start_free[*n].saturating_sub(&c.new[i][j].resources);
                }
            }
        }
    }
    let balance = (w.load_balance > 0.0).then(|| vars.add(variable().min(0.0).max(1.0)));
    if let Some(u) = balance {
        objective -= w.load_balance * u;
    }
    for (&n, (cpu, mem)) in &used {
        let free = nodes[n].free;
        if w.fragmentation > 0.0 && free.fits(rmin) && !rmin.is_zero() {
            let z = vars.add(variable().binary());
            init.push((z, f64::from(u8::from(start_free[n].fits(rmin)))));
            objective += w.fragmentation / n_norm * z;
            rows.push((cpu.clone() + rmin.cpu_millis as f64 * z).leq(free.cpu_millis as f64));
            rows.push((mem.clone() + rmin.memory_mb as f64 * z).leq(free.memory_mb as f64));
        } else {
            rows.push(cpu.clone().leq(free.cpu_millis as f64));
            rows.push(mem.clone().leq(free.memory_mb as f64));
        }
        if let Some(u) = balance {
            let cap = nodes[n].capacity.memory_mb.max(1) as f64;
            let base = (nodes[n].capacity.memory_mb - free.memory_mb) as f64;
            rows.push((mem.clone() * (1.0 / cap) - u).leq(-base / cap));
        }
    }

    // Who counts for each key in each node set.
    let mut contrib: Vec<Contributors> = vec![HashMap::new(); c.keys.len()];
    for (i, xi) in x.iter().enumerate() {
        for (j, xs) in xi.iter().enumerate() {
            for &p in &c.new[i][j].matches {
                for &k in &c.keys_by_pattern[p] {
                    for &(n, v) in xs {
                        contrib[k]
                            .entry(groups.set_of(c.keys[k].group, n))
                            .or_default()
                            .push((i, j, v));
                    }
                }
            }
        }
    }
    // Counts under the warm start, to set the violation variables consistently.
    let mut start_counts = c.base.clone();
    for (i, at) in start.at.iter().enumerate() {
        if at.iter().all(Option::is_some) {
            for (j, n) in at.iter().enumerate() {
                if let Some(n) = n {
                    c.count(cluster, &mut start_counts, &c.new[i][j], *n, true);
                }
            }
        }
    }

    // New subjects: rows per (rule, clause atom, node set the subject may land in).
    for (i, xi) in x.iter().enumerate() {
        for (j, xs) in xi.iter().enumerate() {
            let item = &c.new[i][j];
            for &p in &item.matches {
                for &r in &c.rules_by_subject[p] {
                    let rule = &c.rules[r];
                    let relax = new_relax(&mut vars, rule.clauses.len(), &mut rows);
                    objective -= w.violations * rule.weight / m_norm * relax.y;
                    let at = start.at[i][j].filter(|_| start.at[i].iter().all(Option::is_some));
                    set_start(c, cluster, &start_counts, item, at, rule, &relax, &mut init);
                    for (cl, atoms) in rule.clauses.iter().enumerate() {
                        for &a in atoms {
                            let atom = c.atoms[a];
                            let key = c.keys[atom.key];
                            let mut by_set: BTreeMap<usize, Expression> = BTreeMap::new();
                            for &(n, v) in xs {
                                *by_set.entry(groups.set_of(key.group, n)).or_default() += v;
                            }
                            for (set, placed_here) in by_set {
                                let others: Vec<Variable> = contrib[atom.key]
                                    .get(&set)
                                    .map(|l| {
                                        l.iter()
                                            .filter(|&&(a2, b2, _)| (a2, b2) != (i, j))
                                            .map(|&(_, _, v)| v)
                                            .collect()
                                    })
                                    .unwrap_or_default();
                                let count: Expression = others
                                    .iter()
                                    .map(|&v| Expression::from_other_affine(v))
                                    .sum();
                                let base = f64::from(c.base[atom.key][set]);
                                let min = f64::from(atom.min);
                                if atom.min > 0 && base < min {
                                    let lhs = count.clone() - min * placed_here.clone()
                                        + min * relax.clause(cl);
                                    rows.push(lhs.geq(Expression::from_other_affine(-base)));
                                }
                                if atom.max != UNBOUNDED {
                                    let big = base + others.len() as f64 - f64::from(atom.max);
                                    if big > 0.0 {
                                        let lhs = count + big * placed_here.clone()
                                            - big * relax.clause(cl);
                                        rows.push(lhs.leq(f64::from(atom.max) - base + big));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    // Running subjects whose node sets the batch may reach, grouped when identical.
    let mut running: BTreeMap<(usize, usize, &[usize]), (usize, &Item)> = BTreeMap::new();
    for (node, item) in &c.deployed {
        for &p in &item.matches {
            for &r in &c.rules_by_subject[p] {
                let reached = c.rules[r].clauses.iter().flatten().any(|&a| {
                    let k = c.atoms[a].key;
                    contrib[k].contains_key(&groups.set_of(c.keys[k].group, *node))
                });
                if reached {
                    running
                        .entry((r, *node, item.matches.as_slice()))
                        .or_insert((0, item))
                        .0 += 1;
                }
            }
        }
    }
    for ((r, node, _), (mult, item)) in running {
        let rule = &c.rules[r];
        let relax = new_relax(&mut vars, rule.clauses.len(), &mut rows);
        objective -= w.violations * rule.weight * mult as f64 / m_norm * relax.y;
        set_start(
            c,
            cluster,
            &start_counts,
            item,
            Some(node),
            rule,
            &relax,
            &mut init,
        );
        for (cl, atoms) in rule.clauses.iter().enumerate() {
            for &a in atoms {
                let atom = c.atoms[a];
                let key = c.keys[atom.key];
                let set = groups.set_of(key.group, node);
                let others: Vec<Variable> = contrib[atom.key]
                    .get(&set)
                    .map(|l| l.iter().map(|&(_, _, v)| v).collect())
                    .unwrap_or_default();
                let count: Expression = others
                    .iter()
                    .map(|&v| Expression::from_other_affine(v))
                    .sum();
                let base = f64::from(c.base[atom.key][set])
                    - f64::from(u8::from(item.matches(key.pattern)));
                let min = f64::from(atom.min);
                if base < min {
                    rows.push(
                        (count.clone() + min * relax.clause(cl))
                            .geq(Expression::from_other_affine(min - base)),
                    );
                }
                if atom.max != UNBOUNDED {
                    let big = base + others.len() as f64 - f64::from(atom.max);
                    if big > 0.0 {
                        rows.push((count - big * relax.clause(cl)).leq(f64::from(atom.max) - base));
                    }
                }
            }
        }
    }

    if s.iter().all(Option::is_none) {
        return Err("no application can be placed: nothing for the solver to decide".into());
    }
    let model = highs(vars.maximise(objective))
        .set_time_limit(config.time_limit_ms as f64 / 1000.0)
        .set_threads(1)
        .set_option("random_seed", 0)
        .set_option("mip_rel_gap", f64::from(config.mip_rel_gap))
        .with_initial_solution(init);
    let solution = solve_with(model, rows)?;
    Ok(x.iter()
        .zip(&s)
        .map(|(xi, si)| match si {
            Some(si) if solution.value(*si) > 0.5 => xi
                .iter()
                .map(|xs| {
                    xs.iter()
                        .find(|&&(_, v)| solution.value(v) > 0.5)
                        .map(|&(n, _)| n)
                })
                .collect(),
            _ => vec![None; xi.len()],
        })
        .collect())
}

/// Sets the violation variables of one subject to what the warm start yields.
#[allow(clippy::too_many_arguments)]
fn set_start(
    c: &Compiled,
    cluster: &ClusterState,
    counts: &[Vec<u32>],
    item: &Item,
    node: Option<usize>,
    rule: &Rule,
    relax: &Relax,
    init: &mut Vec<(Variable, f64)>,
) {
    let holds: Vec<bool> = match node {
        Some(n) => rule
            .clauses
            .iter()
            .map(|cl| {
                cl.iter()
                    .all(|&a| c.atom_holds(cluster, counts, item, n, a))
            })
            .collect(),
        None => {
            let mut v = vec![false; rule.clauses.len()];
            if let Some(first) = v.first_mut() {
                *first = true;
            }
            v
        }
    };
    let any = holds.iter().any(|&h| h);
    init.push((relax.y, f64::from(u8::from(!any))));
    for (q, h) in relax.q.iter().zip(&holds) {
        init.push((*q, f64::from(u8::from(*h))));
    }
}

/// Adds `rows` to `model` and solves it: the LRA placer's and the soft-constraint
/// batch's one way to call HiGHS, whose panics and failures become messages.
pub(crate) fn solve_with(
    mut model: good_lp::solvers::highs::HighsProblem,
    rows: Vec<good_lp::Constraint>,
) -> Result<good_lp::solvers::highs::HighsSolution, String> {
    for row in rows {
        model.add_constraint(row);
    }
    // The HiGHS bindings panic on some solver error codes; keep that from escaping.
    let solved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.solve()))
        .map_err(|_| "solver raised an internal error".to_string())?;
    solved.map_err(|e| match e {
        ResolutionError::Other(what) => format!("solver gave no answer in time ({what})"),
        other => format!("solver failed: {other}"),
    })
}
