//! What every LRA placer takes and returns: a [`Problem`] (the cluster, the LRAs of
//! one scheduling interval, the active constraints) and a [`Solution`] (per LRA a
//! placement of every container, or the reason it was not placed).

use super::constraints::{ConstraintError, PlacementConstraint};
use super::manager::ConstraintManager;
use super::model::{ClusterState, LraId, ModelError};
use super::request::LraRequest;
use common::{NodeId, Resources};
use std::collections::BTreeSet;
use std::fmt;

/// The weights of the objective (MEDEA equation 1; the paper uses 1, 0.5, 0.25),
/// plus an optional load-balance term (0 leaves it out).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjectiveWeights {
    pub placed: f64,
    pub violations: f64,
    pub fragmentation: f64,
    pub load_balance: f64,
}

impl Default for ObjectiveWeights {
    fn default() -> Self {
        ObjectiveWeights {
            placed: 1.0,
            violations: 0.5,
            fragmentation: 0.25,
            load_balance: 0.0,
        }
    }
}

/// One scheduling interval's placement problem.
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    pub cluster: &'a ClusterState,
    pub lras: &'a [LraRequest],
    /// Every active constraint: deployed and pending applications' and the operator's.
    pub constraints: Vec<PlacementConstraint>,
    pub weights: ObjectiveWeights,
}

/// Why a problem was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProblemError {
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    #[error("lras[{index}] ({lra}): {reason}")]
    Lra {
        index: usize,
        lra: LraId,
        reason: String,
    },
}

impl<'a> Problem<'a> {
    /// Validates the LRAs (unique ids, at least one container each) and gathers the
    /// effective constraints from `manager` plus those of `lras`.
    pub fn new(
        cluster: &'a ClusterState,
        lras: &'a [LraRequest],
        manager: &ConstraintManager,
    ) -> Result<Self, ProblemError> {
        let mut seen = BTreeSet::new();
        for (index, lra) in lras.iter().enumerate() {
            let err = |reason: &str| ProblemError::Lra {
                index,
                lra: lra.id,
                reason: reason.into(),
            };
            if !seen.insert(lra.id) {
                return Err(err("the id is used twice in the batch"));
            }
            if lra.containers.is_empty() {
                return Err(err("containers: the application asks for no container"));
            }
            if lra
                .containers
                .iter()
                .any(|c| c.tags.iter().any(|t| t.trim().is_empty()))
            {
                return Err(err("containers[].tags: a tag is empty"));
            }
        }
        let constraints = manager.effective_for(lras, cluster.groups())?;
        Ok(Problem {
            cluster,
            lras,
            constraints,
            weights: ObjectiveWeights::default(),
        })
    }

    pub fn with_weights(mut self, weights: ObjectiveWeights) -> Self {
        self.weights = weights;
        self
    }
}

/// Why an LRA was not placed. A value, not an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotPlaced {
    /// No node of the cluster has enough free resources for this container.
    NoNodeFits {
        container: usize,
        resources: Resources,
    },
    /// Nodes could hold the container, but not together with the rest of the batch.
    NoRoomLeft { container: usize },
    /// The optimiser found placing it worth less than what it would cost elsewhere.
    NotChosen,
}

impl fmt::Display for NotPlaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotPlaced::NoNodeFits {
                container,
                resources,
            } => {
                write!(f, "no node has {resources} free for container {container}")
            }
            NotPlaced::NoRoomLeft { container } => {
                write!(
                    f,
                    "no room left for container {container} alongside the rest of the batch"
                )
            }
            NotPlaced::NotChosen => {
                write!(f, "the optimiser could not place every container together")
            }
        }
    }
}

/// The fate of one LRA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LraOutcome {
    /// `nodes[j]` runs container `j`.
    Placed(Vec<NodeId>),
    NotPlaced(NotPlaced),
}

/// A placer's answer for one problem, in the order of `problem.lras`.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    pub placer: &'static str,
    pub outcomes: Vec<(LraId, LraOutcome)>,
    /// Set when the ILP placer returned its heuristic answer, and why.
    pub fallback: Option<String>,
}

impl Solution {
    pub fn placed_lras(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|(_, o)| matches!(o, LraOutcome::Placed(_)))
            .count()
    }

    /// Checks that the solution answers every LRA, places every container of a placed
    /// LRA, and fits the free resources of every node in every dimension.
    pub fn check(&self, problem: &Problem<'_>) -> Result<(), ModelError> {
        let nodes = problem.cluster.nodes();
        let mut free: Vec<Resources> = nodes.iter().map(|n| n.free).collect();
        if self.outcomes.len() != problem.lras.len() {
            return Err(ModelError::Solution {
                lra: LraId(0),
                reason: format!(
                    "{} outcomes for {} applications",
                    self.outcomes.len(),
                    problem.lras.len()
                ),
            });
        }
        for ((id, outcome), lra) in self.outcomes.iter().zip(problem.lras) {
            let err = |reason: String| ModelError::Solution {
                lra: lra.id,
                reason,
            };
            if *id != lra.id {
                return Err(err(format!("answered as {id}")));
            }
            let LraOutcome::Placed(at) = outcome else {
                continue;
            };
            if at.len() != lra.containers.len() {
                return Err(err(format!(
                    "{} nodes for {} containers",
                    at.len(),
                    lra.containers.len()
                )));
            }
            for (j, (node, c)) in at.iter().zip(&lra.containers).enumerate() {
                let slot = free
                    .get_mut(node.index())
                    .ok_or_else(|| err(format!("container {j} on unknown {node}")))?;
                *slot = slot
                    .checked_sub(&c.resources)
                    .ok_or_else(|| err(format!("container {j} overcommits {node}")))?;
            }
        }
        Ok(())
    }
}
