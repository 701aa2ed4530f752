//! What the GM core answers: per-task decisions of a scheduling pass, the handling
//! of an LM response, and counters. A leaf: it imports nothing from the crate.

use common::messages::{LaunchBatch, Placement, PreemptRequest};
use common::reasons::{PendingReason, RejectReason};
use common::{LmId, NodeId, QueueId, TaskId};

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

/// Tasks of one class that missed once more, counted in bulk (known misses of a
/// full retry, see [`crate::queue::Popped::Missed`]): each is a decision that
/// examined nothing and requeued its task, as its own [`Decision`] would have been.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownMisses {
    /// The decisions of the pass before these.
    pub after: usize,
    pub count: u64,
}

/// The result of one scheduling pass, in decision order.
#[derive(Debug, Default)]
pub struct PassOutput {
    pub decisions: Vec<Decision>,
    /// Known misses counted in bulk, by place among `decisions` (only when the GM
    /// counts them so: [`crate::GmConfig::bulk_known_misses`]).
    pub known_misses: Vec<KnownMisses>,
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
    /// Tasks of this GM the LMs reported finished (exit 0) and failed.
    pub tasks_finished: u64,
    pub tasks_failed: u64,
    /// Tasks of this GM the LMs reported started.
    pub tasks_started: u64,
    /// Failed (or lost) tasks run again under their job's retry policy.
    pub tasks_retried: u64,
    /// Jobs cancelled, tasks taken out of the queues for it or stopped by an LM,
    /// cancel requests sent to LMs and those given up after every resend failed.
    pub jobs_cancelled: u64,
    pub tasks_cancelled: u64,
    pub cancels_sent: u64,
    pub cancels_abandoned: u64,
    pub lm_rejections: u64,
    /// Launches the LM answered "duplicate" (it already held the task): counted as
    /// launched.
    pub duplicates_answered: u64,
    /// Ends and starts of runs already replaced by a retry (late reports of lost
    /// runs), and repeated ends: ignored.
    pub stale_run_reports: u64,
    /// Finishes of runs reported lost, heard while their retry had not gone out:
    /// taken as the task's end (the retry withdrawn).
    pub late_finishes_taken: u64,
    /// Runs a restarted GM resumed that left its queues unlaunched: a run of its
    /// previous life finished the task, or failed and spent its retry budget.
    pub resumed_runs_withdrawn: u64,
    /// Launch answers for a task that no longer awaits that batch's answer (its
    /// run was replaced by a retry, or the batch was given up): ignored.
    pub stale_answers: u64,
    /// Runs of a launch batch that never reached its LM whose task had ended for
    /// good meanwhile (an earlier run's end came): not queued again.
    pub undelivered_after_end: u64,
    /// Runs that ended before their launch batch was answered (the answer was
    /// lost or is late): no longer awaited.
    pub ended_before_answer: u64,
    pub requeues: u64,
    /// Placement attempts of tasks tried before (blocked or refused ones again).
    pub retries: u64,
    /// Blocked tasks woken by a gain of resources (all of them under
    /// `WakePolicy::All`).
    pub woken: u64,
    pub unplaceable: u64,
    pub snapshots_applied: u64,
    pub stale_snapshots: u64,
    /// Snapshots refused because their LM cuts its nodes for another number of GMs
    /// (another cluster on the same broker, or a misconfigured LM).
    pub foreign_snapshots: u64,
    /// Snapshots of a lower-numbered LM life than the view follows, ignored (an LM
    /// restarted with a clock behind, until the old life is given up; or two LMs with
    /// one id).
    pub other_life_snapshots: u64,
    /// Snapshots that brought a new life of an LM the view had followed (the LM
    /// restarted).
    pub lm_new_lives: u64,
    /// Requests an LM answered busy (it applied nothing and takes no new work for
    /// a while): placement passed it by until then.
    pub lm_busy: u64,
    /// Batch solves of soft constraints (`GmConfig::soft_ilp_ms`) that planned,
    /// and those that failed (timeout, solver fault: the greedy step placed the
    /// batch instead).
    pub soft_ilp_solves: u64,
    pub soft_ilp_fallbacks: u64,
    pub preempt_attempts: u64,
    pub preempt_refused: u64,
    /// Tasks of this GM's queues that were preempted and queued again.
    pub preempted_requeued: u64,
    /// Asks about held preemption requests whose final answer is overdue (one
    /// per request per ask), and their outcomes: still held (asked again a
    /// period later), launched (it runs), not held (queued again), unanswered
    /// within the period (asked again), late (about a request no longer waited
    /// for: a repeated answer, or one settled meanwhile).
    pub held_asks_sent: u64,
    pub held_asks_still_held: u64,
    pub held_asks_launched: u64,
    pub held_asks_not_held: u64,
    pub held_asks_unanswered: u64,
    pub held_asks_late: u64,
    /// Final answers of held requests that came after the GM forgot them.
    pub held_answers_late: u64,
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
