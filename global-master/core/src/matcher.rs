//! Megha's Algorithm 1 over one partition, under its historical name: AND the
//! partition's bit-vectors of the task's constraints and its availability bits, then
//! take the first surviving node with enough free resources. The stages now live in
//! [`crate::placement`] ([`crate::placement::filter`], [`crate::placement::fit`],
//! [`crate::placement::explain`]); this module re-exports what callers use.

pub use crate::placement::explain::eligible_counts;
pub use crate::placement::fit::{find_node, Match};
