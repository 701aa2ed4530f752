//! Validation and compilation of a [`UtilityTree`] against a cluster's attribute
//! names: templates expand, names become bits, and every fault names the path of
//! the bad node (`utility.max[1].set: unknown attribute "gpux"`), which the job API
//! answers as a 400.

use crate::attributes::Attributes;
use crate::utility::eval::{Branch, CompiledLeaf, Node, Utility};
use crate::utility::set::{BitExpr, SetExpr, SetOp};
use crate::utility::tree::{Leaf, UtilityTree};

/// Branches a tree may have at most (a `min` multiplies its children's).
pub const MAX_BRANCHES: usize = 256;

/// A refused tree: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct UtilityError {
    pub path: String,
    pub reason: String,
}

fn refuse(path: &str, reason: impl Into<String>) -> UtilityError {
    UtilityError {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Compiles `tree` for a job of `tasks` tasks; `path` names its root (`utility`).
pub fn compile(
    tree: &UtilityTree,
    names: &Attributes,
    tasks: u32,
    path: &str,
) -> Result<Utility, UtilityError> {
    let mut c = Compiler {
        names,
        tasks: tasks.max(1),
        leaves: Vec::new(),
        relax_after_us: None,
        relax_after_passes: None,
    };
    let (root, branches) = c.node(tree, path)?;
    Ok(Utility {
        root,
        leaves: c.leaves,
        branches,
        relax_after_us: c.relax_after_us,
        relax_after_passes: c.relax_after_passes,
    })
}

/// The longest wait in passes a leaf may ask for.
pub const MAX_RELAX_PASSES: u32 = 1_000_000;

struct Compiler<'a> {
    names: &'a Attributes,
    tasks: u32,
    leaves: Vec<CompiledLeaf>,
    relax_after_us: Option<u64>,
    relax_after_passes: Option<u32>,
}

impl Compiler<'_> {
    fn node(
        &mut self,
        tree: &UtilityTree,
        path: &str,
    ) -> Result<(Node, Vec<Branch>), UtilityError> {
        match tree {
            UtilityTree::NCk(leaf) => self.leaf(leaf, false, &format!("{path}.nCk")),
            UtilityTree::LnCk(leaf) => self.leaf(leaf, true, &format!("{path}.LnCk")),
            UtilityTree::Max(xs) | UtilityTree::Sum(xs) => {
                let op = if matches!(tree, UtilityTree::Max(_)) {
                    "max"
                } else {
                    "sum"
                };
                let (nodes, branches) = self.children(xs, &format!("{path}.{op}"))?;
                let branches = branches.into_iter().flatten().collect();
                Ok(match tree {
                    UtilityTree::Max(_) => (Node::Max(nodes), branches),
                    _ => (Node::Sum(nodes), branches),
                })
            }
            UtilityTree::Min(xs) => {
                let at = format!("{path}.min");
                let (nodes, per_child) = self.children(xs, &at)?;
                // Every child must gain: the AND of one branch of each.
                let mut combos = vec![Branch {
                    set: BitExpr::All,
                    leaves: Vec::new(),
                    label: String::new(),
                }];
                for child in per_child {
                    let mut next = Vec::new();
                    for a in &combos {
                        for b in &child {
                            let mut leaves = a.leaves.clone();
                            leaves.extend(&b.leaves);
                            let label = if a.label.is_empty() {
                                b.label.clone()
                            } else {
                                format!("{} & {}", a.label, b.label)
                            };
                            next.push(Branch {
                                set: a.set.clone().and(b.set.clone()),
                                leaves,
                                label,
                            });
                        }
                    }
                    if next.len() > MAX_BRANCHES {
                        return Err(refuse(
                            &at,
                            format!("more than {MAX_BRANCHES} branches (a min multiplies its children's)"),
                        ));
                    }
                    combos = next;
                }
                Ok((Node::Min(nodes), combos))
            }
            UtilityTree::Scale { s, child } => {
                let at = format!("{path}.scale");
                if !(s.is_finite() && *s >= 0.0) {
                    return Err(refuse(
                        &format!("{at}.s"),
                        format!("{s} is not a finite number >= 0"),
                    ));
                }
                let (node, branches) = self.node(child, &format!("{at}.child"))?;
                Ok((Node::Scale(*s, Box::new(node)), branches))
            }
            UtilityTree::Barrier { b, child } => {
                let at = format!("{path}.barrier");
                if !(b.is_finite() && *b > 0.0) {
                    return Err(refuse(
                        &format!("{at}.b"),
                        format!("{b} is not a finite number > 0"),
                    ));
                }
                let (node, branches) = self.node(child, &format!("{at}.child"))?;
                Ok((Node::Barrier(*b, Box::new(node)), branches))
            }
            UtilityTree::Prefer {
                set,
                otherwise,
                relax_after_s,
                relax_after_passes,
            } => {
                let at = format!("{path}.prefer");
                self.relax(*relax_after_s, *relax_after_passes, &at)?;
                let first = Leaf {
                    set: set.clone(),
                    k: self.tasks,
                    u: 1.0,
                    relax_after_s: None,
                    relax_after_passes: None,
                };
                let Some(otherwise) = otherwise else {
                    return self.leaf_at(&first, true, &at, &format!("{at}.set"));
                };
                let second = Leaf {
                    set: SetExpr::Op(SetOp::And(vec![
                        otherwise.clone(),
                        SetExpr::Op(SetOp::Not(Box::new(set.clone()))),
                    ])),
                    k: self.tasks,
                    u: 0.5,
                    relax_after_s: None,
                    relax_after_passes: None,
                };
                let (a, mut branches) = self.leaf_at(&first, true, &at, &format!("{at}.set"))?;
                // The else set's own path (its NOT of `set` was checked just above).
                self.set(otherwise, &format!("{at}.else"))?;
                let (b, more) =
                    self.leaf_at(&second, true, &format!("{at}.else"), &format!("{at}.else"))?;
                branches.extend(more);
                Ok((Node::Sum(vec![a, b]), branches))
            }
            UtilityTree::Same { attr } => {
                let at = format!("{path}.same");
                let k = self.tasks;
                self.per_value(attr, &format!("{at}.attr"), k, 1.0, Node::Max)
            }
            UtilityTree::Spread { attr, k } => {
                let at = format!("{path}.spread");
                if *k == 0 {
                    return Err(refuse(&format!("{at}.k"), "k must be at least 1"));
                }
                let u = 1.0 / f64::from(*k);
                self.per_value(attr, &format!("{at}.attr"), 1, u, Node::Sum)
            }
        }
    }

    fn children(
        &mut self,
        xs: &[UtilityTree],
        at: &str,
    ) -> Result<(Vec<Node>, Vec<Vec<Branch>>), UtilityError> {
        if xs.is_empty() {
            return Err(refuse(at, "needs at least one child"));
        }
        let mut nodes = Vec::new();
        let mut branches = Vec::new();
        for (i, x) in xs.iter().enumerate() {
            let (n, b) = self.node(x, &format!("{at}[{i}]"))?;
            nodes.push(n);
            branches.push(b);
        }
        Ok((nodes, branches))
    }

    /// One leaf per value of `attr` (`rack=r0`, `rack=r1`...), combined by `op`.
    fn per_value(
        &mut self,
        attr: &str,
        at: &str,
        k: u32,
        u: f64,
        op: fn(Vec<Node>) -> Node,
    ) -> Result<(Node, Vec<Branch>), UtilityError> {
        let values: Vec<(String, usize)> = self
            .names
            .values(attr)
            .into_iter()
            .map(|(n, b)| (n.to_owned(), b))
            .collect();
        if values.is_empty() {
            return Err(refuse(
                at,
                format!("{attr:?} is not a multi-valued attribute (no {attr}=value is named)"),
            ));
        }
        let mut nodes = Vec::new();
        let mut branches = Vec::new();
        for (name, bit) in values {
            let i = self.leaves.len();
            let path = format!("{at}={}", name.split_once('=').map_or("", |(_, v)| v));
            self.leaves.push(CompiledLeaf {
                set: BitExpr::Bit(bit),
                k,
                u,
                linear: false,
                path: path.clone(),
            });
            nodes.push(Node::Leaf(i));
            branches.push(Branch {
                set: BitExpr::Bit(bit),
                leaves: vec![i],
                label: path,
            });
        }
        Ok((op(nodes), branches))
    }

    fn leaf(
        &mut self,
        leaf: &Leaf,
        linear: bool,
        at: &str,
    ) -> Result<(Node, Vec<Branch>), UtilityError> {
        if leaf.k == 0 {
            return Err(refuse(&format!("{at}.k"), "k must be at least 1"));
        }
        if leaf.k > self.tasks {
            return Err(refuse(
                &format!("{at}.k"),
                format!("k = {} is more than the job's {} tasks", leaf.k, self.tasks),
            ));
        }
        if !(leaf.u.is_finite() && leaf.u >= 0.0) {
            return Err(refuse(
                &format!("{at}.u"),
                format!("{} is not a finite number >= 0", leaf.u),
            ));
        }
        self.relax(leaf.relax_after_s, leaf.relax_after_passes, at)?;
        self.leaf_at(leaf, linear, at, &format!("{at}.set"))
    }

    /// A `relax_after_s` and a `relax_after_passes` at `at`: checked, and the tree's
    /// least of each kept.
    fn relax(
        &mut self,
        secs: Option<f64>,
        passes: Option<u32>,
        at: &str,
    ) -> Result<(), UtilityError> {
        if let Some(passes) = passes {
            if !(1..=MAX_RELAX_PASSES).contains(&passes) {
                return Err(refuse(
                    &format!("{at}.relax_after_passes"),
                    format!("{passes} is not a number of passes in 1..={MAX_RELAX_PASSES}"),
                ));
            }
            self.relax_after_passes =
                Some(self.relax_after_passes.map_or(passes, |p| p.min(passes)));
        }
        let Some(secs) = secs else {
            return Ok(());
        };
        if !(secs.is_finite() && (0.0..=1e9).contains(&secs)) {
            return Err(refuse(
                &format!("{at}.relax_after_s"),
                format!("{secs} is not a number of seconds in 0..=1e9"),
            ));
        }
        let us = (secs * 1e6).round() as u64;
        self.relax_after_us = Some(self.relax_after_us.map_or(us, |r| r.min(us)));
        Ok(())
    }

    fn leaf_at(
        &mut self,
        leaf: &Leaf,
        linear: bool,
        at: &str,
        set_at: &str,
    ) -> Result<(Node, Vec<Branch>), UtilityError> {
        let set = self.set(&leaf.set, set_at)?;
        let i = self.leaves.len();
        self.leaves.push(CompiledLeaf {
            set: set.clone(),
            k: leaf.k,
            u: leaf.u,
            linear,
            path: at.to_owned(),
        });
        let branch = Branch {
            set,
            leaves: vec![i],
            label: at.to_owned(),
        };
        Ok((Node::Leaf(i), vec![branch]))
    }

    fn set(&self, set: &SetExpr, at: &str) -> Result<BitExpr, UtilityError> {
        match set {
            SetExpr::Attr(name) => self
                .names
                .bit(name)
                .map(BitExpr::Bit)
                .ok_or_else(|| refuse(at, format!("unknown attribute {name:?}"))),
            SetExpr::Op(SetOp::Not(x)) => {
                Ok(BitExpr::Not(Box::new(self.set(x, &format!("{at}.not"))?)))
            }
            SetExpr::Op(SetOp::And(xs)) | SetExpr::Op(SetOp::Or(xs)) => {
                let and = matches!(set, SetExpr::Op(SetOp::And(_)));
                let op = if and { "and" } else { "or" };
                if xs.is_empty() {
                    return Err(refuse(&format!("{at}.{op}"), "needs at least one operand"));
                }
                let parts = xs
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.set(x, &format!("{at}.{op}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if and {
                    BitExpr::And(parts)
                } else {
                    BitExpr::Or(parts)
                })
            }
        }
    }
}
