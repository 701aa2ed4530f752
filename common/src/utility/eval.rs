//! A compiled utility tree ([`Utility`]) and its value for a job's placement: how
//! many of the job's tasks landed in each leaf's set (`counts`, one per leaf).
//!
//! Greedy placement needs more than the value: a task adds to every leaf whose set
//! holds its node, and `nCk` pays nothing until its `k`-th task, so the greedy step
//! ranks its candidate branches ([`Branch`]) by the *relaxed* utility, where every
//! `nCk` counts as `LnCk` and a barrier as the least of its child and `b`.

use crate::utility::set::BitExpr;
use crate::ConstraintSet;

/// A compiled leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledLeaf {
    pub set: BitExpr,
    pub k: u32,
    pub u: f64,
    /// `LnCk` (partial credit) rather than `nCk`.
    pub linear: bool,
    /// Where it came from (`utility.max[1]`).
    pub path: String,
}

/// A compiled operator node; leaves are indices into [`Utility::leaves`].
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Leaf(usize),
    Max(Vec<Node>),
    Min(Vec<Node>),
    Sum(Vec<Node>),
    Scale(f64, Box<Node>),
    Barrier(f64, Box<Node>),
}

/// One way to satisfy the tree better: the nodes of `set`, which are in the sets of
/// `leaves` (the AND of a `min`'s children's branches, or one leaf).
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    pub set: BitExpr,
    pub leaves: Vec<usize>,
    /// The tree paths of its leaves, joined by ` & `.
    pub label: String,
}

/// A job's compiled utility tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Utility {
    pub root: Node,
    pub leaves: Vec<CompiledLeaf>,
    pub branches: Vec<Branch>,
    /// Delay scheduling: the least `relax_after_s` of its leaves, in microseconds
    /// (`None`: no leaf waits; a task takes a lower branch at once).
    pub relax_after_us: Option<u64>,
    /// The least `relax_after_passes` of its leaves.
    pub relax_after_passes: Option<u32>,
}

impl Utility {
    /// The utility of a placement with `counts[i]` tasks in leaf `i`'s set.
    pub fn value(&self, counts: &[u32]) -> f64 {
        self.eval(&self.root, counts, false)
    }

    /// The relaxed utility (see the module doc), which ranks branches.
    pub fn relaxed(&self, counts: &[u32]) -> f64 {
        self.eval(&self.root, counts, true)
    }

    fn eval(&self, node: &Node, counts: &[u32], relaxed: bool) -> f64 {
        match node {
            Node::Leaf(i) => {
                let leaf = &self.leaves[*i];
                let n = counts.get(*i).copied().unwrap_or(0);
                if leaf.linear || relaxed {
                    leaf.u * f64::from(n.min(leaf.k)) / f64::from(leaf.k.max(1))
                } else if n >= leaf.k {
                    leaf.u
                } else {
                    0.0
                }
            }
            Node::Max(xs) => xs
                .iter()
                .map(|x| self.eval(x, counts, relaxed))
                .fold(0.0, f64::max),
            Node::Min(xs) => xs
                .iter()
                .map(|x| self.eval(x, counts, relaxed))
                .reduce(f64::min)
                .unwrap_or(0.0),
            Node::Sum(xs) => xs.iter().map(|x| self.eval(x, counts, relaxed)).sum(),
            Node::Scale(s, x) => s * self.eval(x, counts, relaxed),
            Node::Barrier(b, x) => {
                let v = self.eval(x, counts, relaxed);
                if relaxed {
                    v.min(*b)
                } else if v >= *b {
                    *b
                } else {
                    0.0
                }
            }
        }
    }

    /// A task landed on a node with attributes `node`: one more in every leaf whose
    /// set holds it.
    pub fn count(&self, node: ConstraintSet, counts: &mut Vec<u32>) {
        counts.resize(self.leaves.len(), 0);
        for (i, leaf) in self.leaves.iter().enumerate() {
            if leaf.set.holds(node) {
                counts[i] += 1;
            }
        }
    }

    /// A task counted on a node with attributes `node` did not land after all (its
    /// LM refused it): one less in every leaf whose set holds it.
    pub fn uncount(&self, node: ConstraintSet, counts: &mut [u32]) {
        for (i, leaf) in self.leaves.iter().enumerate() {
            if leaf.set.holds(node) {
                if let Some(c) = counts.get_mut(i) {
                    *c = c.saturating_sub(1);
                }
            }
        }
    }

    /// The branches worth taking for the next task, best first: each with its gain
    /// of relaxed utility (one more task in each of its leaves), only those that
    /// gain; ties keep the tree's order.
    pub fn ranked(&self, counts: &[u32]) -> Vec<(usize, f64)> {
        let base = self.relaxed(counts);
        let mut scratch = counts.to_vec();
        scratch.resize(self.leaves.len(), 0);
        let mut ranked: Vec<(usize, f64)> = self
            .branches
            .iter()
            .enumerate()
            .filter_map(|(b, branch)| {
                branch.leaves.iter().for_each(|&i| scratch[i] += 1);
                let gain = self.relaxed(&scratch) - base;
                branch.leaves.iter().for_each(|&i| scratch[i] -= 1);
                (gain > 1e-12).then_some((b, gain))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}
