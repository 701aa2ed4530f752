//! Placement constraints (Megha section IV-B, after Sharma et al.).
//!
//! A machine *has* a set of constraints; a task *requires* a set; the task fits the
//! machine when its set is a subset of the machine's. Constraints are numbered
//! `0..MAX_CONSTRAINTS`; the Megha model uses 21 of them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How many distinct constraints a set can hold.
pub const MAX_CONSTRAINTS: usize = 64;

/// The number of constraints of the Megha / Sharma model.
pub const MEGHA_CONSTRAINTS: usize = 21;

/// A set of constraint ids, one bit each.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ConstraintSet(pub u64);

/// A constraint id outside `0..MAX_CONSTRAINTS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("constraint id {0} is out of range (ids are 0..{MAX_CONSTRAINTS})")]
pub struct ConstraintOutOfRange(pub u64);

impl ConstraintSet {
    pub const EMPTY: ConstraintSet = ConstraintSet(0);

    pub fn from_ids<I: IntoIterator<Item = u64>>(ids: I) -> Result<Self, ConstraintOutOfRange> {
        let mut bits = 0u64;
        for id in ids {
            if id >= MAX_CONSTRAINTS as u64 {
                return Err(ConstraintOutOfRange(id));
            }
            bits |= 1 << id;
        }
        Ok(ConstraintSet(bits))
    }

    pub fn insert(&mut self, id: usize) {
        debug_assert!(id < MAX_CONSTRAINTS);
        self.0 |= 1 << id;
    }

    pub fn contains(&self, id: usize) -> bool {
        id < MAX_CONSTRAINTS && self.0 & (1 << id) != 0
    }

    /// True when a machine with constraints `machine` satisfies every constraint here.
    #[inline]
    pub fn satisfied_by(&self, machine: ConstraintSet) -> bool {
        self.0 & !machine.0 == 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let id = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(id)
        })
    }

    /// The highest id in the set plus one (0 for the empty set).
    pub fn width(&self) -> usize {
        MAX_CONSTRAINTS - self.0.leading_zeros() as usize
    }
}

impl fmt::Display for ConstraintSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.iter().map(|i| i.to_string()).collect();
        write!(f, "{{{}}}", ids.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_semantics() {
        let task = ConstraintSet::from_ids([1, 4]).unwrap();
        assert!(task.satisfied_by(ConstraintSet::from_ids([1, 2, 4]).unwrap()));
        assert!(!task.satisfied_by(ConstraintSet::from_ids([1, 2]).unwrap()));
        assert!(ConstraintSet::EMPTY.satisfied_by(ConstraintSet::EMPTY));
    }

    #[test]
    fn out_of_range_ids_are_refused() {
        assert_eq!(
            ConstraintSet::from_ids([3, 64]),
            Err(ConstraintOutOfRange(64))
        );
    }

    #[test]
    fn iterates_in_order() {
        let set = ConstraintSet::from_ids([20, 0, 7]).unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 7, 20]);
        assert_eq!(set.width(), 21);
        assert_eq!(set.to_string(), "{0,7,20}");
    }
}
