//! The GM's view of every LM ([`LmView`] each, `None` until the LM first reports):
//! which LMs have reported, the cluster's size, and applying a snapshot.

use crate::view::LmView;
use common::messages::{LmSnapshot, Placement};
use common::quota::JobContainers;
use common::{ConstraintSet, GmId, JobId, LmId, NodeId, Resources};
use std::sync::Arc;

/// What applying a snapshot did.
#[derive(Debug)]
pub enum SnapshotApplied {
    /// The snapshot names an LM this GM does not know.
    UnknownLm,
    /// Older than (or as old as) what the view holds: nothing changed.
    Stale,
    /// Of a lower-numbered LM life than the view follows, which has not been silent
    /// long enough to give it up ([`crate::view::TAKEOVER_AFTER`]): nothing changed.
    OtherLife,
    Applied {
        /// The LM's per-job counts before this snapshot (for quotas).
        old_jobs: Arc<Vec<(JobId, JobContainers)>>,
        /// The LM's topology changed (or first arrived): its view was built anew.
        rebuilt: bool,
        /// Some node gained free resources.
        gained: bool,
    },
}

/// Every LM's view, indexed by LM.
#[derive(Debug)]
pub struct ClusterView {
    lms: Vec<Option<LmView>>,
}

impl ClusterView {
    /// A view of `lms` LMs, none of which has reported yet.
    pub fn new(lms: usize) -> Self {
        ClusterView {
            lms: (0..lms).map(|_| None).collect(),
        }
    }

    /// Every LM's view, indexed by LM.
    pub fn lms(&self) -> &[Option<LmView>] {
        &self.lms
    }

    pub fn get(&self, l: usize) -> Option<&LmView> {
        self.lms.get(l).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, l: usize) -> Option<&mut LmView> {
        self.lms.get_mut(l).and_then(Option::as_mut)
    }

    /// The view of one LM, if its state has arrived.
    pub fn lm(&self, lm: LmId) -> Option<&LmView> {
        self.get(lm.index())
    }

    /// True once the state of every LM has arrived.
    pub fn is_full(&self) -> bool {
        self.lms.iter().all(Option::is_some)
    }

    /// True when the GM knows no LM at all.
    pub fn is_empty(&self) -> bool {
        self.lms.is_empty()
    }

    /// Nodes and total capacity of the LMs this GM has heard from.
    pub fn size(&self) -> (usize, Resources) {
        let views = self.lms.iter().flatten();
        let nodes = views.clone().map(|v| v.topology.node_count()).sum();
        (nodes, views.map(|v| v.total_capacity).sum())
    }

    /// The nodes (LM, node) whose free resources grew since the last call, over
    /// every LM.
    pub fn take_raised(&mut self) -> Vec<(u16, u32)> {
        let mut raised = Vec::new();
        for (l, view) in self.lms.iter_mut().enumerate() {
            if let Some(view) = view {
                view.take_raised(l as u16, &mut raised);
            }
        }
        raised
    }

    /// True when node `n` of LM `l` has something free in every dimension now.
    pub fn has_room(&self, l: u16, n: u32) -> bool {
        self.get(l as usize)
            .and_then(|v| v.node_now(n))
            .is_some_and(|(_, free)| !free.any_zero())
    }

    /// True when node `n` of LM `l` has `constraints` and room for `request` now.
    pub fn fits_node(
        &self,
        l: u16,
        n: u32,
        constraints: ConstraintSet,
        request: &Resources,
    ) -> bool {
        self.get(l as usize)
            .and_then(|v| v.node_now(n))
            .is_some_and(|(has, free)| constraints.satisfied_by(has) && free.fits(request))
    }

    /// A node of LM `l` is `gm`'s own (internal) or another GM's (a repartition).
    pub fn placement_of(&self, l: usize, node: NodeId, gm: GmId) -> Placement {
        match self.get(l) {
            Some(view) if view.topology.home.get(node.index()) == Some(&gm) => Placement::Internal,
            _ => Placement::Repartition,
        }
    }

