//! What a GM core is configured with.

use crate::carbyne::OrderConfig;
use crate::lra_path::types::LraPathConfig;
use common::fairness::FairnessConfig;
use common::quota::QueueableQuota;
use common::retry::RetryPolicy;
use common::GmId;
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
    pub lra: LraPathConfig,
    /// Per-job limit on outstanding QUEUEABLE containers (Mercury 4.1); this GM is
    /// authoritative for the jobs submitted to it.
    pub queueable_quota: QueueableQuota,
    /// Launch batches to each LM are numbered from `first_batch_seq + 1`. An LM
    /// answers a batch number it already applied from its record (the answer may
    /// have been lost), so a GM that restarts must not reuse the numbers of its
    /// previous life: the services start from the start time in microseconds (a life
    /// sends far fewer than one batch per microsecond). 0 in the simulator.
    pub first_batch_seq: u64,
    /// This GM's life, carried by its launch batches and preemptions: an LM that
    /// saw a newer life of this GM refuses them (a standby that took over fences
    /// the primary it replaced). A GM with a journal starts above the journal's
    /// last life (and numbers its batches from it); 0: not fenced and fencing
    /// nothing (a GM without a journal, whose start time may go back with its
    /// clock, must not lock itself out).
    pub life: u64,
    /// Which blocked tasks a gain of resources wakes (see [`crate::backlog`]).
    pub wake: WakePolicy,
    /// Under [`WakePolicy::All`], without fairness or preempting classes: the
    /// blocked tasks of a shape that already missed in a pass miss again without
    /// being taken out one by one, counted in bulk ([`crate::outputs::KnownMisses`],
    /// [`crate::GmOutput::misses_settled`]). The same schedules for a driver that
    /// books those; for the simulator (false: one decision per task).
    pub bulk_known_misses: bool,
    /// The retry policy of jobs submitted without one ([`RetryPolicy::NONE`]: a
    /// failed task stays failed).
    pub retry: RetryPolicy,
    /// In which order waiting tasks are tried (FIFO per user queue by default;
    /// DRF, Tetris, SJF or Carbyne: see [`crate::carbyne`]).
    pub order: OrderConfig,
    /// Priority classes: the order within a queue (with aging) and which classes
    /// preempt lower ones of their queue ([`common::priority`]).
    pub priorities: Arc<common::priority::PriorityClasses>,
    /// Soft constraints (docs/alsched.md): `Some(ms)` solves the ready tasks of
    /// the jobs with utility trees exactly at each pass, an ILP under a cap of `ms`
    /// ([`crate::alsched::SoftPlacement::plan_batch`]), before the greedy step;
    /// `None` (the default): the greedy step alone. Only the designated GM solves
    /// (as only it runs the LRA placer); another GM ignores it
    /// ([`GmConfig::soft_ilp`]).
    pub soft_ilp_ms: Option<u64>,
}

/// The largest [`GmConfig::soft_ilp_ms`]: the designated GM's pass waits for the
/// solve.
pub const MAX_SOFT_ILP_MS: u64 = 60_000;

/// Checks a cap for [`GmConfig::soft_ilp_ms`]; the fault says why, for the flag
/// that gave it to name.
pub fn check_soft_ilp_ms(ms: u64) -> Result<u64, String> {
    match ms {
        1..=MAX_SOFT_ILP_MS => Ok(ms),
        _ => Err(format!(
            "must be between 1 and {MAX_SOFT_ILP_MS} ms (the pass waits for the solve), not {ms}; leave it out to place greedily"
        )),
    }
}

/// Which blocked tasks a gain of resources wakes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WakePolicy {
    /// Only the shapes some node whose free resources grew could host: the cost of
    /// an event does not grow with the backlog.
    #[default]
    Indexed,
    /// Every blocked task (the paper's simulator; kept to compare against).
    All,
}

impl WakePolicy {
    pub const NAMES: [&'static str; 2] = ["indexed", "all"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "indexed" => Some(WakePolicy::Indexed),
            "all" => Some(WakePolicy::All),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WakePolicy::Indexed => "indexed",
            WakePolicy::All => "all",
        }
    }
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
            lra: LraPathConfig::default(),
            queueable_quota: QueueableQuota::UNLIMITED,
            first_batch_seq: 0,
            life: 0,
            wake: WakePolicy::default(),
            bulk_known_misses: false,
            retry: RetryPolicy::NONE,
            order: OrderConfig::default(),
            priorities: Arc::default(),
            soft_ilp_ms: None,
        }
    }

    /// The cap of the exact batch solve of soft constraints this GM runs: `soft_ilp_ms`
    /// on the designated GM, `None` on any other (it places greedily).
    pub fn soft_ilp(&self) -> Option<u64> {
        self.soft_ilp_ms.filter(|_| self.id == self.designated_gm)
    }
}
