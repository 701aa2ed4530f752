//! [`GlobalMaster`]: the GM's parts, composed. Each part owns its state behind its
//! own type and methods; the orchestration here takes the parts a stage needs and
//! passes them explicitly:
//!
//! - the view ([`ClusterView`]): every LM's free resources, constraints, estimates;
//! - the backlog ([`Backlog`]): user queues and the known-miss cache;
//! - placement ([`Pipeline`]) for GUARANTEED work, [`Opportunistic`] for QUEUEABLE;
//! - the dispatcher ([`Dispatcher`]): launch batches, in-flight deductions, the tasks
//!   awaiting an answer;
//! - quotas ([`QuotaBook`]), fairness and preemption slots ([`Fairness`]);
//! - the designated GM's LRA path ([`LraPath`]); counters ([`GmStats`]).
//!
//! The stages: [`GlobalMaster::schedule`] (`pass.rs`: one pass over the ready tasks),
//! the LMs' answers and snapshots (`answers.rs`), the LRA path (`lra.rs`), and the one
//! entry point [`GlobalMaster::step`] (`step.rs`).

mod answers;
mod busy;
mod cancel;
mod gangs;
mod held_asks;
mod lra;
mod ordering;
mod pass;
mod stages;
pub mod step;

use crate::backlog::Backlog;
use crate::cluster_view::ClusterView;
pub use crate::config::GmConfig;
use crate::dag::Dags;
use crate::dispatch::Dispatcher;
use crate::fairness::Fairness;
use crate::lifecycle::Lifecycle;
use crate::lra_path::LraPath;
use crate::opportunistic::Opportunistic;
pub use crate::outputs::{
    Decision, DecisionOutcome, GmStats, KnownMisses, PassOutput, ResponseOutput,
};
use crate::placement::{Pipeline, PlacementPolicy};
use crate::queue::{Pending, Queues};
use crate::quota::QuotaBook;
use crate::view::LmView;
use common::{GmId, LmId, Micros, Resources, TaskSpec};

#[derive(Debug)]
pub struct GlobalMaster {
    config: GmConfig,
    view: ClusterView,
    backlog: Backlog,
    /// Placement of non-QUEUEABLE work: policy and host counts.
    placement: Pipeline,
    /// Placement of QUEUEABLE work.
    opportunistic: Opportunistic,
    dispatcher: Dispatcher,
    /// Per-job QUEUEABLE quotas: counts and the tasks they hold back.
    quota: QuotaBook,
    fairness: Fairness,
    /// LRAs (designated GM only): see [`crate::lra_path`].
    lra: LraPath,
    /// Retries of failed tasks and cancelled jobs: see [`crate::lifecycle`].
    lifecycle: Lifecycle,
    /// DAG jobs' held stages: see [`crate::dag`].
    dags: Dags,
    /// The job-ordering policy and what each job runs: see [`crate::carbyne`].
    ordering: crate::carbyne::JobOrdering,
    /// Gangs waiting to start together: see [`crate::gang`].
    gangs: crate::gang::Gangs,
    /// Jobs with a utility tree (soft constraints): see [`crate::alsched`].
    soft: crate::alsched::SoftPlacement,
    stats: GmStats,
    /// During a pass after a selective wake: the (LM, node) pairs that grew since
    /// the wake before (see [`crate::backlog`]).
    grown: Option<crate::grown::GrownNodes>,
    /// LMs whose new life this GM's view took up since the last step's output
    /// (see [`crate::GmOutput::lm_new_lives`]).
    new_lives: Vec<LmId>,
    /// Per LM: the life a reconcile answer came from, before the view had one
    /// (see [`GlobalMaster::lm_life_heard`]).
    heard_lives: Vec<Option<u64>>,
    /// LMs placement passes by for now (see [`crate::view::LmView::busy_until`]).
    busy_lms: Vec<LmId>,
    /// An emptied decision list handed back by the caller (see
    /// [`GlobalMaster::recycle_decisions`]); the next pass fills it.
    spare_decisions: Vec<Decision>,
}

