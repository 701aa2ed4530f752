//! Long-running applications (MEDEA): tag-based placement constraints and four
//! interchangeable placers for the designated Global Master. Pure: no I/O, no
//! clocks (the HiGHS time cap aside), no unseeded randomness.
//!
//! Layout:
//! - [`model`]: tags, containers, nodes, node groups, the cluster.
//! - [`constraints`]: placement constraints (affinity, anti-affinity, cardinality,
//!   DNF, weights); [`request`]: an LRA's request (its containers and constraints);
//!   [`manager`]: the [`ConstraintManager`] of every active constraint.
//! - [`problem`]: what a placer takes ([`Problem`]) and returns ([`Solution`]).
//! - [`ilp`]: MEDEA-ILP; [`heuristics`]: MEDEA-NC and MEDEA-TP; [`kube`]: J-KUBE.
//! - [`metrics`]: violations, fragmentation, load imbalance (MEDEA 7.4).
//! - [`soft_ilp`]: not an LRA placer: the exact placement of a batch of jobs with
//!   utility trees (soft constraints, docs/alsched.md) on the same HiGHS backend.
//!
//! Typical use on the designated GM, once per scheduling interval:
//! ```text
//! let problem = Problem::new(&cluster, &pending, &manager)?;
//! let solution = Placer::Ilp(IlpConfig::default()).solve(&problem);
//! // send each Placed(nodes) to the LMs; register placed LRAs' constraints:
//! manager.add_application(id, constraints, cluster.groups())?;
//! ```

mod compiled;
pub mod constraints;
mod greedy;
pub mod heuristics;
pub mod ilp;
mod ilp_model;
pub mod kube;
pub mod manager;
pub mod metrics;
pub mod model;
pub mod problem;
pub mod request;
pub mod soft_ilp;

pub use constraints::{ConstraintError, PlacementConstraint, TagConstraint, HARD_WEIGHT};
pub use heuristics::{NodeCandidatesPlacer, TagPopularityPlacer};
pub use ilp::{IlpConfig, IlpPlacer};
pub use kube::KubePlacer;
pub use manager::ConstraintManager;
pub use metrics::{quality, quality_of, Quality, FRAGMENT_THRESHOLD};
pub use model::{
    app_tag, ClusterState, ContainerRequest, LraId, NodeGroupSpec, NodeState, Tag, TagSet,
};
pub use problem::{LraOutcome, NotPlaced, ObjectiveWeights, Problem, Solution};
pub use request::LraRequest;

/// Every LRA placer behind one interface.
#[derive(Clone, Copy, Debug)]
pub enum Placer {
    Ilp(IlpConfig),
    NodeCandidates,
    TagPopularity,
    Kube,
}

impl Placer {
    /// Places the LRAs of `problem`: each gets all its containers or a reason.
    pub fn solve(&self, problem: &Problem<'_>) -> Solution {
        match self {
            Placer::Ilp(config) => IlpPlacer::new(*config).solve(problem),
            Placer::NodeCandidates => NodeCandidatesPlacer.solve(problem),
            Placer::TagPopularity => TagPopularityPlacer.solve(problem),
            Placer::Kube => KubePlacer.solve(problem),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Placer::Ilp(_) => "ilp",
            Placer::NodeCandidates => "nc",
            Placer::TagPopularity => "tp",
            Placer::Kube => "j-kube",
        }
    }

    /// Parses `ilp`, `nc`, `tp` or `j-kube` (ILP with the default configuration).
    pub fn parse(name: &str) -> Option<Placer> {
        match name {
            "ilp" => Some(Placer::Ilp(IlpConfig::default())),
            "nc" => Some(Placer::NodeCandidates),
            "tp" => Some(Placer::TagPopularity),
            "j-kube" | "kube" => Some(Placer::Kube),
            _ => None,
        }
    }
}
