//! Algorithm 1 of the Megha paper: AND the partition's bit-vectors of the task's
//! constraints (on raw 64-bit words, which is ~25x faster than bitvec's `&=`), AND the
//! availability bits, then take the first surviving node with enough free resources.

use super::view::PartitionView;
use common::constraints::MAX_CONSTRAINTS;
use common::{ConstraintSet, Resources};

/// The result of matching one task against one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The slot of a node with the constraints and enough free resources.
    Found(usize),
    /// No node of the partition qualifies; nothing more is known.
    NotFound,
}

/// Scans one partition. `words` counts the 64-bit words examined (the processing-cost
/// model charges for them).
pub fn find_node(
    partition: &PartitionView,
    constraints: ConstraintSet,
    request: &Resources,
    words: &mut u64,
) -> Match {
    let mut rows: [&[u64]; MAX_CONSTRAINTS] = [&[]; MAX_CONSTRAINTS];
    let mut k = 0;
    for j in constraints.iter() {
        match partition.constraint_bits.get(j) {
            Some(bits) => {
                rows[k] = bits.as_raw_slice();
                k += 1;
            }
            // No node of this LM has constraint j at all.
            None => return Match::NotFound,
        }
    }
    let rows = &rows[..k];
    let available = partition.available.as_raw_slice();
    // The first node that fits only by killing QUEUEABLE work, if none fits without
    // (Mercury: GUARANTEED work reclaims QUEUEABLE room, but prefers not to).
    let mut reclaiming = None;
    for (w, &avail) in available.iter().enumerate() {
        *words += 1;
        let mut acc = avail;
        for row in rows {
            acc &= row[w];
        }
        while acc != 0 {
            let slot = w * 64 + acc.trailing_zeros() as usize;
            if partition.free[slot].fits(request) {
                let held = partition.q_held.get(slot).copied().unwrap_or_default();
                if held.is_zero() || partition.free[slot].saturating_sub(&held).fits(request) {
                    return Match::Found(slot);
                }
                reclaiming.get_or_insert(slot);
            }
            acc &= acc - 1;
        }
    }
    reclaiming.map_or(Match::NotFound, Match::Found)
}

/// How many nodes of the partition have the constraints (ignoring resources), and how
/// many of those could host `request` when empty. Used to explain a "no".
pub fn eligible_counts(
    partition: &PartitionView,
    constraints: ConstraintSet,
    request: &Resources,
) -> (u64, u64) {
    let n = partition.len();
    let mut with_constraints = 0;
    let mut large_enough = 0;
    for slot in 0..n {
        let ok = constraints
            .iter()
            .all(|j| partition.constraint_bits.get(j).is_some_and(|b| b[slot]));
        if ok {
            with_constraints += 1;
            if partition.capacity[slot].fits(request) {
                large_enough += 1;
            }
        }
    }
    (with_constraints, large_enough)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::LmView;
    use common::messages::LmTopology;
    use common::{GmId, LmId};
    use std::sync::Arc;

    /// One partition of `n` nodes; node i has constraint 0 when i is odd, constraint 1
    /// when i % 3 == 0; all have 2 cores.
    fn partition(n: usize) -> PartitionView {
        let topo = LmTopology {
            lm: LmId(0),
            gms: 1,
            home: vec![GmId(0); n],
            constraints: (0..n)
                .map(|i| {
                    let mut c = ConstraintSet::EMPTY;
                    if i % 2 == 1 {
                        c.insert(0);
                    }
                    if i % 3 == 0 {
                        c.insert(1);
                    }
                    c
                })
                .collect(),
            capacity: vec![Resources::cores(2, 100); n],
        };
        LmView::build(Arc::new(topo)).partitions.remove(0)
    }

    fn find(p: &PartitionView, ids: &[u64], cores: u64) -> Match {
        let mut words = 0;
        find_node(
            p,
            ConstraintSet::from_ids(ids.iter().copied()).unwrap(),
            &Resources::cores(cores, 1),
            &mut words,
        )
    }

    #[test]
    fn first_node_with_all_constraints_and_room() {
        let mut p = partition(200);
        assert_eq!(find(&p, &[], 1), Match::Found(0));
        assert_eq!(find(&p, &[0], 1), Match::Found(1));
        assert_eq!(find(&p, &[0, 1], 1), Match::Found(3));
        p.set_free(3, Resources::cores(1, 100));
        assert_eq!(find(&p, &[0, 1], 2), Match::Found(9));
        assert_eq!(find(&p, &[0, 1], 1), Match::Found(3));
        assert_eq!(find(&p, &[], 3), Match::NotFound);
    }

    #[test]
    fn crosses_word_boundaries_and_skips_full_nodes() {
        let mut p = partition(200);
        for slot in 0..150 {
            p.set_free(slot, Resources::ZERO);
        }
        // first odd multiple of 3 at or after 150
        assert_eq!(find(&p, &[0, 1], 1), Match::Found(153));
        assert_eq!(
            find(&p, &[5], 1),
            Match::NotFound,
            "no node has constraint 5"
        );
    }

    #[test]
    fn prefers_a_node_where_nothing_must_be_killed() {
        let mut p = partition(4);
        // Slot 0 is free only thanks to running QUEUEABLE work; slot 2 is truly free.
        p.q_held[0] = Resources::cores(2, 100);
        assert_eq!(find(&p, &[], 1), Match::Found(1));
        p.set_free(1, Resources::ZERO);
        p.set_free(2, Resources::ZERO);
        p.set_free(3, Resources::ZERO);
        assert_eq!(find(&p, &[], 1), Match::Found(0), "reclaims when it must");
    }

    #[test]
    fn eligible_counts_explain_the_no() {
        let p = partition(12);
        let c = ConstraintSet::from_ids([0, 1]).unwrap();
        assert_eq!(eligible_counts(&p, c, &Resources::cores(1, 1)), (2, 2));
        assert_eq!(eligible_counts(&p, c, &Resources::cores(3, 1)), (2, 0));
    }
}
