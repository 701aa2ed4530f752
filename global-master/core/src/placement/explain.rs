//! Stage 4, the explanation of a miss: when no partition had a node that fits, why.
//!
//! The GM counts, over its whole view and ignoring free resources, the nodes with the
//! task's constraints and those of them large enough for it when empty. None with the
//! constraints, or none large enough, means no node could ever host the task: it is
//! unplaceable. Otherwise it only lacks free resources now, which is what the
//! fairness step and the requeue act on. The counts depend only on the topology, so
//! they are cached per task shape until a topology changes.

use super::filter::{bits, Filter};
use crate::view::{LmView, PartitionView};
use common::reasons::PendingReason;
use common::{ConstraintSet, Resources};
use rustc_hash::FxHashMap as HashMap;

/// Nodes able to host a (constraints, resources) shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCount {
    /// Nodes with the constraints.
    pub with_constraints: u64,
    /// Nodes with the constraints and a capacity the request fits in.
    pub large_enough: u64,
}

/// Why nothing fits, from the host counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    /// No node could ever host the task (`NoNodeWithConstraints` or
    /// `NoNodeLargeEnough`).
    Unplaceable(PendingReason),
    /// `eligible_nodes` nodes could host it, but none has the room now.
    NoFreeResources { eligible_nodes: u64 },
}

impl Miss {
    /// The reason a task is given.
    pub fn reason(&self) -> PendingReason {
        match self {
            Miss::Unplaceable(reason) => reason.clone(),
            Miss::NoFreeResources { eligible_nodes } => PendingReason::NoFreeResources {
                eligible_nodes: *eligible_nodes,
            },
        }
    }
}

/// The named reason for a miss, given the host counts of the task's shape.
pub fn explain(count: HostCount) -> Miss {
    if count.large_enough == 0 {
        Miss::Unplaceable(if count.with_constraints == 0 {
            PendingReason::NoNodeWithConstraints
        } else {
            PendingReason::NoNodeLargeEnough
        })
    } else {
        Miss::NoFreeResources {
            eligible_nodes: count.large_enough,
        }
    }
}

/// How many nodes of the partition have the constraints (ignoring resources), and how
/// many of those could host `request` when empty. The constraint rows are ANDed a
/// raw word at a time (64 slots per step), and only the surviving slots' capacities
/// are read.
pub fn eligible_counts(
    partition: &PartitionView,
    constraints: ConstraintSet,
    request: &Resources,
) -> (u64, u64) {
    if !Filter::applies(partition, constraints) {
        return (0, 0);
    }
    let rows: Vec<&[u64]> = constraints
        .iter()
        .map(|j| partition.constraint_bits[j].as_raw_slice())
        .collect();
    let n = partition.len();
    let mut with_constraints = 0;
    let mut large_enough = 0;
    for w in 0..n.div_ceil(64) {
        // Bits past the last slot are not slots, whatever a row holds there.
        let mut acc = match n - w * 64 {
            left if left < 64 => (1u64 << left) - 1,
            _ => u64::MAX,
        };
        for row in &rows {
            acc &= row.get(w).copied().unwrap_or(0);
        }
        with_constraints += u64::from(acc.count_ones());
        for b in bits(acc) {
            if partition.capacity[w * 64 + b].fits(request) {
                large_enough += 1;
            }
        }
    }
    (with_constraints, large_enough)
}

/// The host counts of a shape over every partition of every LM view.
pub fn count_hosts(
    lms: &[Option<LmView>],
    constraints: ConstraintSet,
    request: &Resources,
) -> HostCount {
    let mut count = HostCount::default();
    for part in lms.iter().flatten().flat_map(|view| &view.partitions) {
        let (with, large) = eligible_counts(part, constraints, request);
        count.with_constraints += with;
        count.large_enough += large;
    }
    count
}

/// [`count_hosts`] cached per shape; [`HostCounts::clear`] when a topology changes.
#[derive(Debug, Default)]
pub struct HostCounts(HashMap<(ConstraintSet, Resources), HostCount>);

