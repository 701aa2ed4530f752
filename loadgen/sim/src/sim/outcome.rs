//! What a run gives: its [`SimOutcome`] (task records, [`SimCounters`], every
//! [`Run`]) and the [`Progress`] callback. A leaf: the drivers import it.

use super::ledger::TaskRecord;
use common::{Micros, QueueId, Resources, TaskId, TaskKind};

/// Counters of a run (those that apply to the scheduler).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimCounters {
    pub lm_rejections: u64,
    pub repartitions: u64,
    pub requeues: u64,
    pub heartbeats: u64,
    /// Change-triggered LM state publications ([`LmPublish::Changes`]).
    pub state_publications: u64,
    /// LM heartbeat ticks not simulated: the system was quiet until the next arrival.
    pub idle_ticks_skipped: u64,
    pub launch_batches: u64,
    pub probes: u64,
    pub events: u64,
    /// Times a node was found over-committed (must stay zero).
    pub over_commits: u64,
    pub preempt_attempts: u64,
    pub preempt_refused: u64,
    /// Tasks preempted (killed and requeued).
    pub preemptions: u64,
    /// Task time lost to preemption.
    pub wasted: Micros,
    /// QUEUEABLE tasks killed (to make room for other work, or shed) and requeued.
    pub queueable_kills: u64,
    /// Of those, queued tasks dropped by load shedding.
    pub shed: u64,
    /// QUEUEABLE containers promoted to GUARANTEED.
    pub promoted: u64,
    /// QUEUEABLE tasks held back by their job's quota (GM decisions).
    pub quota_held: u64,
    /// GM placement attempts of tasks tried before (summed over the GMs).
    pub retries: u64,
    /// Blocked tasks the GMs woke when their views gained resources.
    pub woken: u64,
    /// Tasks of DAG jobs that never ran: a parent stage could not be placed.
    pub dag_never_run: u64,
    /// Of the GM decisions, the known misses of the full retry counted in bulk
    /// (`SimConfig::bulk_known_misses`): a measure of the work saved, not of the
    /// schedule (not in `summary.json`).
    pub bulk_misses: u64,
    /// The designated GM's exact solves of soft constraints
    /// (`SimConfig::soft_ilp_ms`) that planned, and those that fell back to the
    /// greedy step (not in `summary.json`).
    pub soft_ilp_solves: u64,
    pub soft_ilp_fallbacks: u64,
    /// Tasks still waiting at their job's start barrier when the run ended
    /// ([`SimConfig::start_barrier`](super::SimConfig)): nonzero when placing
    /// barrier jobs one by one deadlocked (not in `summary.json`).
    pub barrier_stuck: u64,
}

/// One run of a task on a worker (a preempted task has several).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub task: TaskId,
    /// The kind the task started with.
    pub kind: TaskKind,
    /// When the worker learnt that this QUEUEABLE run was promoted to GUARANTEED.
    pub promoted_at: Option<Micros>,
    pub queue: QueueId,
    pub resources: Resources,
    pub start: Micros,
    pub end: Option<Micros>,
}

#[derive(Debug)]
pub struct SimOutcome {
    pub records: Vec<TaskRecord>,
    pub counters: SimCounters,
    /// Virtual time when the last event was handled.
    pub span: Micros,
    /// Every node had all its resources back when the run ended (nothing leaked).
    pub drained: bool,
    /// Every task run, in start order (for fairness metrics).
    pub runs: Vec<Run>,
    /// The timed core steps, when [`SimConfig::probe`] was on (Megha driver only).
    pub probe: Option<Box<super::probe::Probe>>,
    /// Soft constraints (alsched): per task of a job with a utility tree, the branch
    /// its last placement took (its path in the tree, or `none`); empty when no job
    /// has a tree (Megha driver only). `tasks.csv` then gets a `branch` column.
    pub branches: Branches,
}

/// Per task, the branch of its job's utility tree it got ([`SimOutcome::branches`]).
pub type Branches = rustc_hash::FxHashMap<TaskId, std::sync::Arc<str>>;

/// Reports progress as tasks finish (for a progress bar); called with (done, total).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);
