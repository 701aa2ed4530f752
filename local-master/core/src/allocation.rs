//! What the LM holds per task: a running task's allocation, a QUEUEABLE task
//! waiting in a worker's queue. A leaf.

use common::messages::Placement;
use common::{GmId, Micros, NodeId, QueueId, Resources, TaskSpec};

/// Resources held by one task. A repartitioned task holds them on behalf of the
/// requesting GM's partition (the paper's logical node) until it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub node: NodeId,
    pub resources: Resources,
    pub gm: GmId,
    pub placement: Placement,
    pub queue: QueueId,
    pub started: bool,
    /// When the worker reported the start (for lost-work accounting).
    pub started_at: Option<Micros>,
    /// The task itself, to requeue it if it is preempted.
    pub task: TaskSpec,
    /// When a QUEUEABLE task was promoted to GUARANTEED (its kind is GUARANTEED
    /// from then on).
    pub promoted_at: Option<Micros>,
    /// Launched by a gang's commit: never a preemption victim (a gang is preempted
    /// whole or not at all, and this LM holds only its part: not at all).
    pub gang: bool,
}

/// A task the LM ordered killed (preempted, reclaimed or shed), waiting for its
/// worker to confirm: then it goes back to `gm`, which owns its queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingKill {
    pub gm: GmId,
    pub node: NodeId,
    pub task: TaskSpec,
    /// Work the kill wastes (time it ran).
    pub lost: Micros,
}

/// A QUEUEABLE task sent to a worker's queue, not yet reported started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub node: NodeId,
    pub gm: GmId,
    pub task: TaskSpec,
}