impl HostCounts {
    pub fn get(
        &mut self,
        lms: &[Option<LmView>],
        constraints: ConstraintSet,
        request: Resources,
    ) -> HostCount {
        *self
            .0
            .entry((constraints, request))
            .or_insert_with(|| count_hosts(lms, constraints, &request))
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::{partition, shape};
    use common::reasons::PendingReason::*;

    #[test]
    fn the_reason_follows_the_counts() {
        let table = [
            ((0, 0), Miss::Unplaceable(NoNodeWithConstraints)),
            ((3, 0), Miss::Unplaceable(NoNodeLargeEnough)),
            ((3, 2), Miss::NoFreeResources { eligible_nodes: 2 }),
            ((1, 1), Miss::NoFreeResources { eligible_nodes: 1 }),
        ];
        for ((with_constraints, large_enough), want) in table {
            let count = HostCount {
                with_constraints,
                large_enough,
            };
            assert_eq!(explain(count), want, "{count:?}");
        }
        assert_eq!(
            Miss::NoFreeResources { eligible_nodes: 7 }.reason(),
            NoFreeResources { eligible_nodes: 7 }
        );
    }

    /// 12 nodes of 2 cores: constraint 0 on odd nodes, 1 on multiples of 3.
    #[test]
    fn eligible_counts_ignore_free_resources() {
        let mut p = partition(12);
        (0..12).for_each(|slot| {
            p.set_free(slot, Resources::ZERO);
        });
        let table: &[(&[u64], u64, (u64, u64))] = &[
            (&[], 1, (12, 12)),
            (&[0], 2, (6, 6)),
            (&[0, 1], 1, (2, 2)),
            (&[0, 1], 3, (2, 0)),
            (&[5], 1, (0, 0)),
        ];
        for (ids, cores, want) in table {
            let (c, r) = shape(ids, *cores);
            assert_eq!(eligible_counts(&p, c, &r), *want, "{ids:?}, {cores} cores");
        }
    }

    #[test]
    fn host_counts_sum_over_views_and_explain_the_miss() {
        let view = |n| {
            let mut v = crate::placement::fixtures::view(n);
            v.partitions[0].set_free(0, Resources::ZERO);
            Some(v)
        };
        let lms = vec![view(12), None, view(6)];
        let table: &[(&[u64], u64, Miss)] = &[
            (&[0, 1], 2, Miss::NoFreeResources { eligible_nodes: 3 }),
            (&[0, 1], 3, Miss::Unplaceable(NoNodeLargeEnough)),
            (&[7], 1, Miss::Unplaceable(NoNodeWithConstraints)),
        ];
        let mut cache = HostCounts::default();
        for (ids, cores, want) in table {
            let (c, r) = shape(ids, *cores);
            assert_eq!(
                explain(cache.get(&lms, c, r)),
                *want,
                "{ids:?}, {cores} cores"
            );
            assert_eq!(cache.get(&[], c, r), count_hosts(&lms, c, &r), "cached");
        }
        cache.clear();
        let (c, r) = shape(&[0, 1], 2);
        assert_eq!(cache.get(&[], c, r), HostCount::default(), "cleared");
    }

    /// The per-slot count before the word-at-a-time one.
    fn reference(p: &PartitionView, c: ConstraintSet, r: &Resources) -> (u64, u64) {
        let with: Vec<usize> = (0..p.len())
            .filter(|&slot| {
                c.iter()
                    .all(|j| p.constraint_bits.get(j).is_some_and(|b| b[slot]))
            })
            .collect();
        let large = with
            .iter()
            .filter(|&&slot| p.capacity[slot].fits(r))
            .count();
        (with.len() as u64, large as u64)
    }

    proptest::proptest! {
        /// Same counts as slot by slot, across word boundaries, with rows missing,
        /// and rows whose bits past the last slot are set.
        #[test]
        fn eligible_counts_as_slot_by_slot(
            n in 1usize..200,
            set in proptest::collection::vec(proptest::collection::vec(proptest::bool::ANY, 200), 3),
            cores in proptest::collection::vec(1u64..4, 200),
            rows in 0usize..4,
            ids in proptest::collection::vec(0u64..4, 0..3),
            want_cores in 1u64..4,
        ) {
            use bitvec::prelude::*;
            let mut p = crate::placement::fixtures::partition(n);
            p.constraint_bits = set.iter().take(rows).map(|row| {
                let mut bits = bitvec![u64, Lsb0; 1; n.div_ceil(64) * 64];
                for (slot, on) in row.iter().enumerate().take(n) {
                    bits.set(slot, *on);
                }
                bits.truncate(n);
                bits
            }).collect();
            for (slot, c) in cores.iter().enumerate().take(n) {
                p.capacity[slot] = Resources::cores(*c, 100);
            }
            let (c, r) = shape(&ids, want_cores);
            proptest::prop_assert_eq!(eligible_counts(&p, c, &r), reference(&p, c, &r));
        }
    }
}
