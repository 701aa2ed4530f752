//! The nodes that grew since the last wake, asked during one scheduling pass
//! whether a blocked shape fits one of them now (see [`crate::backlog`]).
//!
//! During a pass the view only shrinks (every dispatch deducts; snapshots are
//! applied between passes), so a grown node that has no room for a shape, or no room
//! at all, has none for the rest of the pass. Each shape keeps a cursor past the
//! nodes that failed it: all the questions of one pass cost at most one walk over
//! the grown nodes per shape, where asking each time from the start cost a walk per
//! question (the overloaded benchmark spent 15% of its time there). The answers are
//! the same.

use crate::cluster_view::ClusterView;
use common::{ConstraintSet, Resources};
use rustc_hash::FxHashMap;

/// The grown (LM, node) pairs of one pass and how far each question got.
#[derive(Debug, Default)]
pub struct GrownNodes {
    nodes: Vec<(u16, u32)>,
    /// Nodes before this index have nothing free in some dimension.
    room: usize,
    /// Per shape: nodes before this index have no room for it.
    fit: FxHashMap<(ConstraintSet, Resources), usize>,
}

impl GrownNodes {
    /// The nodes that grew since the last wake ([`ClusterView::take_raised`]).
    pub fn new(nodes: Vec<(u16, u32)>) -> Self {
        GrownNodes {
            nodes,
            room: 0,
            fit: FxHashMap::default(),
        }
    }

    /// True when one of the nodes has something free in every dimension now.
    pub fn any_room(&mut self, view: &ClusterView) -> bool {
        while let Some(&(l, n)) = self.nodes.get(self.room) {
            if view.has_room(l, n) {
                return true;
            }
            self.room += 1;
        }
        false
    }

    /// True when one of the nodes has `constraints` and room for `request` now.
    pub fn fits_one(
        &mut self,
        view: &ClusterView,
        constraints: ConstraintSet,
        request: &Resources,
    ) -> bool {
        let cursor = self.fit.entry((constraints, *request)).or_insert(0);
        while let Some(&(l, n)) = self.nodes.get(*cursor) {
            if view.fits_node(l, n, constraints, request) {
                return true;
            }
            *cursor += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::GrownNodes;
    use crate::cluster_view::ClusterView;
    use common::messages::{LmSnapshot, LmTopology};
    use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources};
    use std::sync::Arc;

    /// One LM of four one-core nodes, all reported free.
    fn view() -> ClusterView {
        let one_core = Resources::cores(1, 1024);
        let mut view = ClusterView::new(1);
        view.apply(&LmSnapshot {
            lm: LmId(0),
            incarnation: 1,
            version: 1,
            taken_at: Micros::ZERO,
            topology: Arc::new(LmTopology {
                lm: LmId(0),
                gms: 1,
                home: vec![GmId(0); 4],
                constraints: vec![ConstraintSet::EMPTY; 4],
                capacity: vec![one_core; 4],
            }),
            free: Arc::new(vec![one_core; 4]),
            free_changed: Arc::default(),
            applied_batches: vec![0],
            usage: Vec::new(),
            queue_delay: Arc::default(),
            queueable_held: Arc::default(),
            jobs: Arc::default(),
        });
        view
    }

    #[test]
    fn answers_as_a_walk_from_the_start_while_the_view_shrinks() {
        let mut view = view();
        let one = Resources::cores(1, 512);
        let two = Resources::cores(2, 512);
        let any = ConstraintSet::EMPTY;
        let mut grown = GrownNodes::new(vec![(0, 1), (0, 2)]);
        assert!(grown.any_room(&view));
        assert!(grown.fits_one(&view, any, &one));
        assert!(!grown.fits_one(&view, any, &two));
        let lm = view.get_mut(0).expect("LM 0 reported");
        lm.deduct(NodeId(1), &one);
        assert!(grown.fits_one(&view, any, &one), "node 2 still has room");
        assert!(grown.any_room(&view));
        let lm = view.get_mut(0).expect("LM 0 reported");
        lm.deduct(NodeId(2), &one);
        assert!(!grown.fits_one(&view, any, &one));
        assert!(!grown.any_room(&view));
        // Nodes 0 and 3 have room, but did not grow.
        assert!(view.has_room(0, 0) && view.has_room(0, 3));
        assert!(!GrownNodes::default().any_room(&view));
    }
}
