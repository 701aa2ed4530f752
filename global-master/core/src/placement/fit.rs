//! Stage 3, the resource fit: among the slots the constraint filter lets through,
//! the first (in slot order) with enough free resources for the request.
//!
//! Mercury lets GUARANTEED work reclaim room held by running QUEUEABLE work, but it
//! prefers not to: a slot that fits only by killing QUEUEABLE work is remembered and
//! taken only if no slot fits without.

use super::filter::Filter;
use crate::view::PartitionView;
use common::{ConstraintSet, Resources};

/// The result of matching one task against one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The slot of a node with the constraints and enough free resources.
    Found(usize),
    /// No node of the partition qualifies; nothing more is known.
    NotFound,
}

/// Filter then fit over one partition: Megha's Algorithm 1 for one partition.
/// `words` counts the 64-bit words examined (the processing-cost model charges for
/// them).
///
/// Most partitions of an overloaded view have nothing free in most of their words:
/// the walk reads a constraint row only for a word with an available slot, and stops
/// ANDing rows as soon as the word is empty (no filter is built). It examines the
/// same slots in the same order as [`first_fit`] over a [`Filter`], and counts the
/// same words: up to the one holding the slot found free, or all of them.
pub fn find_node(
    partition: &PartitionView,
    constraints: ConstraintSet,
    request: &Resources,
    words: &mut u64,
) -> Match {
    if !Filter::applies(partition, constraints) {
        return Match::NotFound;
    }
    let available = partition.available.as_raw_slice();
    let mut reclaiming = None;
    for (w, &free_here) in available.iter().enumerate() {
        let mut acc = free_here;
        let mut ids = constraints.iter();
        while acc != 0 {
            let Some(j) = ids.next() else { break };
            let row = partition.constraint_bits[j].as_raw_slice();
            acc &= row.get(w).copied().unwrap_or(0);
        }
        while acc != 0 {
            let slot = w * 64 + acc.trailing_zeros() as usize;
            match fits(partition, slot, request) {
                Fit::Free => {
                    *words += w as u64 + 1;
                    return Match::Found(slot);
                }
                Fit::Reclaiming => {
                    reclaiming.get_or_insert(slot);
                }
                Fit::No => {}
            }
            acc &= acc - 1;
        }
    }
    *words += available.len() as u64;
    reclaiming.map_or(Match::NotFound, Match::Found)
}

/// The first surviving slot of `filter` where `request` fits, preferring a slot where
/// nothing must be killed. `words` grows by the words examined: up to the one holding
/// the slot found free, or all of them.
pub fn first_fit(
    partition: &PartitionView,
    filter: &Filter,
    request: &Resources,
    words: &mut u64,
) -> Match {
    let mut reclaiming = None;
    let count = filter.word_count();
    for w in 0..count {
        let mut acc = filter.word(w);
        while acc != 0 {
            let slot = w * 64 + acc.trailing_zeros() as usize;
            match fits(partition, slot, request) {
                Fit::Free => {
                    *words += w as u64 + 1;
                    return Match::Found(slot);
                }
                Fit::Reclaiming => {
                    reclaiming.get_or_insert(slot);
                }
                Fit::No => {}
            }
            acc &= acc - 1;
        }
    }
    *words += count as u64;
    reclaiming.map_or(Match::NotFound, Match::Found)
}

/// How a request fits a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// In the room no one uses.
    Free,
    /// Only by killing QUEUEABLE work running there.
    Reclaiming,
    /// Not at all.
    No,
}