impl GlobalMaster {
    pub fn new(config: GmConfig) -> Self {
        let lms = config.lms as usize;
        GlobalMaster {
            view: ClusterView::new(lms),
            backlog: Backlog::new(config.wake)
                .with_aging(config.priorities.aging)
                .with_bulk_misses(
                    config.bulk_known_misses
                        && config.fairness.is_none()
                        && !config.priorities.classes.iter().any(|c| c.preempting),
                ),
            placement: Pipeline::default(),
            // GMs start at different candidates so that they do not herd.
            opportunistic: Opportunistic::new(
                config.id.index(),
                config.queueable_cap,
                config.queueable_top_k,
            ),
            dispatcher: Dispatcher::new(config.id, lms, config.batch_size, config.first_batch_seq)
                .with_life(config.life),
            quota: QuotaBook::new(config.queueable_quota),
            fairness: Fairness::new(config.fairness.clone(), lms),
            lra: LraPath::new(config.lra.clone()),
            lifecycle: Lifecycle::new(config.retry),
            dags: Dags::default(),
            ordering: crate::carbyne::JobOrdering::new(config.order),
            soft: crate::alsched::SoftPlacement::default(),
            gangs: crate::gang::Gangs::default(),
            stats: GmStats::default(),
            new_lives: Vec::new(),
            heard_lives: vec![None; lms],
            busy_lms: Vec::new(),
            spare_decisions: Vec::new(),
            grown: None,
            config,
        }
    }

    /// Hands back a pass's decision list once read, so that the next pass fills it
    /// instead of allocating (and, under a backlog, growing) a new one. Optional:
    /// nothing else changes. Keeps the larger of this list and the one kept, so the
    /// GM holds on to the room of its largest pass (one decision, 72 bytes, per task
    /// that pass could try: 22 MB for 300,000 blocked tasks).
    pub fn recycle_decisions(&mut self, mut decisions: Vec<Decision>) {
        if decisions.capacity() > self.spare_decisions.capacity() {
            decisions.clear();
            self.spare_decisions = decisions;
        }
    }

    /// Replaces the placement policy of non-QUEUEABLE work (the default is
    /// [`crate::placement::DEFAULT_POLICY`]; see [`crate::placement::policy`]).
    pub fn set_placement_policy(&mut self, policy: Box<dyn PlacementPolicy>) {
        self.placement = Pipeline::new(policy);
    }

    /// The tasks of `job` are placed by its utility tree from now on (alsched soft
    /// constraints; see [`crate::alsched`]). Set it before the job's tasks are
    /// submitted.
    pub fn set_utility(
        &mut self,
        job: common::JobId,
        utility: std::sync::Arc<common::utility::Utility>,
    ) {
        self.soft.set(job, utility);
    }

    /// A restarted GM resumes `task` as running on `lm`'s `node` (the LM's answer
    /// to its reconcile): with a utility tree ([`GlobalMaster::set_utility`] first),
    /// the task counts in its job's utility again, so that the job's other tasks
    /// are placed knowing where it runs. False when the job has no tree or the
    /// view does not know the node yet (not counted).
    pub fn resumed_running(
        &mut self,
        task: common::TaskId,
        lm: common::LmId,
        node: common::NodeId,
    ) -> bool {
        if !self.soft.has(task.job) {
            return false;
        }
        let Some(attributes) = (self.view.get(lm.index()))
            .and_then(|v| v.topology.constraints.get(node.index()))
            .copied()
        else {
            return false;
        };
        self.soft.running(task, attributes);
        true
    }

    /// How this GM runs gang transactions (hold and retry times).
    pub fn set_gang_config(&mut self, config: crate::gang::GangConfig) {
        self.gangs = crate::gang::Gangs::new(config);
    }

