//! What a fault run takes ([`FaultConfig`]: the cluster, workload and fault model) and
//! what it gives ([`RunReport`]). A leaf: the driver, the runner and the search import it.

use super::check::{Known, Violation};
use super::plan::{FaultRates, Schedule};
use common::Micros;
use std::collections::BTreeMap;

/// The cluster, workload and fault model of a run.
#[derive(Clone, Debug)]
pub struct FaultConfig {
    pub gms: u16,
    pub lms: u16,
    /// Nodes per partition (each LM has one partition per GM); one worker per node.
    pub nodes_per_partition: u16,
    /// Cores per node.
    pub cores: u64,
    pub jobs: u32,
    /// Tasks per job, drawn from 1 to this.
    pub max_tasks: u32,
    /// Task durations are drawn from 0.2 s to this (3 s by default: shorter than the
    /// worker timeout, so a cut-off worker's runs end before their retries start).
    pub max_duration: Micros,
    /// Faults happen (and jobs arrive) in `[0, horizon)`.
    pub horizon: Micros,
    /// After the horizon: no faults, then liveness and views are checked.
    pub quiet: Micros,
    pub heartbeat: Micros,
    pub network_delay: Micros,
    /// Largest extra delay of a delayed message.
    pub max_extra_delay: Micros,
    /// A GM -> LM call attempt with no answer by then failed (the GM's
    /// `launch_timeout_ms`, 5 s).
    pub call_timeout: Micros,
    /// A call in doubt is retried until then (the GM's `doubt_timeout_s`, 300 s).
    pub doubt_timeout: Micros,
    /// The GM journal of issue 14 (as the GM service has it): a restarted GM
    /// resubmits every task it accepted whose end it had not heard. Off: the GM
    /// before it (queued tasks die with it).
    pub journal: bool,
    /// Worker liveness of issue 14 (as the LM service has it, `--worker-timeout-ms`,
    /// 10 s): a worker silent this long is lost. `None`: the LM before it.
    pub worker_timeout: Option<Micros>,
    /// Workers fence themselves (as the LM's `--worker-fence` has them): unconfirmed
    /// by their LM for 3/5 of the worker timeout, they stop their tasks and report
    /// them lost. Off: a cut-off worker runs on.
    pub worker_fence: bool,
    /// How long a dead worker's task processes run on after it died (issue 31: each
    /// task's helper kills its run as soon as its socket to the worker closes, a
    /// few milliseconds). A retry of such a task started meanwhile anywhere is a run
    /// twice. Before issue 31 they ran to their end (model it with a long linger).
    pub orphan_linger: Micros,
    /// A start order in flight when its LM declared the worker lost arrives late
    /// (issue 31: the LM abandons the worker's order stream, but a request already
    /// sent, or bytes in a kernel's send buffer, still get through after the network
    /// comes back), at a seeded time within three worker timeouts. Off: abandoned
    /// orders never arrive.
    pub late_orders: bool,
    /// Each registration tells its worker the first start order sent for it, and
    /// the worker refuses every order numbered below (as the worker service does:
    /// `WorkerAssignment::orders_from`, worker-core's `OrderFilter`). Off: the worker
    /// before it, which runs a late order of an earlier registration.
    pub order_floor: bool,
    /// The GM's question to a restarted LM (as the GM service asks it,
    /// `--lm-reconcile-delay-ms`, 5 s after it saw the new life): which of its tasks
    /// there the LM still holds; the others end finished or lost. `None`: the GM
    /// before it.
    pub lm_reconcile: Option<Micros>,
    /// The retry policy of every job (issue 13); 3 attempts as in the chaos tests.
    pub retry: common::retry::RetryPolicy,
    /// Count known causes (issue 14's gaps, bugs found here) as violations.
    pub strict: bool,
    /// Model the GM before its batch-sequence fix: every life numbers its batches
    /// from 1 (the harness should find answers from another life's record).
    pub batch_seq_from_zero: bool,
    /// Every third job of two tasks or more is a gang ([`super::world`] checks at
    /// every gang commit that no member launches while another is neither held
    /// nor launched).
    pub gangs: bool,
    /// Events kept for a violation's history.
    pub history: usize,
    /// Print every event (replay).
    pub trace: bool,
    /// Faults of a random schedule; unused with a script.
    pub rates: FaultRates,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            gms: 2,
            lms: 2,
            nodes_per_partition: 1,
            cores: 2,
            jobs: 8,
            max_tasks: 3,
            max_duration: Micros::from_secs(3),
            horizon: Micros::from_secs(20),
            quiet: Micros::from_secs(30),
            heartbeat: Micros::from_secs(1),
            network_delay: Micros::from_millis(1),
            max_extra_delay: Micros::from_millis(500),
            call_timeout: Micros::from_secs(5),
            doubt_timeout: Micros::from_secs(300),
            journal: true,
            worker_timeout: Some(Micros::from_secs(10)),
            worker_fence: true,
            orphan_linger: Micros::from_millis(50),
            late_orders: true,
            order_floor: true,
            lm_reconcile: Some(Micros::from_secs(5)),
            strict: false,
            retry: common::retry::RetryPolicy {
                max_attempts: 3,
                backoff: common::retry::Backoff::default(),
            },
            batch_seq_from_zero: false,
            gangs: false,
            history: 30,
            trace: false,
            rates: FaultRates::default(),
        }
    }
}

/// What one seed's run did.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub seed: u64,
    pub events: u64,
    pub accepted: usize,
    pub finished: u64,
    pub failed: u64,
    /// Tasks stuck for a known reason (issue 14), per reason.
    pub known: BTreeMap<Known, u32>,
    /// Gangs the GMs restarted whole (broken after their commit).
    pub gang_restarts: u64,
    pub violation: Option<Violation>,
    /// The faults the run injected (the random schedule, or the script).
    pub schedule: Schedule,
}
