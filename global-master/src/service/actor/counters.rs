//! The actor's own counters (those the core does not keep), read by the metrics
//! page ([`crate::service::observe::report`]) and the dashboard.

use common::protocol::facts::KindCounts;
use common::Micros;
use service_kit::metrics::Histogram;
use std::collections::BTreeMap;

/// Counters the core does not keep.
#[derive(Debug)]
pub struct ShellMetrics {
    pub launch_latency: Histogram,
    pub passes: u64,
    /// Requests sent to the LMs, by kind ([`GmToLm::kind`](common::protocol::GmToLm::kind)).
    pub sent: KindCounts,
    pub batches_abandoned: u64,
    /// Failures a worker listed to a restarted LM that this GM took as their
    /// tasks' ends and published (their event may have died with the LM).
    pub reannounced_failures: u64,
    /// Ends an LM left for this GM to publish that were not the current run of an
    /// open task here: ignored.
    pub reannounced_stale: u64,
    /// Launch batches in doubt whose resending stopped because every run in them
    /// ended (heard on the LM's stream), and runs left out of a resent batch so.
    pub resends_moot: u64,
    pub resend_runs_left_out: u64,
    pub submissions_refused_full: u64,
    /// Launch outcomes for tasks this GM was not waiting for (logged and ignored),
    /// other than those of [`Self::answers_after_end`].
    pub unexpected_outcomes: u64,
    /// Launch answers that came after their task's end (the end overtook them).
    pub answers_after_end: u64,
    /// Journal writes that failed (submissions refused, ends not recorded).
    pub journal_errors: u64,
    /// Tasks resubmitted from the journal at start.
    pub recovered_tasks: u64,
    /// Launch batches and preemption requests not sent because the GM had stopped
    /// (see `shutdown::LeaveQueued`).
    pub launches_withheld: u64,
    /// New lives of LMs the core took up (see `lm_restart`).
    pub lm_restarts_seen: u64,
    /// Restarted LMs that answered which of this GM's tasks they hold, and those
    /// that never did.
    pub lm_reconciles: u64,
    pub lm_reconciles_failed: u64,
    /// Tasks ended by those answers: finished (remembered by the LM) and lost
    /// (neither held nor finished; the LM reports them).
    pub reconciled_finished: u64,
    pub reconciled_lost: u64,
    /// A restarted GM's tasks waiting to be resumed until an LM that may run them
    /// answers (see `resume`), and those resumed without that answer after the
    /// doubt timeout.
    pub resume_in_doubt: u64,
    pub resume_doubt_expired: u64,
    pub last_snapshot: Vec<Option<Micros>>,
}

impl ShellMetrics {
    /// Every counter at zero, for `lms` LMs.
    pub fn new(lms: usize) -> Self {
        ShellMetrics {
            launch_latency: launch_latency(),
            passes: 0,
            sent: KindCounts::default(),
            resends_moot: 0,
            resend_runs_left_out: 0,
            batches_abandoned: 0,
            reannounced_failures: 0,
            reannounced_stale: 0,
            submissions_refused_full: 0,
            unexpected_outcomes: 0,
            answers_after_end: 0,
            journal_errors: 0,
            recovered_tasks: 0,
            launches_withheld: 0,
            lm_restarts_seen: 0,
            lm_reconciles: 0,
            lm_reconciles_failed: 0,
            reconciled_finished: 0,
            reconciled_lost: 0,
            resume_in_doubt: 0,
            resume_doubt_expired: 0,
            last_snapshot: vec![None; lms],
        }
    }
}

/// Preemption counters of the shell (the core counts attempts and requeues).
#[derive(Debug, Default)]
pub struct PreemptMetrics {
    /// Requests the LM carried out (the task launched in the freed room).
    pub preemptions: u64,
    /// Refusals, by reason (`transport` when the LM could not be reached).
    pub refused: BTreeMap<&'static str, u64>,
    /// Tasks of this GM's queues handed back after a preemption, and the work lost.
    pub requeued: u64,
    pub lost_work: Micros,
}

/// The GM's allocation-time histogram, observed when an LM accepts a launch.
pub fn launch_latency() -> Histogram {
    Histogram::latency(
        "megha_gm_launch_latency_seconds",
        "Time from submission to the LM accepting the launch (allocation time up to the worker hop).",
    )
    .expect("a valid constant metric name")
}
