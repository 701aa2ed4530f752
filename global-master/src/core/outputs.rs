//! What the GM core is configured with and what it answers: configuration, per-task
//! decisions of a scheduling pass, the handling of an LM response, and counters.

use common::fairness::FairnessConfig;
use common::messages::{LaunchBatch, Placement, PreemptRequest};
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
}