    /// Applies an LM heartbeat (or the snapshot piggybacked on a response): a new
    /// topology rebuilds the LM's view; an older snapshot changes nothing.
    pub fn apply(&mut self, snapshot: &LmSnapshot) -> SnapshotApplied {
        let Some(slot) = self.lms.get_mut(snapshot.lm.index()) else {
            return SnapshotApplied::UnknownLm;
        };
        let old_jobs = slot.as_ref().map(|v| v.jobs.clone()).unwrap_or_default();
        let rebuilt = match slot {
            Some(view)
                if Arc::ptr_eq(&view.topology, &snapshot.topology)
                    || *view.topology == *snapshot.topology =>
            {
                false
            }
            _ => {
                *slot = Some(LmView::build(snapshot.topology.clone()));
                true
            }
        };
        let Some(view) = slot.as_mut() else {
            return SnapshotApplied::UnknownLm;
        };
        if !rebuilt {
            if snapshot.incarnation == view.incarnation {
                if snapshot.version <= view.version {
                    return SnapshotApplied::Stale;
                }
            } else if snapshot.incarnation < view.incarnation {
                view.other_life_streak += 1;
                if view.other_life_streak < crate::view::TAKEOVER_AFTER {
                    return SnapshotApplied::OtherLife;
                }
            }
        }
        let gained = view.apply(snapshot);
        SnapshotApplied::Applied {
            old_jobs,
            rebuilt,
            gained,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::LmTopology;
    use common::{ConstraintSet, LmId, Micros};

    fn snapshot(incarnation: u64, version: u64, free: u64) -> LmSnapshot {
        LmSnapshot {
            lm: LmId(0),
            incarnation,
            version,
            taken_at: Micros(version),
            topology: Arc::new(LmTopology {
                lm: LmId(0),
                gms: 1,
                home: vec![GmId(0)],
                constraints: vec![ConstraintSet::EMPTY],
                capacity: vec![Resources::cores(4, 4096)],
            }),
            free: Arc::new(vec![Resources::cores(free, 4096)]),
            free_changed: Arc::default(),
            applied_batches: vec![0],
            usage: Vec::new(),
            queue_delay: Arc::default(),
            queueable_held: Arc::default(),
            jobs: Arc::default(),
        }
    }

    fn applied(view: &mut ClusterView, s: LmSnapshot) -> bool {
        matches!(view.apply(&s), SnapshotApplied::Applied { .. })
    }

    #[test]
    fn a_higher_life_replaces_at_once_whatever_its_version() {
        let mut view = ClusterView::new(1);
        assert!(applied(&mut view, snapshot(100, 500, 1)));
        assert!(!applied(&mut view, snapshot(100, 400, 2)), "older version");
        assert!(applied(&mut view, snapshot(200, 7, 3)), "a newer life");
        assert_eq!(view.get(0).unwrap().incarnation, 200);
    }

    /// The frozen-view bug: an LM restarted on a host whose clock is behind numbers
    /// its life (and versions) lower; its snapshots were discarded for good. Now the
    /// view follows it after a few snapshots in a row from that life alone.
    #[test]
    fn a_lower_life_is_followed_once_the_held_life_stays_silent() {
        let mut view = ClusterView::new(1);
        assert!(applied(&mut view, snapshot(1_000, 1_005, 1)));
        for v in 1..crate::view::TAKEOVER_AFTER {
            assert!(
                matches!(
                    view.apply(&snapshot(50, 50 + v as u64, 2)),
                    SnapshotApplied::OtherLife
                ),
                "snapshot {v} of the lower life"
            );
        }
        assert!(applied(&mut view, snapshot(50, 60, 3)));
        let v = view.get(0).unwrap();
        assert_eq!((v.incarnation, v.version), (50, 60));
        // One snapshot of the held life resets the count.
        let mut view = ClusterView::new(1);
        assert!(applied(&mut view, snapshot(1_000, 1_005, 1)));
        assert!(!applied(&mut view, snapshot(50, 51, 2)));
        assert!(applied(&mut view, snapshot(1_000, 1_006, 1)));
        for _ in 1..crate::view::TAKEOVER_AFTER {
            assert!(!applied(&mut view, snapshot(50, 52, 2)));
        }
    }
}
