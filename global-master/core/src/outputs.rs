//! What the GM core is configured with and what it answers: configuration, per-task
//! decisions of a scheduling pass, the handling of an LM response, and counters.

use common::fairness::FairnessConfig;
use common::messages::{LaunchBatch, Placement, PreemptRequest};
use common::quota::QueueableQuota;
use common::reasons::{PendingReason, RejectReason};
use common::{GmId, LmId, NodeId, QueueId, TaskId};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct GmConfig {
    pub id: GmId,
    /// Number of GMs (= partitions per LM).
    pub gms: u16,
    /// Number of LMs whose state the GM waits for before placing work.
    pub lms: u16,
    /// Largest launch batch per LM (the reference simulator uses 100).
    pub batch_size: usize,
    /// Queue shares; `None` disables preemption (fairness acts only with it).
    pub fairness: Option<Arc<FairnessConfig>>,
    /// The GM that is the central scheduler for GUARANTEED work (and LRAs).
    pub designated_gm: GmId,
    /// QUEUEABLE work goes to one of this many nodes with the least estimated
    /// queuing delay (Mercury's top-k), chosen round-robin.
    pub queueable_top_k: usize,
    /// Share of a node QUEUEABLE work may use (the LMs' cap), to skip nodes that
    /// would refuse a task outright.
    pub queueable_cap: f64,
    /// The LRA placer of the designated GM.
    pub lra: super::lra_path::LraPathConfig,
    /// Per-job limit on outstanding QUEUEABLE containers (Mercury 4.1); this GM is
    /// authoritative for the jobs submitted to it.
    pub queueable_quota: QueueableQuota,
}

impl GmConfig {
    /// A GM without fairness and with the reference batch size of 100.
    pub fn new(id: GmId, gms: u16, lms: u16) -> Self {
        GmConfig {
            id,
            gms,
            lms,
            batch_size: 100,
            fairness: None,
            designated_gm: GmId(0),
            queueable_top_k: 4,
            queueable_cap: 1.0,
            lra: super::lra_path::LraPathConfig::default(),
            queueable_quota: QueueableQuota::UNLIMITED,
        }
    }
}

/// What happened to one task in a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecisionOutcome {
    Dispatched {
        lm: LmId,
        node: NodeId,
        placement: Placement,
        /// Index into [`PassOutput::batches`] of the batch carrying the request.
        batch: usize,
    },
    Requeued(PendingReason),
    Unplaceable(PendingReason),
    /// No room under contention: the GM asked `lm` to preempt tasks of `victim`
    /// (see [`PassOutput::preempts`]).
    Preempting {
        lm: LmId,
        victim: QueueId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub task: TaskId,
    /// Partitions examined for this task.
    pub partitions: u32,
    /// 64-bit words of bit-vectors examined (the cost model charges per word).
    pub words: u64,
    pub outcome: DecisionOutcome,
}

/// The result of one scheduling pass, in decision order.
#[derive(Debug, Default)]
pub struct PassOutput {
    pub decisions: Vec<Decision>,
    pub batches: Vec<LaunchBatch>,
    pub preempts: Vec<PreemptRequest>,
}

/// The result of handling an LM response.
#[derive(Debug, Default)]
pub struct ResponseOutput {
    pub launched: Vec<TaskId>,
    pub rejected: Vec<(TaskId, RejectReason)>,
    /// Outcomes for tasks this GM was not waiting for (already answered or unknown).
    pub unexpected: Vec<TaskId>,
}

/// Counters for reports and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GmStats {
    pub submitted: u64,
    pub dispatched_internal: u64,
    pub dispatched_repartition: u64,
    pub launched: u64,
    pub lm_rejections: u64,
    /// Launches the LM answered "duplicate" (it already held the task): counted as
    /// launched.
    pub duplicates_answered: u64,
    pub requeues: u64,
    pub unplaceable: u64,
    pub snapshots_applied: u64,
    pub stale_snapshots: u64,
    pub preempt_attempts: u64,
    pub preempt_refused: u64,
    /// Tasks of this GM's queues that were preempted and queued again.
    pub preempted_requeued: u64,
    /// QUEUEABLE tasks sent to a node by queuing-delay estimate.
    pub dispatched_queueable: u64,
    /// GUARANTEED tasks submitted to a GM that is not the designated one (scheduled
    /// all the same, against this GM's view).
    pub guaranteed_elsewhere: u64,
    /// LRAs accepted (designated GM).
    pub lra_submitted: u64,
    /// LRA placer runs (at most one per interval).
    pub lra_passes: u64,
    /// LRAs (or their resubmitted remainders) the placer placed and sent.
    pub lra_placed: u64,
    /// Placer answers leaving an LRA waiting (counted per LRA per pass).
    pub lra_not_placed: u64,
    /// LRA containers refused by an LM (or lost on the way): conflicts.
    pub lra_conflicts: u64,
    /// LRAs resubmitted to the next interval after a conflict.
    pub lra_resubmissions: u64,
    pub lra_containers_launched: u64,
    pub lra_containers_ended: u64,
    /// QUEUEABLE tasks held back because their job was at its quota.
    pub quota_held: u64,
}
