//! What a run takes: the scheduler ([`SchedulerKind`]) and its settings
//! ([`SimConfig`], [`LmPublish`], [`MercuryOptions`]). A leaf: the drivers import it.

use super::costs::CostModel;
use common::fairness::FairnessConfig;
use common::quota::QueueableQuota;
use common::{GmId, Micros};
use std::sync::Arc;

/// Which scheduler to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum SchedulerKind {
    /// Megha: the configured GMs and LMs.
    Megha,
    /// Sparrow: one distributed scheduler per GM, batch sampling, late binding.
    Sparrow,
    /// The same nodes under one GM and one LM.
    Centralized,
}

impl SchedulerKind {
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Megha => "megha",
            SchedulerKind::Sparrow => "sparrow",
            SchedulerKind::Centralized => "centralized",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub scheduler: SchedulerKind,
    /// One-way network delay (Megha and Sparrow simulators: 0.5 ms).
    pub network_delay: Micros,
    /// LM heartbeat period (paper: 10 s).
    pub heartbeat: Micros,
    /// Jump over idle gaps: when nothing runs, waits or travels, LM heartbeats resume
    /// at the last tick (same phase) before the next arrival. Schedules are the same
    /// with and without (Megha simulator only).
    pub skip_idle: bool,
    /// Which blocked tasks a GM retries when its view gains resources.
    pub wake: gm_core::WakePolicy,
    /// Under `WakePolicy::All`: the GMs count the retries of a shape that already
    /// missed in a pass in bulk (`gm_core::GmConfig::bulk_known_misses`) and the
    /// ledger books them per task; the same schedules and reports as one decision
    /// per task (false, kept as the oracle), for a cost that follows the classes.
    pub bulk_known_misses: bool,
    /// In which order a GM tries its waiting tasks (FIFO, DRF, Tetris, SJF, Carbyne).
    pub order: gm_core::carbyne::OrderConfig,
    /// When an LM sends its state to every GM (Megha driver only).
    pub lm_publish: LmPublish,
    /// Largest launch batch per LM.
    pub batch_size: usize,
    /// Sparrow probes per task.
    pub probe_ratio: usize,
    pub costs: CostModel,
    /// Time every core step with the wall clock (`loadgen calibrate`); the schedule
    /// is the same either way.
    pub probe: bool,
    pub seed: u64,
    /// User queues with shares: jobs are spread over the queues round-robin and go to
    /// their queue's GM; preemption under contention (Megha only). `None`: one queue.
    pub fairness: Option<Arc<FairnessConfig>>,
    /// With queues: whether GMs may preempt (off = queues and shares only, to compare).
    pub preemption: bool,
    /// The GM that schedules GUARANTEED work: jobs' GUARANTEED tasks go there.
    pub designated_gm: GmId,
    /// How QUEUEABLE work is placed and shaped (used only when a task is QUEUEABLE).
    pub mercury: MercuryOptions,
    /// The designated GM's LRA placer. A job whose tasks are all `long_running` is an
    /// LRA (its tasks are the containers, their tags the container tags) and goes
    /// through the designated GM's LRA path.
    pub lra: gm_core::lra_path::LraPathConfig,
    /// Operator placement constraints for LRAs (MEDEA section 3): the way a
    /// simulated workload constrains its LRAs.
    pub lra_operator_constraints: Vec<lra_placer::PlacementConstraint>,
    /// Priority classes of the GMs (tasks carry their value; default: one class).
    pub priorities: Arc<common::priority::PriorityClasses>,
    /// Soft constraints (alsched, issue 36): per job, its utility tree (given to
    /// its GM) and its placement-dependent run time (Megha driver only). `None`: no
    /// job has either.
    pub soft_jobs: Option<Arc<super::soft::SoftJobs>>,
    /// Soft constraints: the designated GM solves the waiting tasks of jobs with
    /// trees exactly at each pass, an ILP capped at this many ms
    /// (`gm_core::GmConfig::soft_ilp_ms`; the other GMs place greedily). `None`:
    /// the greedy step alone. A cap the solve reaches makes a run depend on the
    /// machine's speed.
    pub soft_ilp_ms: Option<u64>,
    /// Gangs (issue 37): per job id (the trace job's dense number), its gang; such
    /// a job is submitted as one gang to its GM. `None`: no job is a gang.
    pub gangs: Option<Arc<rustc_hash::FxHashMap<u64, common::gang::GangSpec>>>,
    /// Start barriers (issue 37's one-by-one baseline): per job id, its tasks are
    /// ordinary tasks placed one by one, but each waits, holding its node, until
    /// every task of the job has started; when the last starts at `t`, each ends at
    /// `t` plus its duration, as the members of a real gang do (Megha driver only;
    /// `megha/barrier.rs`). `None`: no job waits.
    pub start_barrier: Option<Arc<rustc_hash::FxHashSet<u64>>>,
}

