//! The exact placement of a batch of jobs with utility trees (soft constraints,
//! alsched; docs/alsched.md), with the HiGHS backend the ILP placer uses: the
//! designated GM's option to the greedy per-task pass.
//!
//! Model, over the nodes a task's hard constraints and size allow:
//! - `x[t][n]` binary: task `t` runs on node `n`; each task at most once; per node
//!   and dimension, the tasks placed fit its free room.
//! - per leaf `l` of job `j`, the count `c_l` = tasks of `j` already counted in the
//!   leaf's set plus `Σ x[t][n]` over `j`'s tasks and the nodes in the set;
//!   `LnCk`: `v ≤ u c_l / k`, `v ≤ u`; `nCk`: `v = u y`, `k y ≤ c_l`, `y` binary.
//! - operators as upper bounds on a node's value `v` (every tree is monotone in
//!   the counts and the objective maximises, so each bound is tight): `sum`:
//!   `v ≤ Σ`; `scale(s)`: `v ≤ s child`; `min`: `v ≤` each child; `max`: one
//!   binary per child, their sum 1, `v ≤ child_i + B (1 - s_i)` with `B` the node's
//!   largest value; `barrier(b)`: `v = b z`, `b z ≤ child`, `z` binary.
//! - objective: the jobs' total utility, plus [`PLACED_WEIGHT`] per task placed
//!   (so that among placements of equal utility the one placing most tasks wins;
//!   small enough never to trade utility for it).
//!
//! Tasks the answer leaves out are placed by the greedy pass, as before.

use common::utility::eval::Node;
use common::utility::Utility;
use common::{ConstraintSet, Resources};
use good_lp::solvers::highs::highs;
use good_lp::{variable, Expression, ProblemVariables, Solution as _, Variable};

/// The objective's weight of one placed task (utility units).
pub const PLACED_WEIGHT: f64 = 1e-4;

/// A node a batch may use: its attributes and its free room in the GM's view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftNode {
    pub attributes: ConstraintSet,
    pub free: Resources,
}

/// A task to place: its size and hard constraints (a node must have them all).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftTask {
    pub resources: Resources,
    pub constraints: ConstraintSet,
}

/// A job of the batch: its tree, the tasks of it already counted per leaf (those
/// running), and its tasks to place now.
#[derive(Clone, Debug)]
pub struct SoftJob<'a> {
    pub utility: &'a Utility,
    pub counts: Vec<u32>,
    pub tasks: Vec<SoftTask>,
}

/// The answer: per job, per task, the node (index into the batch's nodes) or
/// `None`; and the batch's total utility once placed so.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftPlan {
    pub nodes: Vec<Vec<Option<usize>>>,
    pub utility: f64,
}

