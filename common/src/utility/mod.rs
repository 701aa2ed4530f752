//! alsched's soft constraints (Tumanov et al., SoCC 2012; issue 36): a job carries a
//! utility function built from primitives and operators, the scheduler places its
//! tasks to raise that utility, and a task takes a lower-utility branch instead of
//! waiting for a better one.
//!
//! - [`set`]: a leaf's set of nodes, a boolean expression over attributes, and its
//!   compiled form over constraint bits (per node, or 64 slots per raw word).
//! - [`tree`]: the JSON form of a tree ([`UtilityTree`]): `nCk`, `LnCk`, `max`,
//!   `min`, `sum`, `scale`, `barrier`, and the templates `prefer`, `same`, `spread`.
//! - [`compile`]: validation against the cluster's attribute names (a fault names
//!   the path of the bad node) and template expansion.
//! - [`eval`]: the compiled tree ([`Utility`]): its value for a placement, the
//!   relaxed value that ranks branches, and the branches of a greedy step.
//!
//! Hard constraints ([`crate::ConstraintSet`] on the task) are untouched and apply
//! first; a utility only orders the places a task may go.

pub mod compile;
pub mod eval;
pub mod set;
pub mod tree;

#[cfg(test)]
mod tests;

pub use compile::{compile, UtilityError};
pub use eval::{Branch, Utility};
pub use set::{BitExpr, SetExpr, SetOp};
pub use tree::{Leaf, UtilityTree};
