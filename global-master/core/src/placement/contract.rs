//! What a placement policy sees and answers: the views, the node it found, the effort
//! it spent, the [`PlacementPolicy`] trait, and [`scan`] (filter then fit over one
//! candidate partition), which every policy calls.

use super::fit::{find_node, Match};
use super::select::Candidate;
use crate::view::LmView;
use common::messages::Placement;
use common::{ConstraintSet, NodeId, Resources};

/// What a policy looks at: the GM's view of every LM (`None` until it reports) and
/// which partition of each LM is this GM's own.
#[derive(Clone, Copy, Debug)]
pub struct Views<'a> {
    pub lms: &'a [Option<LmView>],
    /// This GM's index: its partition in every LM.
    pub me: usize,
    /// Number of GMs (= partitions per LM).
    pub gms: usize,
}

/// The node chosen for a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub lm: usize,
    pub node: NodeId,
    pub placement: Placement,
}

/// What a placement examined (the processing-cost model charges for it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effort {
    pub partitions: u32,
    /// 64-bit words of bit-vectors.
    pub words: u64,
}

/// A placement policy: the candidate order, and the choice among the candidates.
pub trait PlacementPolicy: std::fmt::Debug + Send {
    /// The name it is registered under in [`policy`].
    fn name(&self) -> &'static str;

    /// The node for a task of this shape, or `None` when no candidate has one with
    /// the constraints and room; `effort` counts what was examined.
    fn place(
        &mut self,
        views: &Views,
        constraints: ConstraintSet,
        request: &Resources,
        effort: &mut Effort,
    ) -> Option<Found>;

    /// Called instead of [`PlacementPolicy::place`] for a shape known to fail (it
    /// failed since the view last gained resources): a policy with cursors moves
    /// them as if it had tried.
    fn skip(&mut self, _views: &Views) {}

    /// [`PlacementPolicy::skip`] `count` times.
    fn skip_many(&mut self, views: &Views, count: usize) {
        for _ in 0..count {
            self.skip(views);
        }
    }

    /// A topology changed (views were rebuilt): forget what was learned of them.
    fn topology_changed(&mut self) {}
}

/// Filter then fit over one candidate partition (skipped, and not counted, while its
/// LM has not reported or is busy).
pub fn scan(
    views: &Views,
    candidate: Candidate,
    constraints: ConstraintSet,
    request: &Resources,
    effort: &mut Effort,
) -> Option<Found> {
    let view = views.lms.get(candidate.lm)?.as_ref()?;
    if view.is_busy() {
        return None;
    }
    let part = &view.partitions[candidate.partition];
    effort.partitions += 1;
    // Filter first: a partition without some constraint costs nothing more, and the
    // bit-vector AND is far cheaper than comparing resources node by node; then fit
    // on the survivors only, word by word, stopping at the first node with room.
    match find_node(part, constraints, request, &mut effort.words) {
        Match::Found(slot) => Some(Found {
            lm: candidate.lm,
            node: part.nodes[slot],
            placement: candidate.placement,
        }),
        Match::NotFound => None,
    }
}
