//! "No" as a value: why a task is not (yet) running.

use crate::{GmId, JobId, LmId, Resources};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why an LM refused a launch request. Every refusal carries the LM's current state
/// back to the GM (in the response), so the next attempt uses fresher data.
///
/// Externally tagged (serde's default): it travels in bincode inside
/// `LaunchResponse`, and bincode cannot decode internally tagged enums.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The node id does not exist in this LM.
    UnknownNode,
    /// An internal launch named a node that belongs to another GM's partition.
    NotInPartition { home: GmId },
    /// A repartition named a node of the GM's own partition.
    NotExternal,
    /// The node lacks a placement constraint the task requires.
    ConstraintsNotMet,
    /// The node no longer has the requested resources free (stale view).
    InsufficientResources { free: Resources },
    /// The task id is already running or was already launched here.
    Duplicate,
    /// A QUEUEABLE task larger than the share of the node QUEUEABLE work may use.
    OverQueueableCap { cap: Resources },
    /// The task's job already has `limit` QUEUEABLE containers outstanding on this
    /// LM (the LM's share of the job's quota, Mercury 4.1).
    OverQueueableQuota { job: JobId, limit: u32 },
    /// The request itself is malformed (zero resources, ...).
    Invalid { detail: String },
    /// The node's worker stopped answering: nothing runs there until it is back.
    NodeDown,
    /// An operator drained the node: no new work lands there until it is undrained.
    NodeDrained,
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::UnknownNode => write!(f, "unknown node"),
            RejectReason::NotInPartition { home } => {
                write!(f, "node belongs to the partition of {home}")
            }
            RejectReason::NotExternal => write!(f, "repartition asked for an internal node"),
            RejectReason::ConstraintsNotMet => write!(f, "node lacks a required constraint"),
            RejectReason::InsufficientResources { free } => {
                write!(f, "node has only {free} free")
            }
            RejectReason::Duplicate => write!(f, "task already launched"),
            RejectReason::OverQueueableCap { cap } => {
                write!(f, "QUEUEABLE work may use at most {cap} of the node")
            }
            RejectReason::OverQueueableQuota { job, limit } => {
                write!(
                    f,
                    "{job} already has {limit} QUEUEABLE containers here (its quota)"
                )
            }
            RejectReason::Invalid { detail } => write!(f, "invalid request: {detail}"),
            RejectReason::NodeDown => write!(f, "node is down (its worker stopped answering)"),
            RejectReason::NodeDrained => {
                write!(f, "node is drained (an operator took it out of service)")
            }
        }
    }
}

/// Why a GM could not place a task on this attempt (the task stays queued), or can
/// never place it (`NoNodeCanHost`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum PendingReason {
    /// Still waiting for the first state of some LM.
    NoStateYet,
    /// No node anywhere has every constraint the task requires.
    NoNodeWithConstraints,
    /// Nodes with the constraints exist, but none is big enough even when empty.
    NoNodeLargeEnough,
    /// Eligible nodes exist, but the view shows none with enough free resources.
    NoFreeResources { eligible_nodes: u64 },
    /// The LM refused the last attempt; the task was requeued.
    RejectedByLm { rejection: RejectReason },
    /// The task's user is over its share and contention holds it back.
    OverShare,
    /// The launch request could not be delivered to the LM; the task was requeued.
    LmUnreachable { lm: LmId },
    /// The LM answered that it takes no new work for now and applied nothing (its
    /// broker backlog is full, or its workers have not registered yet): the task
    /// was requeued, and the GM places on other LMs until the LM's retry-after
    /// time is over.
    LmBusy { lm: LmId },
    /// The task was running on `lm` and was preempted for a queue under its share;
    /// it was queued again and starts afresh.
    Preempted { lm: LmId },
    /// A QUEUEABLE task held back: its job has `limit` QUEUEABLE containers
    /// outstanding, its quota (Mercury 4.1). It is tried again when one ends.
    OverQueueableQuota { limit: u32 },
    /// The last run failed (or was lost); the job's retry policy runs it again:
    /// `attempt` is the run to come (2 for the first retry).
    Retrying { attempt: u32, failure: String },
    /// Delay scheduling (alsched soft constraints, issue 36): no preferred branch of
    /// the job's utility tree has room; the task waits for one until the job has
    /// waited `relax_after`, at `relax_at_us` (GM time, microseconds), then takes
    /// a lower branch; `u64::MAX` when the wait is counted in passes only
    /// (`relax_after_passes`).
    WaitingForPreferred { relax_at_us: u64 },
}

impl PendingReason {
    /// True when waiting can never help: the task is reported as unplaceable.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            PendingReason::NoNodeWithConstraints | PendingReason::NoNodeLargeEnough
        )
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PendingReason::NoStateYet => write!(f, "waiting for local master state"),
            PendingReason::NoNodeWithConstraints => {
                write!(f, "no node has all required constraints")
            }
            PendingReason::NoNodeLargeEnough => {
                write!(f, "no node with the constraints is large enough")
            }
            PendingReason::NoFreeResources { eligible_nodes } => write!(
                f,
                "{eligible_nodes} eligible nodes, none with enough free resources"
            ),
            PendingReason::RejectedByLm { rejection } => {
                write!(f, "local master refused: {rejection}")
            }
            PendingReason::OverShare => write!(f, "queue is over its share"),
            PendingReason::LmUnreachable { lm } => write!(f, "{lm} could not be reached"),
            PendingReason::LmBusy { lm } => {
                write!(
                    f,
                    "{lm} takes no new work for now; placed elsewhere meanwhile"
                )
            }
            PendingReason::Preempted { lm } => write!(
                f,
                "preempted on {lm} for a queue under its share; queued again"
            ),
            PendingReason::OverQueueableQuota { limit } => write!(
                f,
                "job has {limit} QUEUEABLE containers outstanding, its quota"
            ),
            PendingReason::Retrying { attempt, failure } => {
                write!(f, "attempt {attempt} after the last one failed: {failure}")
            }
            PendingReason::WaitingForPreferred {
                relax_at_us: u64::MAX,
            } => write!(
                f,
                "waiting for a preferred placement for some more passes (delay scheduling)"
            ),
            PendingReason::WaitingForPreferred { relax_at_us } => write!(
                f,
                "waiting for a preferred placement until {:.3} s (delay scheduling)",
                *relax_at_us as f64 / 1e6
            ),
        }
    }
}
