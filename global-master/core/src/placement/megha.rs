//! Megha's placement policy (Algorithm 1 with the GM's partition order): this GM's
//! own partitions round-robin across LMs, then the other GMs' partitions round-robin
//! (a repartition); in each, the first node with the constraints and room.
//!
//! A scan that found nothing in a partition is remembered, per shape, with the
//! partition's count of gains ([`PartitionView::gains`]): until the partition gains
//! resources it only shrinks, so the same shape would find nothing there again. The
//! next scan of that shape there is answered at once and charged as the scan was
//! (an overloaded GM scans the same full partitions for task after task).

use super::contract::{scan, Effort, Found, PlacementPolicy, Views};
use super::filter::Filter;
use super::select::{Candidate, RoundRobin};
use crate::view::PartitionView;
use common::{ConstraintSet, Resources};
use rustc_hash::FxHashMap;

/// Misses remembered at most (then forgotten all at once: only speed depends on it).
const MISSES_KEPT: usize = 1 << 16;

/// Partitions smaller than this many words are scanned every time: a scan of a few
/// words costs less than remembering (YH1_sub on 1,000 nodes, 40-node partitions:
/// 3% more instructions with every partition remembered).
const REMEMBER_FROM_WORDS: usize = 4;

/// No miss remembered for this partition.
const NONE: u64 = u64::MAX;

/// The registered default policy: the two round-robin cursors, and the misses.
#[derive(Clone, Debug, Default)]
pub struct Megha {
    rr: RoundRobin,
    /// Per shape (constraints, request), per partition (`lm * gms + partition`): the
    /// partition's gains when that shape found nothing there ([`NONE`] if it did not
    /// or was not tried). One lookup per task; each candidate is then an index.
    misses: FxHashMap<(ConstraintSet, Resources), Vec<u64>>,
    /// Misses remembered in `misses`.
    remembered: usize,
}

/// [`scan`], answered from `misses` (this shape's, by partition) when the shape found
/// nothing in the partition and the partition has not gained since.
fn scan_remembered(
    misses: &mut Vec<u64>,
    remembered: &mut usize,
    views: &Views,
    c: Candidate,
    constraints: ConstraintSet,
    request: &Resources,
    effort: &mut Effort,
) -> Option<Found> {
    let part: &PartitionView = match views.lms.get(c.lm).and_then(|v| v.as_ref()) {
        Some(view) if !view.is_busy() => &view.partitions[c.partition],
        _ => return None,
    };
    if part.len() <= (REMEMBER_FROM_WORDS - 1) * 64 {
        return scan(views, c, constraints, request, effort);
    }
    let index = c.lm * views.gms + c.partition;
    if misses.get(index) == Some(&part.gains) {
        let before = *effort;
        effort.partitions += 1;
        if Filter::applies(part, constraints) {
            effort.words += part.len().div_ceil(64) as u64;
        }
        debug_assert!(
            {
                let mut scanned = before;
                scan(views, c, constraints, request, &mut scanned).is_none() && scanned == *effort
            },
            "a remembered miss finds a node now"
        );
        return None;
    }
    let found = scan(views, c, constraints, request, effort);
    if found.is_none() {
        if misses.len() <= index {
            misses.resize(index + 1, NONE);
        }
        if misses[index] == NONE {
            *remembered += 1;
        }
        misses[index] = part.gains;
    }
    found
}

