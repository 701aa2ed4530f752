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
//!
//! A shape that found no grown node also answers for every shape it covers: one
//! with all its constraints and more (a superset) and a request at least as large in
//! every dimension can fit only where it fits. Such a shape is answered `false` at
//! once, without its own walk (an overloaded GM asks many shapes per pass, most of
//! them covered by an earlier failure: the walks grew with the backlog).

use crate::cluster_view::ClusterView;
use common::{ConstraintSet, Resources};
use rustc_hash::FxHashMap;

/// The grown (LM, node) pairs of one pass and how far each question got.
#[derive(Debug, Default)]
pub struct GrownNodes {
    nodes: Vec<(u16, u32)>,
    /// Upper bounds of what the nodes hold, to skip those without room at once.
    bounds: Bounds,
    /// Nodes before this index have nothing free in some dimension.
    room: usize,
    /// Per shape: nodes before this index have no room for it.
    fit: FxHashMap<(ConstraintSet, Resources), usize>,
    /// Shapes that walked past every node: nothing covered by one of them fits.
    failed: Vec<(ConstraintSet, Resources)>,
}

impl GrownNodes {
    /// The nodes that grew since the last wake ([`ClusterView::take_raised`]).
    pub fn new(nodes: Vec<(u16, u32)>, view: &ClusterView) -> Self {
        let bounds = Bounds::new(nodes.iter().map(|&(l, n)| now(view, l, n)));
        GrownNodes {
            nodes,
            bounds,
            room: 0,
            fit: FxHashMap::default(),
            failed: Vec::new(),
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
    ///
    /// As a walk from the shape's cursor over every node, asking the view about
    /// each, but only the nodes whose bound admits the shape are asked (the bounds
    /// only overstate: the view only shrinks); a node the view refuses gets its
    /// bound lowered to what it holds now.
    pub fn fits_one(
        &mut self,
        view: &ClusterView,
        constraints: ConstraintSet,
        request: &Resources,
    ) -> bool {
        let fits = |&(l, n): &(u16, u32)| view.fits_node(l, n, constraints, request);
        let end = self.nodes.len();
        let cursor = self.fit.entry((constraints, *request)).or_insert(0);
        if *cursor == end || covered(&self.failed, constraints, request) {
            // Walked past every node, by itself or by a shape it covers.
            *cursor = end;
            return false;
        }
        let mut from = *cursor;
        while let Some(i) = self.bounds.first(from, constraints, request) {
            let (l, n) = self.nodes[i];
            if fits(&(l, n)) {
                debug_assert!(!self.nodes[*cursor..i].iter().any(fits));
                *cursor = i;
                return true;
            }
            self.bounds.lower(i, now(view, l, n).1);
            from = i + 1;
        }
        debug_assert!(!self.nodes[*cursor..].iter().any(fits));
        *cursor = end;
        self.failed.push((constraints, *request));
        false
    }
}

/// A node's constraints and free resources now (none and nothing for a node the
/// view does not know: it fits nothing).
fn now(view: &ClusterView, l: u16, n: u32) -> (ConstraintSet, Resources) {
    view.get(l as usize)
        .and_then(|v| v.node_now(n))
        .unwrap_or((ConstraintSet::EMPTY, Resources::ZERO))
}

/// Per grown node, in order, an upper bound of its free resources and its
/// constraints, side by side: a question reads the view only for the nodes whose
/// bound admits the shape, and passes the others at the cost of three comparisons.
#[derive(Debug, Default)]
struct Bounds {
    /// Per node: free CPU, free memory, constraints.
    nodes: Vec<[u64; 3]>,
}

impl Bounds {
    fn new(nodes: impl ExactSizeIterator<Item = (ConstraintSet, Resources)>) -> Self {
        let nodes = nodes
            .map(|(has, free)| [free.cpu_millis, free.memory_mb, has.0])
            .collect();
        Bounds { nodes }
    }

    /// The first node at or after `from` whose bound admits the shape.
    fn first(&self, from: usize, constraints: ConstraintSet, request: &Resources) -> Option<usize> {
        let (cpu, memory, c) = (request.cpu_millis, request.memory_mb, constraints.0);
        let rest = self.nodes.get(from..)?;
        (from..)
            .zip(rest)
            .find(|(_, b)| b[0] >= cpu && b[1] >= memory && c & !b[2] == 0)
            .map(|(at, _)| at)
    }

    /// Node `i` holds `free` now (no more than its bound).
    fn lower(&mut self, i: usize, free: Resources) {
        if let Some(b) = self.nodes.get_mut(i) {
            b[0] = free.cpu_millis;
            b[1] = free.memory_mb;
        }
    }
}

/// True when some failed shape is covered by (`constraints`, `request`): its
/// constraints a subset, its request no larger in any dimension.
fn covered(
    failed: &[(ConstraintSet, Resources)],
    constraints: ConstraintSet,
    request: &Resources,
) -> bool {
    failed
        .iter()
        .any(|(c, r)| c.satisfied_by(constraints) && request.fits(r))
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
        view_of(vec![ConstraintSet::EMPTY; 4], vec![one_core; 4])
    }

    /// One LM whose nodes have these constraints and capacities, all reported free.
    fn view_of(constraints: Vec<ConstraintSet>, capacity: Vec<Resources>) -> ClusterView {
        let n = capacity.len();
        let mut view = ClusterView::new(1);
        view.apply(&LmSnapshot {
            lm: LmId(0),
            incarnation: 1,
            version: 1,
            taken_at: Micros::ZERO,
            topology: Arc::new(LmTopology {
                lm: LmId(0),
                gms: 1,
                home: vec![GmId(0); n],
                constraints,
                capacity: capacity.clone(),
            }),
            free: Arc::new(capacity),
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
        let mut grown = GrownNodes::new(vec![(0, 1), (0, 2)], &view);
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

    proptest::proptest! {
        /// Questions about random shapes, mixed with deductions that shrink the view
        /// (as dispatches do in a pass), answer as a walk over every grown node.
        #[test]
        fn answers_as_a_plain_walk_with_pruning(
            nodes in proptest::collection::vec((0u64..8, 0u64..4, 0u64..4), 1..24),
            grown in proptest::collection::vec(0usize..24, 0..24),
            steps in proptest::collection::vec((proptest::bool::ANY, 0u64..8, 0u64..4, 0u64..4, 0usize..24), 1..60),
        ) {
            let constraints = nodes.iter().map(|(c, _, _)| ConstraintSet(*c)).collect();
            let capacity = nodes.iter().map(|(_, cpu, mem)| Resources { cpu_millis: *cpu, memory_mb: *mem }).collect();
            let n = nodes.len();
            let mut view = view_of(constraints, capacity);
            let grown: Vec<(u16, u32)> = grown.iter().map(|g| (0, (g % n) as u32)).collect();
            let mut pruned = GrownNodes::new(grown.clone(), &view);
            for (ask, c, cpu, mem, node) in steps {
                let shape = Resources { cpu_millis: cpu, memory_mb: mem };
                if ask {
                    let want = grown.iter().any(|&(l, g)| view.fits_node(l, g, ConstraintSet(c), &shape));
                    proptest::prop_assert_eq!(pruned.fits_one(&view, ConstraintSet(c), &shape), want);
                } else {
                    let lm = view.get_mut(0).expect("LM 0 reported");
                    let id = NodeId((node % n) as u32);
                    let left = lm.node_now(id.0).map(|(_, free)| free).unwrap_or_default();
                    lm.deduct(id, &Resources { cpu_millis: cpu.min(left.cpu_millis), memory_mb: mem.min(left.memory_mb) });
                }
            }
        }
    }
}
