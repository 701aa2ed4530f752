//! Stage 1, the candidate order: which partitions are tried, in which order, and under
//! which placement. Megha tries this GM's own (internal) partition of every LM first,
//! round-robin across LMs, so that load spreads over LMs; only when all of them are
//! full does it try the partitions of the other GMs (external partitions, a
//! repartition), round-robin over (LM, partition) pairs. Each round-robin cursor moves
//! by one per task that reaches it, so that consecutive tasks start at different LMs.

use common::messages::Placement;

/// One partition to try: partition `partition` (a GM index) of LM `lm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub lm: usize,
    pub partition: usize,
    pub placement: Placement,
}

/// The two round-robin cursors of Megha's candidate order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundRobin {
    internal: usize,
    external: usize,
}

impl RoundRobin {
    /// This GM's partition `me` of each of `lms` LMs, starting at the cursor; the
    /// cursor moves to the next LM (also when the caller then tries nothing).
    pub fn internal(&mut self, lms: usize, me: usize) -> impl Iterator<Item = Candidate> {
        let start = self.internal;
        self.internal = (start + 1) % lms;
        (0..lms).map(move |k| Candidate {
            lm: (start + k) % lms,
            partition: me,
            placement: Placement::Internal,
        })
    }

    /// Moves the internal cursor as `count` calls of [`RoundRobin::internal`] would.
    pub fn advance_internal(&mut self, lms: usize, count: usize) {
        if lms > 0 && count > 0 {
            self.internal = (self.internal + count % lms) % lms;
        }
    }

    /// Every partition of the other `gms - 1` GMs of each of `lms` LMs, starting at
    /// the cursor, which moves by one (untouched when there is no external partition).
    pub fn external(
        &mut self,
        lms: usize,
        gms: usize,
        me: usize,
    ) -> impl Iterator<Item = Candidate> {
        let others = gms.saturating_sub(1);
        let externals = lms * others;
        let start = self.external;
        if externals > 0 {
            self.external = (start + 1) % externals;
        }
        (0..externals).map(move |k| {
            let e = (start + k) % externals;
            let (lm, mut partition) = (e / others, e % others);
            if partition >= me {
                partition += 1;
            }
            Candidate {
                lm,
                partition,
                placement: Placement::Repartition,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(it: impl Iterator<Item = Candidate>) -> Vec<(usize, usize)> {
        it.map(|c| (c.lm, c.partition)).collect()
    }

    #[test]
    fn advancing_the_internal_cursor_equals_that_many_tries() {
        for (lms, count) in [(1, 0), (1, 5), (3, 0), (3, 1), (3, 7), (5, 12), (7, 100)] {
            let (mut tried, mut advanced) = (RoundRobin::default(), RoundRobin::default());
            let _ = tried.internal(lms, 0);
            let _ = advanced.internal(lms, 0);
            for _ in 0..count {
                let _ = tried.internal(lms, 0);
            }
            advanced.advance_internal(lms, count);
            assert_eq!(
                pairs(advanced.internal(lms, 0)),
                pairs(tried.internal(lms, 0)),
                "{lms} LMs, {count} skips"
            );
        }
    }

    #[test]
    fn internal_order_rotates_across_lms() {
        let mut rr = RoundRobin::default();
        let table: &[&[(usize, usize)]] = &[
            &[(0, 1), (1, 1), (2, 1)],
            &[(1, 1), (2, 1), (0, 1)],
            &[(2, 1), (0, 1), (1, 1)],
            &[(0, 1), (1, 1), (2, 1)],
        ];
        for (task, want) in table.iter().enumerate() {
            assert_eq!(pairs(rr.internal(3, 1)), *want, "task {task}");
        }
        assert!(rr
            .internal(3, 1)
            .all(|c| c.placement == Placement::Internal));
    }

    #[test]
    fn external_order_skips_this_gms_partition_and_rotates() {
        // 2 LMs, 3 GMs, this is GM 1: the external partitions are 0 and 2 of each LM.
        let mut rr = RoundRobin::default();
        let table: &[&[(usize, usize)]] = &[
            &[(0, 0), (0, 2), (1, 0), (1, 2)],
            &[(0, 2), (1, 0), (1, 2), (0, 0)],
            &[(1, 0), (1, 2), (0, 0), (0, 2)],
        ];
        for (task, want) in table.iter().enumerate() {
            assert_eq!(pairs(rr.external(2, 3, 1)), *want, "task {task}");
        }
        assert!(rr
            .external(2, 3, 1)
            .all(|c| c.placement == Placement::Repartition));
    }

    #[test]
    fn one_gm_has_no_external_partition_and_keeps_its_cursor() {
        let mut rr = RoundRobin::default();
        assert_eq!(pairs(rr.external(4, 1, 0)), vec![]);
        assert_eq!(rr, RoundRobin::default());
    }
}