impl PlacementPolicy for Megha {
    fn name(&self) -> &'static str {
        "megha"
    }

    fn place(
        &mut self,
        views: &Views,
        constraints: ConstraintSet,
        request: &Resources,
        effort: &mut Effort,
    ) -> Option<Found> {
        let lms = views.lms.len();
        if self.remembered >= MISSES_KEPT {
            self.misses.clear();
            self.remembered = 0;
        }
        let misses = self.misses.entry((constraints, *request)).or_default();
        let remembered = &mut self.remembered;
        let mut try_one =
            |c| scan_remembered(misses, remembered, views, c, constraints, request, effort);
        if let Some(found) = self.rr.internal(lms, views.me).find_map(&mut try_one) {
            return Some(found);
        }
        self.rr
            .external(lms, views.gms, views.me)
            .find_map(&mut try_one)
    }

    fn topology_changed(&mut self) {
        self.misses.clear();
        self.remembered = 0;
    }

    fn skip(&mut self, views: &Views) {
        // The internal cursor moves for every task, tried or not (the external one
        // moves only for tasks that reach the external partitions).
        let _ = self.rr.internal(views.lms.len(), views.me);
    }

    fn skip_many(&mut self, views: &Views, count: usize) {
        self.rr.advance_internal(views.lms.len(), count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::{shape, view_with_homes};
    use crate::view::LmView;
    use common::messages::Placement;
    use common::{GmId, NodeId};

    /// Two LMs of 4 nodes, 2 GMs: nodes 0 and 1 are GM 0's, 2 and 3 GM 1's.
    fn lms() -> Vec<Option<LmView>> {
        let homes = || vec![GmId(0), GmId(0), GmId(1), GmId(1)];
        vec![
            Some(view_with_homes(homes(), 2)),
            Some(view_with_homes(homes(), 2)),
        ]
    }

    #[test]
    fn internal_round_robin_then_repartition() {
        let mut lms = lms();
        let mut megha = Megha::default();
        let place = |megha: &mut Megha, lms: &[Option<LmView>], ids: &[u64]| {
            let views = Views { lms, me: 0, gms: 2 };
            let (c, r) = shape(ids, 1);
            let mut effort = Effort::default();
            let found = megha.place(&views, c, &r, &mut effort);
            found.map(|f| (f.lm, f.node.0, f.placement, effort.partitions))
        };
        use Placement::*;
        assert_eq!(place(&mut megha, &lms, &[]), Some((0, 0, Internal, 1)));
        assert_eq!(place(&mut megha, &lms, &[]), Some((1, 0, Internal, 1)));
        // Constraint 0 (odd nodes): node 1 of LM 0, GM 0's.
        assert_eq!(place(&mut megha, &lms, &[0]), Some((0, 1, Internal, 1)));
        // Constraint 1 (nodes 0 and 3), node 0 full: both internal partitions, then GM
        // 1's node 3 of LM 0, then of LM 1 (the external cursor moved).
        lms.iter_mut()
            .flatten()
            .for_each(|v| v.deduct(NodeId(0), &Resources::cores(2, 100)));
        assert_eq!(place(&mut megha, &lms, &[1]), Some((0, 3, Repartition, 3)));
        assert_eq!(place(&mut megha, &lms, &[1]), Some((1, 3, Repartition, 3)));
        assert_eq!(
            place(&mut megha, &lms, &[7]),
            None,
            "no node has constraint 7"
        );
    }

    proptest::proptest! {
        /// Remembered misses answer as fresh scans: same node, effort and cursors
        /// as a policy that forgets them before every task, over tasks of random
        /// shapes between which nodes are deducted (shrinking) or credited (gains).
        #[test]
        fn remembered_misses_answer_as_fresh_scans(
            steps in proptest::collection::vec((0u8..3, 0u64..3, 1u64..3, 0usize..2, 0u32..12), 1..80),
        ) {
            let mut lms = lms();
            let mut remembering = Megha::default();
            let mut fresh = Megha::default();
            for (op, ids, cores, lm, node) in steps {
                let ids: Vec<u64> = (0..2).filter(|j| ids & (1 << j) != 0).collect();
                let (c, r) = shape(&ids, cores);
                match op {
                    0 => {
                        let views = Views { lms: &lms, me: 0, gms: 2 };
                        fresh.misses.clear();
                        let (mut e1, mut e2) = (Effort::default(), Effort::default());
                        let got = remembering.place(&views, c, &r, &mut e1);
                        let want = fresh.place(&views, c, &r, &mut e2);
                        proptest::prop_assert_eq!(got, want);
                        proptest::prop_assert_eq!(e1, e2);
                        proptest::prop_assert_eq!(remembering.rr, fresh.rr);
                        if let Some(f) = got {
                            if let Some(v) = lms[f.lm].as_mut() {
                                v.deduct(f.node, &r);
                            }
                        }
                    }
                    1 => {
                        if let Some(v) = lms[lm].as_mut() {
                            v.deduct(NodeId(node % 4), &Resources::cores(1, 1));
                        }
                    }
                    _ => {
                        if let Some(v) = lms[lm].as_mut() {
                            v.credit(NodeId(node % 4), &Resources::cores(1, 1));
                        }
                    }
                }
            }
        }
    }
}