    /// The gangs waiting to start, and their counters.
    pub fn gangs(&self) -> &crate::gang::Gangs {
        &self.gangs
    }

    /// Soft constraints: the jobs' trees and what was chosen for each task.
    pub fn soft(&self) -> &crate::alsched::SoftPlacement {
        &self.soft
    }

    /// Soft constraints: keeps the trees and choices of the jobs `keep` names only
    /// (a driver that forgets ended jobs calls it).
    pub fn retain_soft_jobs(&mut self, keep: impl Fn(common::JobId) -> bool) {
        self.soft.retain_jobs(keep);
    }

    pub fn id(&self) -> GmId {
        self.config.id
    }

    /// This GM's life ([`GmConfig::life`]): its launch batches and reconcile
    /// requests carry it.
    pub fn life(&self) -> u64 {
        self.config.life
    }

    /// True for the central scheduler of GUARANTEED work.
    pub fn is_designated(&self) -> bool {
        self.config.id == self.config.designated_gm
    }

    pub fn stats(&self) -> &GmStats {
        &self.stats
    }

    pub fn queues(&self) -> &Queues {
        self.backlog.queues()
    }

    /// Tasks the next pass would try (blocked ones too while a gain of resources may
    /// wake them).
    pub fn ready_len(&self) -> usize {
        self.backlog.ready_len()
    }

    /// Tasks sent to an LM and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.dispatcher.outstanding()
    }

    /// See [`Dispatcher::still_in_doubt`]: the part of a launch batch still worth
    /// sending again while its answer is in doubt. When nothing is, the batch will
    /// not be sent again, so no snapshot may ever name it applied (an LM restarted
    /// meanwhile never saw it): its deductions leave the view now, as an abandoned
    /// batch's do (its runs ended, so their resources are back at the LM).
    pub fn still_in_doubt(
        &mut self,
        batch: &common::messages::LaunchBatch,
    ) -> Option<common::messages::LaunchBatch> {
        let rest = self.dispatcher.still_in_doubt(batch);
        if rest.is_none() {
            for job in self.dispatcher.abandon(&mut self.view, batch.lm, batch.seq) {
                self.quota.landed(job);
            }
            self.backlog.push_all_ready(self.quota.release());
        }
        rest
    }

    /// Every task waiting in this GM, with the reason its last attempt failed.
    pub fn pending(&self) -> impl Iterator<Item = &Pending> {
        self.backlog
            .queues()
            .iter()
            .chain(self.fairness.waiting())
            .chain(self.quota.waiting())
            .chain(self.soft.held())
    }

    /// True once the state of every LM has arrived.
    pub fn has_full_view(&self) -> bool {
        self.view.is_full()
    }

    /// Nodes and total capacity of the LMs this GM has heard from.
    pub fn cluster_size(&self) -> (usize, Resources) {
        self.view.size()
    }

    /// The view of one LM, if its state has arrived.
    pub fn view(&self, lm: LmId) -> Option<&LmView> {
        self.view.lm(lm)
    }

    /// Retries and cancelled jobs.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// DAG jobs with a stage still to run, and their held tasks.
    pub fn dags(&self) -> &Dags {
        &self.dags
    }

    /// Accepts a task into its user queue.
    pub fn submit(&mut self, now: Micros, task: TaskSpec) {
        self.stats.submitted += 1;
        if task.kind.needs_designated_gm() && !self.is_designated() {
            self.stats.guaranteed_elsewhere += 1;
        }
        self.ordering.arrived();
        self.backlog.push_ready(new_pending(now, task));
    }
}

/// A task not yet tried.
pub(crate) fn new_pending(now: Micros, task: TaskSpec) -> Box<Pending> {
    Box::new(Pending {
        task,
        submitted_at: now,
        attempts: 0,
        reason: None,
        preempting: None,
        contended_since: None,
    })
}