/// How `request` fits slot `slot` of `partition`.
#[inline]
pub fn fits(partition: &PartitionView, slot: usize, request: &Resources) -> Fit {
    let free = partition.free[slot];
    if !free.fits(request) {
        return Fit::No;
    }
    let held = partition.q_held.get(slot).copied().unwrap_or_default();
    if held.is_zero() || free.saturating_sub(&held).fits(request) {
        Fit::Free
    } else {
        Fit::Reclaiming
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::{partition, shape};

    /// Node i has constraint 0 when i is odd, constraint 1 when i % 3 == 0; every node
    /// has 2 cores. Each row: slots made full, slots whose free room is QUEUEABLE work
    /// (cores held), constraints, cores asked, the match and the words examined.
    #[test]
    fn first_slot_with_the_constraints_and_room() {
        type Row = (
            &'static str,
            usize,
            Vec<usize>,
            Vec<usize>,
            &'static [u64],
            u64,
            Match,
            u64,
        );
        let table: Vec<Row> = vec![
            ("anything", 200, vec![], vec![], &[], 1, Match::Found(0), 1),
            (
                "constraint 0",
                200,
                vec![],
                vec![],
                &[0],
                1,
                Match::Found(1),
                1,
            ),
            (
                "both constraints",
                200,
                vec![],
                vec![],
                &[0, 1],
                1,
                Match::Found(3),
                1,
            ),
            (
                "too large anywhere",
                200,
                vec![],
                vec![],
                &[],
                3,
                Match::NotFound,
                4,
            ),
            (
                "unknown constraint",
                200,
                vec![],
                vec![],
                &[5],
                1,
                Match::NotFound,
                0,
            ),
            (
                "skips full nodes across words",
                200,
                (0..150).collect(),
                vec![],
                &[0, 1],
                1,
                Match::Found(153),
                3,
            ),
            (
                "prefers a node where nothing is killed",
                4,
                vec![],
                vec![0],
                &[],
                1,
                Match::Found(1),
                1,
            ),
            (
                "reclaims when it must",
                4,
                vec![1, 2, 3],
                vec![0],
                &[],
                1,
                Match::Found(0),
                1,
            ),
        ];
        for (name, n, full, held, ids, cores, want, want_words) in table {
            let mut p = partition(n);
            for slot in full {
                p.set_free(slot, Resources::ZERO);
            }
            for slot in held {
                p.q_held[slot] = Resources::cores(2, 100);
            }
            let (c, r) = shape(ids, cores);
            let mut words = 0;
            assert_eq!(find_node(&p, c, &r, &mut words), want, "{name}");
            assert_eq!(words, want_words, "{name}: words examined");
        }
    }

    #[test]
    fn a_slot_with_less_free_room_is_skipped() {
        let mut p = partition(200);
        p.set_free(3, Resources::cores(1, 100));
        let table: &[(u64, Match)] = &[(1, Match::Found(3)), (2, Match::Found(9))];
        for (cores, want) in table {
            let (c, r) = shape(&[0, 1], *cores);
            assert_eq!(find_node(&p, c, &r, &mut 0), *want, "{cores} cores");
        }
    }

    #[test]
    fn fits_tells_free_from_reclaiming() {
        let mut p = partition(3);
        p.q_held[1] = Resources::cores(1, 50);
        p.set_free(2, Resources::cores(1, 100));
        let table: &[(usize, u64, Fit)] = &[
            (0, 2, Fit::Free),
            (1, 1, Fit::Free),
            (1, 2, Fit::Reclaiming),
            (2, 1, Fit::Free),
            (2, 2, Fit::No),
        ];
        for (slot, cores, want) in table {
            let r = Resources::cores(*cores, 1);
            assert_eq!(fits(&p, *slot, &r), *want, "slot {slot}, {cores} cores");
        }
    }

    /// The walk before the shortcuts: filter, then every word in turn, counting each.
    fn reference(p: &PartitionView, c: ConstraintSet, r: &Resources, words: &mut u64) -> Match {
        let Some(filter) = Filter::new(p, c) else {
            return Match::NotFound;
        };
        let mut reclaiming = None;
        for w in 0..filter.word_count() {
            *words += 1;
            for b in crate::placement::filter::bits(filter.word(w)) {
                match fits(p, w * 64 + b, r) {
                    Fit::Free => return Match::Found(w * 64 + b),
                    Fit::Reclaiming => {
                        reclaiming.get_or_insert(w * 64 + b);
                    }
                    Fit::No => {}
                }
            }
        }
        reclaiming.map_or(Match::NotFound, Match::Found)
    }

    proptest::proptest! {
        /// Same node and same words as the plain walk, on partitions mostly full
        /// (whole words empty, or all of them), with rows missing or not.
        #[test]
        fn answers_and_counts_as_the_plain_walk(
            n in 1usize..300,
            free in proptest::collection::vec(0u64..4, 300),
            held in proptest::collection::vec(0u64..3, 300),
            full_from in 0usize..300,
            rows in 0usize..3,
            ids in proptest::collection::vec(0u64..3, 0..3),
            cores in 1u64..3,
        ) {
            let mut p = partition(n);
            p.constraint_bits.truncate(rows);
            for slot in 0..n {
                let f = if slot >= full_from { 0 } else { free[slot] };
                p.set_free(slot, Resources::cores(f, 100));
                p.q_held[slot] = Resources::cores(held[slot].min(f), 0);
            }
            let (c, r) = shape(&ids, cores);
            let (mut got_words, mut want_words) = (7, 7);
            let got = find_node(&p, c, &r, &mut got_words);
            let want = reference(&p, c, &r, &mut want_words);
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(got_words, want_words);
        }
    }
}
