//! Placement of one task as a pipeline of named stages, in the style of Nomad's
//! feasibility -> rank -> select and kube-scheduler's extension points:
//!
//! - [`select`]: the candidate partitions in order (Megha: this GM's own partitions
//!   round-robin across LMs, then the other GMs' round-robin, a repartition).
//! - [`filter`]: Megha's Algorithm 1, the AND of the partition's constraint and
//!   availability bit-vectors, word by word.
//! - [`fit`]: the first surviving node with enough free resources.
//! - [`explain`]: when nothing fits, why: no node with the constraints, none large
//!   enough (the task is unplaceable), or no free resources now.

pub mod explain;
pub mod filter;
pub mod fit;
pub mod select;

#[cfg(test)]
mod fixtures;