/// When a simulated LM sends its state to every GM. Both piggyback the state on
/// every answer to a GM's request as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LmPublish {
    /// At heartbeats only, as the Megha simulator does (the default: the simulator's
    /// reference-compatible behaviour).
    Heartbeat,
    /// At heartbeats and after every change, as the services' LM does
    /// (`local-master --publish-min-interval-ms`): after it answers a GM's request
    /// and after a worker reports a task finished or failed, at most once per
    /// `min_interval` (a change within it is published at its end; changes in
    /// between ride along).
    Changes { min_interval: Micros },
}

impl LmPublish {
    /// The services' minimum interval between two change-triggered publications.
    pub const SERVICES_MIN_INTERVAL: Micros = Micros(5_000);

    /// A short description for reports: `heartbeat` or `changes/5ms`.
    pub fn describe(self) -> String {
        match self {
            LmPublish::Heartbeat => "heartbeat".to_owned(),
            LmPublish::Changes { min_interval } => {
                format!("changes/{}ms", min_interval.0 as f64 / 1000.0)
            }
        }
    }
}

/// Mercury's knobs (sections 4.2 and 4.3).
#[derive(Clone, Debug, PartialEq)]
pub struct MercuryOptions {
    /// GMs place QUEUEABLE work on one of the k least-loaded nodes.
    pub top_k: usize,
    /// Share of each node running QUEUEABLE work may hold.
    pub cap: f64,
    /// T_l in the queuing-delay estimate.
    pub launch_overhead: Micros,
    /// Order of worker queues.
    pub queue_order: worker_core::QueueOrder,
    /// Shed queued work from nodes above mean + k·sigma (k), at every LM heartbeat.
    pub shed_sigma: Option<f64>,
    /// Per-job limit on outstanding QUEUEABLE containers (section 4.1), held by the
    /// job's GM and guarded by every LM.
    pub quota: QueueableQuota,
    /// LMs promote QUEUEABLE containers running at least this long to GUARANTEED,
    /// at most `promote_per_tick` per heartbeat (off if `None`).
    pub promote_after: Option<Micros>,
    pub promote_per_tick: usize,
}

impl Default for MercuryOptions {
    fn default() -> Self {
        MercuryOptions {
            top_k: 4,
            cap: 1.0,
            launch_overhead: Micros::from_millis(10),
            queue_order: worker_core::QueueOrder::JobSubmission,
            shed_sigma: None,
            quota: QueueableQuota::UNLIMITED,
            promote_after: None,
            promote_per_tick: 16,
        }
    }
}

impl MercuryOptions {
    /// What every LM is configured with for QUEUEABLE work (the simulator and the
    /// embedded services alike).
    pub fn lm_config(&self) -> lm_core::QueueableConfig {
        lm_core::QueueableConfig {
            cap: self.cap,
            launch_overhead: self.launch_overhead,
            shed_sigma: self.shed_sigma,
            quota: self.quota,
            promotion: self
                .promote_after
                .map(|after| lm_core::queueable::PromotionPolicy {
                    after,
                    per_tick: self.promote_per_tick.max(1),
                }),
        }
    }

    /// A GM configuration with these QUEUEABLE knobs.
    pub fn gm_config(&self, config: gm_core::GmConfig) -> gm_core::GmConfig {
        gm_core::GmConfig {
            queueable_top_k: self.top_k.max(1),
            queueable_cap: self.cap,
            queueable_quota: self.quota,
            ..config
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            scheduler: SchedulerKind::Megha,
            network_delay: Micros(500),
            heartbeat: Micros::from_secs(10),
            skip_idle: true,
            wake: gm_core::WakePolicy::default(),
            bulk_known_misses: true,
            order: gm_core::carbyne::OrderConfig::default(),
            lm_publish: LmPublish::Heartbeat,
            batch_size: 100,
            probe_ratio: 2,
            costs: CostModel::default(),
            probe: false,
            seed: 0,
            fairness: None,
            preemption: true,
            designated_gm: GmId(0),
            mercury: MercuryOptions::default(),
            lra: Default::default(),
            lra_operator_constraints: Vec::new(),
            priorities: Arc::default(),
            soft_jobs: None,
            soft_ilp_ms: None,
            gangs: None,
            start_barrier: None,
        }
    }
}
