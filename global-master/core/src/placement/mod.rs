//! Placement of one task (GUARANTEED and LRA-free work; QUEUEABLE work takes
//! [`crate::opportunistic`] instead) as a pipeline of named stages, in the style of
//! Nomad's feasibility -> rank -> select and kube-scheduler's extension points:
//!
//! ```text
//!             ┌────────────── policy (PlacementPolicy) ───────────────┐
//! task ─ known miss? ─► select ─► for each candidate: filter ─► fit ─┴─► Found
//!            │                   (partition order)  (constraint bits) (free room)
//!            └──────────────── no candidate fits ──► explain ─► Miss (a named reason)
//! ```
//!
//! - [`select`]: the candidate partitions in order (Megha: this GM's own partitions
//!   round-robin across LMs, then the other GMs' round-robin, a repartition).
//! - [`filter`]: Megha's Algorithm 1, the AND of the partition's constraint and
//!   availability bit-vectors, word by word.
//! - [`fit`]: the first surviving node with enough free resources.
//! - [`soft`]: the same filter and fit narrowed to a branch of a job's utility tree
//!   (alsched; [`crate::alsched`] ranks the branches), and the popcounts that say
//!   why a branch was not taken.
//! - [`explain`]: when nothing fits, why: no node with the constraints, none large
//!   enough (the task is unplaceable), or no free resources now.
//!
//! A policy ([`PlacementPolicy`]) chooses the candidate order and calls [`scan`]
//! (filter then fit) on each. A new policy is one file and one line in [`policy`].
//! What follows a decision (dispatch, the fairness step, requeueing) stays in
//! [`crate::master`].

pub mod contract;
pub mod explain;
pub mod filter;
pub mod fit;
pub mod megha;
pub mod select;
pub mod soft;

#[cfg(test)]
mod fixtures;

pub use contract::{scan, Effort, Found, PlacementPolicy, Views};
pub use explain::{HostCount, HostCounts, Miss};
pub use fit::Match;
pub use select::Candidate;

use crate::view::LmView;
use common::{ConstraintSet, Resources};

/// The policy used unless another is chosen.
pub const DEFAULT_POLICY: &str = "megha";

/// The registry: one line per policy.
pub fn policy(name: &str) -> Option<Box<dyn PlacementPolicy>> {
    match name {
        "megha" => Some(Box::new(megha::Megha::default())),
        _ => None,
    }
}

/// The result of the pipeline for one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub effort: Effort,
    pub result: Result<Found, Miss>,
}

/// The pipeline: a policy and the host counts that explain its misses.
#[derive(Debug)]
pub struct Pipeline {
    policy: Box<dyn PlacementPolicy>,
    host_counts: HostCounts,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new(Box::new(megha::Megha::default()))
    }
}

impl Pipeline {
    pub fn new(policy: Box<dyn PlacementPolicy>) -> Self {
        Pipeline {
            policy,
            host_counts: HostCounts::default(),
        }
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Places one task of shape (`constraints`, `request`). `known_miss`: the shape
    /// failed since the view last gained resources, so it would fail again.
    pub fn run(
        &mut self,
        views: &Views,
        constraints: ConstraintSet,
        request: Resources,
        known_miss: bool,
    ) -> Attempt {
        let mut effort = Effort::default();
        // Known misses first: the view has only shrunk since this shape failed, so a
        // scan would fail again; skipping it keeps a backlog of one shape cheap.
        let found = if known_miss {
            self.policy.skip(views);
            None
        } else {
            // Select, filter, fit: the policy's candidate order, each candidate
            // filtered by constraints then scanned for room (see `scan`).
            self.policy.place(views, constraints, &request, &mut effort)
        };
        let result = match found {
            Some(found) => Ok(found),
            // Explain last, and only on a miss: the host counts scan every node of
            // every view (cached per shape), which a hit never needs.
            None => Err(explain::explain(self.host_count(
                views.lms,
                constraints,
                request,
            ))),
        };
        Attempt { effort, result }
    }

    /// `count` tasks of shapes known to fail: the policy's cursors move as for
    /// `count` runs with `known_miss` (whose explanation the caller has).
    pub fn skip_known_misses(&mut self, views: &Views, count: usize) {
        self.policy.skip_many(views, count);
    }

    /// The (cached) host counts of a shape over `lms`.
    pub fn host_count(
        &mut self,
        lms: &[Option<LmView>],
        constraints: ConstraintSet,
        request: Resources,
    ) -> HostCount {
        self.host_counts.get(lms, constraints, request)
    }

    /// A topology changed: host counts must be counted again.
    pub fn topology_changed(&mut self) {
        self.host_counts.clear();
        self.policy.topology_changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::Placement;
    use common::reasons::PendingReason;
    use common::NodeId;
    use fixtures::{shape, view};

    #[test]
    fn the_registry_knows_the_default_policy() {
        let table: &[(&str, Option<&str>)] = &[("megha", Some("megha")), ("nomad", None)];
        for (name, want) in table {
            assert_eq!(policy(name).map(|p| p.name()), *want, "{name}");
        }
        assert_eq!(Pipeline::default().policy_name(), DEFAULT_POLICY);
    }

    #[test]
    fn a_run_finds_or_explains() {
        let mut lms = vec![Some(view(4))];
        if let Some(v) = &mut lms[0] {
            v.partitions[0].set_free(3, Resources::ZERO);
        }
        let views = Views {
            lms: &lms,
            me: 0,
            gms: 1,
        };
        let node = |n| {
            Ok(Found {
                lm: 0,
                node: NodeId(n),
                placement: Placement::Internal,
            })
        };
        let miss = |reason| Err(Miss::Unplaceable(reason));
        let busy = |eligible_nodes| Err(Miss::NoFreeResources { eligible_nodes });
        // (constraints, cores, known miss, result, partitions and words examined)
        let table = [
            (&[0u64][..], 1, false, node(1), (1, 1)),
            (&[1], 1, false, node(0), (1, 1)),
            (&[0, 1], 1, false, busy(1), (1, 1)),
            (&[0], 1, true, busy(2), (0, 0)),
            (
                &[0],
                3,
                false,
                miss(PendingReason::NoNodeLargeEnough),
                (1, 1),
            ),
            (
                &[4],
                1,
                false,
                miss(PendingReason::NoNodeWithConstraints),
                (1, 0),
            ),
        ];
        let mut pipeline = Pipeline::default();
        for (ids, cores, known_miss, want, (partitions, words)) in table {
            let (c, r) = shape(ids, cores);
            let got = pipeline.run(&views, c, r, known_miss);
            assert_eq!(
                got.result, want,
                "{ids:?}, {cores} cores, known: {known_miss}"
            );
            assert_eq!(got.effort, Effort { partitions, words }, "{ids:?}: effort");
        }
    }
}
