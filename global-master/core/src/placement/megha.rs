//! Megha's placement policy (Algorithm 1 with the GM's partition order): this GM's
//! own partitions round-robin across LMs, then the other GMs' partitions round-robin
//! (a repartition); in each, the first node with the constraints and room.

use super::contract::{scan, Effort, Found, PlacementPolicy, Views};
use super::select::RoundRobin;
use common::{ConstraintSet, Resources};

/// The registered default policy; its only state is the two round-robin cursors.
#[derive(Clone, Copy, Debug, Default)]
pub struct Megha {
    rr: RoundRobin,
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
        let mut try_one = |c| scan(views, c, constraints, request, effort);
        if let Some(found) = self.rr.internal(lms, views.me).find_map(&mut try_one) {
            return Some(found);
        }
        self.rr
            .external(lms, views.gms, views.me)
            .find_map(&mut try_one)
    }

    fn skip(&mut self, views: &Views) {
        // The internal cursor moves for every task, tried or not (the external one
        // moves only for tasks that reach the external partitions).
        let _ = self.rr.internal(views.lms.len(), views.me);
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
}