/// Solves the batch within `time_limit_ms`; an error (no answer in time, a solver
/// fault) says why, and the caller places the batch greedily.
pub fn solve(
    nodes: &[SoftNode],
    jobs: &[SoftJob<'_>],
    time_limit_ms: u64,
) -> Result<SoftPlan, String> {
    let mut vars = ProblemVariables::new();
    let mut rows: Vec<good_lp::Constraint> = Vec::new();
    let mut objective = Expression::default();
    // x[j][t]: (node, variable) for every node the task fits.
    let mut x: Vec<Vec<Vec<(usize, Variable)>>> = Vec::with_capacity(jobs.len());
    let mut per_node: Vec<Vec<(Resources, Variable)>> = vec![Vec::new(); nodes.len()];
    for job in jobs {
        let mut xj = Vec::with_capacity(job.tasks.len());
        for task in &job.tasks {
            let mut xt = Vec::new();
            for (n, node) in nodes.iter().enumerate() {
                if task.constraints.satisfied_by(node.attributes) && node.free.fits(&task.resources)
                {
                    let v = vars.add(variable().binary());
                    per_node[n].push((task.resources, v));
                    objective += PLACED_WEIGHT * v;
                    xt.push((n, v));
                }
            }
            if xt.len() > 1 {
                let once: Expression = xt.iter().map(|&(_, v)| Expression::from(v)).sum();
                rows.push(once.leq(1.0));
            }
            xj.push(xt);
        }
        x.push(xj);
    }
    for (n, placed) in per_node.iter().enumerate() {
        if placed.len() < 2 {
            continue;
        }
        let free = nodes[n].free;
        let cpu: Expression = placed.iter().map(|(r, v)| r.cpu_millis as f64 * *v).sum();
        let mem: Expression = placed.iter().map(|(r, v)| r.memory_mb as f64 * *v).sum();
        rows.push(cpu.leq(free.cpu_millis as f64));
        rows.push(mem.leq(free.memory_mb as f64));
    }
    for (j, job) in jobs.iter().enumerate() {
        let mut tree = Tree {
            utility: job.utility,
            nodes,
            counts: &job.counts,
            x: &x[j],
            most: job.tasks.len() as u32,
            vars: &mut vars,
            rows: &mut rows,
        };
        let root = tree.value(&job.utility.root);
        objective += root;
    }
    let model = highs(vars.maximise(objective))
        .set_time_limit(time_limit_ms as f64 / 1000.0)
        .set_threads(1)
        .set_option("random_seed", 0);
    let solution = crate::ilp_model::solve_with(model, rows)?;
    let mut utility = 0.0;
    let placed: Vec<Vec<Option<usize>>> = x
        .iter()
        .zip(jobs)
        .map(|(xj, job)| {
            let chosen: Vec<Option<usize>> = xj
                .iter()
                .map(|xt| {
                    xt.iter()
                        .find(|&&(_, v)| solution.value(v) > 0.5)
                        .map(|&(n, _)| n)
                })
                .collect();
            let mut counts = job.counts.clone();
            for n in chosen.iter().flatten() {
                job.utility.count(nodes[*n].attributes, &mut counts);
            }
            utility += job.utility.value(&counts);
            chosen
        })
        .collect();
    Ok(SoftPlan {
        nodes: placed,
        utility,
    })
}

/// One job's tree, built bottom-up into rows.
struct Tree<'a, 'b> {
    utility: &'a Utility,
    nodes: &'a [SoftNode],
    counts: &'a [u32],
    x: &'a [Vec<(usize, Variable)>],
    /// Tasks to place now (bounds the counts).
    most: u32,
    vars: &'b mut ProblemVariables,
    rows: &'b mut Vec<good_lp::Constraint>,
}

impl Tree<'_, '_> {
    /// The largest value `node` can take (every leaf's count at its most).
    fn bound(&self, node: &Node) -> f64 {
        let counts: Vec<u32> = (0..self.utility.leaves.len())
            .map(|i| self.counts.get(i).copied().unwrap_or(0) + self.most)
            .collect();
        let sub = Utility {
            root: node.clone(),
            ..self.utility.clone()
        };
        sub.value(&counts)
    }

    /// A variable for the value of `node`, bounded above by the rows it adds.
    fn value(&mut self, node: &Node) -> Variable {
        let v = self.vars.add(variable().min(0.0));
        if matches!(node, Node::Max(xs) | Node::Min(xs) | Node::Sum(xs) if xs.is_empty()) {
            // Worth nothing (as `Utility::value` has it).
            self.rows.push(Expression::from(v).leq(0.0));
            return v;
        }
        match node {
            Node::Leaf(i) => {
                let leaf = &self.utility.leaves[*i];
                let have = f64::from(self.counts.get(*i).copied().unwrap_or(0));
                let count: Expression = self
                    .x
                    .iter()
                    .flatten()
                    .filter(|(n, _)| leaf.set.holds(self.nodes[*n].attributes))
                    .map(|&(_, x)| Expression::from(x))
                    .sum::<Expression>()
                    + have;
                let k = f64::from(leaf.k.max(1));
                if leaf.linear {
                    self.rows.push((k * v).leq(leaf.u * count));
                    self.rows.push(Expression::from(v).leq(leaf.u));
                } else {
                    let y = self.vars.add(variable().binary());
                    self.rows.push((k * y).leq(count));
                    self.rows.push(Expression::from(v).leq(leaf.u * y));
                }
            }
            Node::Sum(xs) => {
                let sum: Expression = xs.iter().map(|c| Expression::from(self.value(c))).sum();
                self.rows.push(Expression::from(v).leq(sum));
            }
            Node::Scale(s, c) => {
                let child = self.value(c);
                self.rows.push(Expression::from(v).leq(*s * child));
            }
            Node::Min(xs) => {
                for c in xs {
                    let child = self.value(c);
                    self.rows.push(Expression::from(v).leq(child));
                }
            }
            Node::Max(xs) => {
                let big = self.bound(node);
                let mut pick = Expression::default();
                for c in xs {
                    let child = self.value(c);
                    let s = self.vars.add(variable().binary());
                    pick += s;
                    self.rows
                        .push(Expression::from(v).leq(child + big - big * s));
                }
                // Exactly one child is the max (none: the bounds would be loose).
                self.rows.push(pick.eq(1.0));
            }
            Node::Barrier(b, c) => {
                let child = self.value(c);
                let z = self.vars.add(variable().binary());
                self.rows.push((*b * z).leq(child));
                self.rows.push(Expression::from(v).leq(*b * z));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::attributes::Attributes;
    use common::utility::{compile, UtilityTree};

    /// Bits: gpu 0, ssd 1, rack=r0 2, rack=r1 3.
    fn names() -> Attributes {
        let mut a = Attributes::new();
        for (n, b) in [("gpu", 0), ("ssd", 1), ("rack=r0", 2), ("rack=r1", 3)] {
            a.name_bit(n, b).unwrap();
        }
        a
    }

    fn node(bits: &[u64], cores: u64) -> SoftNode {
        SoftNode {
            attributes: ConstraintSet::from_ids(bits.iter().copied()).unwrap(),
            free: Resources::cores(cores, 1024),
        }
    }

    /// Each case: nodes, then per job (tree, tasks, the task's hard bits), the best
    /// total utility (by hand) and the tasks placed.
    #[test]
    fn the_batch_gets_its_best_total_utility() {
        let one = |bits: &[u64]| node(bits, 1);
        let prefer = |set: &str| format!(r#"{{"prefer": {{"set": {set}}}}}"#);
        type Case<'a> = (
            &'a str,
            Vec<SoftNode>,
            Vec<(String, u32, Vec<u64>)>,
            f64,
            usize,
        );
        let cases: Vec<Case> = vec![
            (
                "the job that can go elsewhere leaves the GPU to the one that cannot",
                vec![one(&[0]), one(&[1])],
                vec![
                    (prefer(r#"{"or": ["gpu", "ssd"]}"#), 1, vec![]),
                    (prefer(r#""gpu""#), 1, vec![]),
                ],
                2.0,
                2,
            ),
            (
                "an nCk is worth its whole set",
                vec![one(&[0]), one(&[0]), node(&[], 2)],
                vec![
                    (r#"{"nCk": {"set": "gpu", "k": 2, "u": 1}}"#.into(), 2, vec![]),
                    (r#"{"LnCk": {"set": "gpu", "k": 1, "u": 0.5}}"#.into(), 1, vec![]),
                ],
                1.0,
                3,
            ),
            (
                "max takes the branch with room",
                vec![one(&[2]), node(&[3], 2)],
                vec![(
                    r#"{"max": [{"nCk": {"set": "rack=r0", "k": 2, "u": 1}}, {"nCk": {"set": "rack=r1", "k": 2, "u": 0.9}}]}"#.into(),
                    2,
                    vec![],
                )],
                0.9,
                2,
            ),
            (
                "a barrier pays once its child reaches it",
                vec![one(&[0]), one(&[1])],
                vec![(
                    r#"{"barrier": {"b": 2, "child": {"sum": [{"LnCk": {"set": "gpu", "k": 1, "u": 1.5}}, {"LnCk": {"set": "ssd", "k": 1, "u": 1.5}}]}}}"#.into(),
                    2,
                    vec![],
                )],
                2.0,
                2,
            ),
            (
                "min needs both, and scale weighs",
                vec![one(&[0]), one(&[0, 1])],
                vec![(
                    r#"{"scale": {"s": 3, "child": {"min": [{"prefer": {"set": "gpu"}}, {"prefer": {"set": "ssd"}}]}}}"#.into(),
                    1,
                    vec![],
                )],
                3.0,
                1,
            ),
            (
                "hard constraints apply first",
                vec![one(&[0]), one(&[1])],
                vec![(prefer(r#""gpu""#), 1, vec![1])],
                0.0,
                1,
            ),
        ];
        for (name, nodes, jobs, best, placed) in cases {
            let utilities: Vec<Utility> = jobs
                .iter()
                .map(|(json, n, _)| {
                    let t: UtilityTree = serde_json::from_str(json).unwrap();
                    compile(&t, &names(), *n, "utility").unwrap()
                })
                .collect();
            let batch: Vec<SoftJob> = jobs
                .iter()
                .zip(&utilities)
                .map(|((_, n, hard), utility)| SoftJob {
                    utility,
                    counts: vec![0; utility.leaves.len()],
                    tasks: vec![
                        SoftTask {
                            resources: Resources::cores(1, 1),
                            constraints: ConstraintSet::from_ids(hard.iter().copied()).unwrap(),
                        };
                        *n as usize
                    ],
                })
                .collect();
            let plan = solve(&nodes, &batch, 5_000).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!((plan.utility - best).abs() < 1e-9, "{name}: {plan:?}");
            let got = plan.nodes.iter().flatten().flatten().count();
            assert_eq!(got, placed, "{name}: {plan:?}");
            // Never over a node's room.
            let mut used = vec![0u64; nodes.len()];
            for n in plan.nodes.iter().flatten().flatten() {
                used[*n] += 1000;
            }
            for (n, node) in nodes.iter().enumerate() {
                assert!(used[n] <= node.free.cpu_millis, "{name}: node {n} over");
            }
        }
    }
}
