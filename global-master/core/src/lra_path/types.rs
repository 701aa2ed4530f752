//! What the designated GM's LRA path takes and answers: its configuration, a
//! submission and why it may be refused, the state of each container, why an LRA
//! waits, its status for the API, and the result of one pass.

use crate::outputs::PassOutput;
use common::reasons::RejectReason;
use common::{LmId, Micros, NodeId, QueueId};
use lra_placer::{LraId, LraRequest, NodeGroupSpec, NotPlaced, Placer};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// How the designated GM runs its LRA placer.
#[derive(Clone, Debug)]
pub struct LraPathConfig {
    /// At most one placement per interval (MEDEA uses 10 s).
    pub interval: Micros,
    pub placer: Placer,
    /// Nodes per rack, consecutive in node-id order within each LM; 0 makes each LM
    /// one rack. The `rack` node group is built from it.
    pub nodes_per_rack: u32,
    /// Operator-defined node groups (fault domains, upgrade domains, ...), over the
    /// placer's node numbering: LM by LM, in node-id order within each LM.
    pub groups: Arc<Vec<NodeGroupSpec>>,
}

impl Default for LraPathConfig {
    fn default() -> Self {
        LraPathConfig {
            interval: Micros::from_secs(10),
            placer: Placer::Ilp(lra_placer::IlpConfig::default()),
            nodes_per_rack: 0,
            groups: Arc::default(),
        }
    }
}

/// An LRA as submitted: the placer's request (its id doubles as the job id of its
/// container tasks) plus what its containers run as.
#[derive(Clone, Debug)]
pub struct LraSubmission {
    pub request: LraRequest,
    pub queue: QueueId,
    /// Per container: how long it holds its resources once started.
    pub durations: Vec<Micros>,
}

/// Why a submission was refused (nothing of it was kept).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LraRefused {
    #[error("this GM is not the designated GM; LRAs go to GM {designated}")]
    NotDesignated { designated: u16 },
    #[error("{0} was already submitted")]
    Duplicate(LraId),
    #[error("durations: {given} given for {containers} containers")]
    Durations { given: usize, containers: usize },
    #[error(transparent)]
    Invalid(#[from] lra_placer::problem::ProblemError),
}

/// What one container is doing.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum ContainerState {
    /// Waiting for a placement.
    Pending,
    /// Sent to `lm`, awaiting its answer.
    Launching {
        lm: LmId,
        node: NodeId,
    },
    Running {
        lm: LmId,
        node: NodeId,
    },
    /// Finished or preempted.
    Ended {
        lm: LmId,
        node: NodeId,
    },
}

impl ContainerState {
    /// Where the container is (or was), unless it still waits for a node.
    pub fn at(&self) -> Option<(LmId, NodeId)> {
        match *self {
            ContainerState::Pending => None,
            ContainerState::Launching { lm, node }
            | ContainerState::Running { lm, node }
            | ContainerState::Ended { lm, node } => Some((lm, node)),
        }
    }

    /// The container holds resources and its tags count.
    pub fn is_deployed(&self) -> bool {
        matches!(
            self,
            ContainerState::Launching { .. } | ContainerState::Running { .. }
        )
    }
}

/// Why an LRA waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LraWait {
    /// Submitted; the next interval will place it.
    NextInterval,
    /// The placer could not place every container.
    NotPlaced(NotPlaced),
    /// LMs refused `refused` containers of the last placement (state changed since).
    Conflict { refused: u32, reason: RejectReason },
    /// The launch batch carrying `containers` containers never reached `lm`.
    LmUnreachable { lm: LmId, containers: u32 },
    /// The placer's answer broke a capacity (a placer bug); nothing was sent.
    CheckFailed(String),
}

impl fmt::Display for LraWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LraWait::NextInterval => write!(f, "waiting for the next scheduling interval"),
            LraWait::NotPlaced(why) => write!(f, "not placed: {why}"),
            LraWait::Conflict { refused, reason } => write!(
                f,
                "{refused} container(s) refused by the LM ({reason}); resubmitted"
            ),
            LraWait::LmUnreachable { lm, containers } => {
                write!(
                    f,
                    "{containers} container(s) never reached {lm}; resubmitted"
                )
            }
            LraWait::CheckFailed(e) => write!(f, "placement refused by the capacity check: {e}"),
        }
    }
}

/// What `GET /v1/lras/{id}` shows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LraStatus {
    pub lra: u64,
    /// `pending`, `launching`, `running` or `finished`.
    pub state: &'static str,
    /// Why it waits (pending only).
    pub reason: Option<String>,
    pub containers: Vec<ContainerStatus>,
    pub placements: u32,
    pub resubmissions: u32,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContainerStatus {
    pub task: String,
    #[serde(flatten)]
    pub state: ContainerState,
}

/// The result of one LRA pass.
#[derive(Debug, Default)]
pub struct LraPassOutput {
    /// Decisions (one `Dispatched` per container sent) and the launch batches.
    pub pass: PassOutput,
    /// LRAs sent to the LMs, with the node of each container sent.
    pub placed: Vec<(LraId, Vec<(LmId, NodeId)>)>,
    /// LRAs left waiting, and why.
    pub waiting: Vec<(LraId, LraWait)>,
    /// LRAs dropped because their constraints no longer validate against the cluster.
    pub refused: Vec<(LraId, String)>,
    pub placer: &'static str,
    /// Set when the ILP placer returned its heuristic answer, and why.
    pub fallback: Option<String>,
}
