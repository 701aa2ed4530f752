//! The GM state machine.
//!
//! Inputs: task submissions, LM snapshots (heartbeats), LM launch responses.
//! [`GlobalMaster::schedule`] runs one pass over the ready tasks: each task goes
//! through the placement pipeline ([`crate::placement`]: internal partitions
//! round-robin across LMs, then external partitions round-robin, a repartition);
//! launch requests are batched per LM. A task that matches nowhere waits until the
//! view gains resources (or preempts under fairness); a task that no node could ever
//! host leaves with a reason.

use super::fairness::{contention, usage_view, Contention, Refusal};
pub use super::outputs::{
    Decision, DecisionOutcome, GmConfig, GmStats, PassOutput, ResponseOutput,
};
use super::placement::{Attempt, Found, Miss, Pipeline, PlacementPolicy, Views};
use super::queue::{Pending, Queues};
use super::quota::QuotaBook;
use super::view::LmView;
use common::messages::{
    LaunchOutcome, LaunchResponse, LmSnapshot, Placement, PreemptOutcome, PreemptRefusal,
    PreemptRequest, PreemptResponse, PreemptedTasks,
};
use common::reasons::{PendingReason, RejectReason};
use common::{ConstraintSet, GmId, JobId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use common::{QueueId, TaskKind};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) seq: u64,
    pub(crate) deducted: Vec<(NodeId, Resources)>,
    /// The job of every QUEUEABLE task in the batch (for quotas).
    pub(crate) queueable_jobs: Vec<JobId>,
}

#[derive(Debug)]
pub struct GlobalMaster {
    pub(crate) config: GmConfig,
    pub(crate) lms: Vec<Option<LmView>>,
    pub(crate) queues: Queues,
    /// Dispatched tasks waiting for the LM's answer.
    pub(crate) outstanding: HashMap<TaskId, Box<Pending>>,
    /// Placement of non-QUEUEABLE work: policy and host counts.
    placement: Pipeline,
    /// Round-robin pointer over the top-k candidates of QUEUEABLE placement.
    pub(crate) rr_queueable: usize,
    pub(crate) next_seq: Vec<u64>,
    pub(crate) in_flight: Vec<VecDeque<InFlight>>,
    pub(crate) open_batches: Vec<Option<usize>>,
    /// Task shapes that found no node since the view last gained resources: the view
    /// has only shrunk since, so they would fail again. Cleared on every gain.
    pub(crate) failed_shapes: HashSet<(ConstraintSet, Resources)>,
    /// Usage per queue and total capacity over the view, rebuilt after a snapshot.
    usage_cache: Option<(BTreeMap<QueueId, Resources>, Resources)>,
    /// Preemptions refused since the view last gained resources.
    preempt_refusals: HashSet<Refusal>,
    /// Per LM: a preemption request of this GM awaits its answer.
    preempt_in_flight: Vec<bool>,
    /// Tasks waiting for a preemption slot (oldest first); one is retried each time
    /// an LM answers a preemption.
    slot_waiters: VecDeque<Box<Pending>>,
    /// Per-job QUEUEABLE quotas: counts and the tasks they hold back.
    pub(crate) quota: QuotaBook,
    pub(crate) stats: GmStats,
    /// LRAs (designated GM only): see [`super::lra_path`].
    pub(crate) lra: super::lra_path::LraPath,
}

impl GlobalMaster {
    pub fn new(config: GmConfig) -> Self {
        let lms = config.lms as usize;
        GlobalMaster {
            lms: (0..lms).map(|_| None).collect(),
            queues: Queues::default(),
            outstanding: HashMap::default(),
            placement: Pipeline::default(),
            // GMs start at different candidates so that they do not herd.
            rr_queueable: config.id.index(),
            next_seq: vec![0; lms],
            in_flight: (0..lms).map(|_| VecDeque::new()).collect(),
            open_batches: vec![None; lms],
            failed_shapes: HashSet::default(),
            usage_cache: None,
            preempt_in_flight: vec![false; lms],
            preempt_refusals: HashSet::default(),
            slot_waiters: VecDeque::new(),
            quota: QuotaBook::new(config.queueable_quota),
            stats: GmStats::default(),
            lra: super::lra_path::LraPath::new(config.lra.clone()),
            config,
        }
    }

    /// Replaces the placement policy of non-QUEUEABLE work (the default is
    /// [`crate::placement::DEFAULT_POLICY`]; see [`crate::placement::policy`]).
    pub fn set_placement_policy(&mut self, policy: Box<dyn PlacementPolicy>) {
        self.placement = Pipeline::new(policy);
    }

    pub fn id(&self) -> GmId {
        self.config.id
    }

    /// True for the central scheduler of GUARANTEED work.
    pub fn is_designated(&self) -> bool {
        self.config.id == self.config.designated_gm
    }

    pub fn stats(&self) -> &GmStats {
        &self.stats
    }

    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// Tasks sent to an LM and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Every task waiting in this GM, with the reason its last attempt failed.
    pub fn pending(&self) -> impl Iterator<Item = &Pending> {
        self.queues
            .iter()
            .chain(self.slot_waiters.iter().map(|p| &**p))
            .chain(self.quota.waiting())
    }

    /// True once the state of every LM has arrived.
    pub fn has_full_view(&self) -> bool {
        self.lms.iter().all(Option::is_some)
    }

    /// The view of one LM, if its state has arrived.
    /// Nodes and total capacity of the LMs this GM has heard from.
    pub fn cluster_size(&self) -> (usize, Resources) {
        let views = self.lms.iter().flatten();
        let nodes = views.clone().map(|v| v.topology.node_count()).sum();
        (nodes, views.map(|v| v.total_capacity).sum())
    }

    pub fn view(&self, lm: LmId) -> Option<&LmView> {
        self.lms.get(lm.index()).and_then(Option::as_ref)
    }

    /// Accepts a task into its user queue.
    pub fn submit(&mut self, now: Micros, task: TaskSpec) {
        self.stats.submitted += 1;
        if task.kind.needs_designated_gm() && !self.is_designated() {
            self.stats.guaranteed_elsewhere += 1;
        }
        self.queues.push_ready(Box::new(Pending {
            task,
            submitted_at: now,
            attempts: 0,
            reason: None,
            preempting: None,
        }));
    }

    /// Applies an LM heartbeat (or the snapshot piggybacked on a response).
    pub fn apply_snapshot(&mut self, _now: Micros, snapshot: &LmSnapshot) {
        let l = snapshot.lm.index();
        if l >= self.lms.len() {
            return;
        }
        let me = self.config.id.index();
        let old_jobs = self.lms[l].as_ref().map(|v| v.jobs.clone());
        let slot = &mut self.lms[l];
        let rebuilt = match slot {
            Some(view)
                if std::sync::Arc::ptr_eq(&view.topology, &snapshot.topology)
                    || *view.topology == *snapshot.topology =>
            {
                false
            }
            _ => {
                *slot = Some(LmView::build(snapshot.topology.clone()));
                self.placement.topology_changed();
                true
            }
        };
        let Some(view) = slot.as_mut() else {
            return;
        };
        if !rebuilt && snapshot.version <= view.version {
            self.stats.stale_snapshots += 1;
            return;
        }
        self.stats.snapshots_applied += 1;
        self.usage_cache = None;
        let gained = view.apply(snapshot);
        let old_jobs = old_jobs.unwrap_or_default();
        self.quota.report(&old_jobs, &snapshot.jobs);
        // Launches sent after the snapshot was taken are not in it: deduct them again.
        let applied = snapshot.applied_batches.get(me).copied().unwrap_or(0);
        let in_flight = &mut self.in_flight[l];
        while in_flight.front().is_some_and(|f| f.seq <= applied) {
            if let Some(landed) = in_flight.pop_front() {
                landed
                    .queueable_jobs
                    .iter()
                    .for_each(|j| self.quota.landed(*j));
            }
        }
        self.quota
            .release()
            .into_iter()
            .for_each(|p| self.queues.push_ready(p));
        for f in in_flight.iter() {
            for (node, res) in &f.deducted {
                view.deduct(*node, res);
            }
        }
        if gained || rebuilt {
            self.failed_shapes.clear();
            self.preempt_refusals.clear();
            self.queues.unblock_all();
            while let Some(waiter) = self.slot_waiters.pop_front() {
                self.queues.push_ready(waiter);
            }
        }
    }

    /// Applies an LM's answer: launched tasks leave the GM; refused ones go to the
    /// back of their queue, to be tried again against the fresher state.
    pub fn handle_response(&mut self, now: Micros, response: &LaunchResponse) -> ResponseOutput {
        self.apply_snapshot(now, &response.snapshot);
        let mut out = ResponseOutput::default();
        // "Duplicate": the LM already holds this task, launched by an earlier copy
        // of the request whose answer was lost (a retry across an LM restart, the
        // worker having re-registered it). It runs: requeueing would run it twice.
        let already = LaunchOutcome::Launched {
            placement: Placement::Internal,
        };
        for (task, outcome) in &response.outcomes {
            let Some(mut pending) = self.outstanding.remove(task) else {
                out.unexpected.push(*task);
                continue;
            };
            let outcome = match outcome {
                LaunchOutcome::Rejected(RejectReason::Duplicate) => {
                    self.stats.duplicates_answered += 1;
                    &already
                }
                other => other,
            };
            if self.is_lra_container(&pending.task) {
                self.lra_answer(*task, response.lm, Some(outcome));
                match outcome {
                    LaunchOutcome::Launched { .. } => out.launched.push(*task),
                    LaunchOutcome::Rejected(r) => out.rejected.push((*task, r.clone())),
                }
                continue;
            }
            match outcome {
                LaunchOutcome::Launched { .. } => {
                    self.stats.launched += 1;
                    out.launched.push(*task);
                }
                LaunchOutcome::Rejected(reason) => {
                    self.stats.lm_rejections += 1;
                    pending.reason = Some(PendingReason::RejectedByLm {
                        rejection: reason.clone(),
                    });
                    self.queues.push_ready(pending);
                    out.rejected.push((*task, reason.clone()));
                }
            }
        }
        out
    }

    /// Applies an LM's answer to a preemption request: the task either runs (in the
    /// room its victims left) or goes back to its queue to try the next candidate.
    pub fn handle_preempt_response(&mut self, now: Micros, response: &PreemptResponse) -> bool {
        self.apply_snapshot(now, &response.snapshot);
        if let Some(flag) = self.preempt_in_flight.get_mut(response.lm.index()) {
            *flag = false;
        }
        // The LM can take another preemption: the oldest task waiting for one may ask.
        if let Some(waiter) = self.slot_waiters.pop_front() {
            self.queues.push_ready(waiter);
        }
        let Some(mut pending) = self.outstanding.remove(&response.task) else {
            return false;
        };
        match &response.outcome {
            // `Duplicate`: the task already runs there, so a request whose first
            // answer was lost did launch it.
            PreemptOutcome::Launched { .. }
            | PreemptOutcome::Refused(PreemptRefusal::Duplicate) => {
                self.stats.launched += 1;
                true
            }
            PreemptOutcome::Refused(why) => {
                self.stats.preempt_refused += 1;
                if let Some((lm, victim)) = pending.preempting.take() {
                    let shape = match why {
                        PreemptRefusal::NothingToFree => {
                            Some((pending.task.constraints, pending.task.resources))
                        }
                        _ => None,
                    };
                    self.preempt_refusals.insert((lm, victim, shape));
                }
                self.queues.push_ready(pending);
                false
            }
        }
    }

    /// Tasks of this GM's queues preempted by an LM: back to their queue, to be
    /// scheduled again as regular tasks.
    pub fn requeue_preempted(&mut self, now: Micros, preempted: &PreemptedTasks) {
        for (task, _lost) in &preempted.tasks {
            self.stats.preempted_requeued += 1;
            self.queues.push_ready(Box::new(Pending {
                task: task.clone(),
                submitted_at: now,
                attempts: 0,
                reason: None,
                preempting: None,
            }));
        }
    }

    /// A preemption request got no answer (the transport gave up): the LM's slot is
    /// free again and the task goes back to its queue as after a refusal, so it is
    /// never lost. Returns false if the GM was not waiting for it.
    pub fn abandon_preempt(&mut self, _now: Micros, lm: LmId, task: TaskId) -> bool {
        if let Some(flag) = self.preempt_in_flight.get_mut(lm.index()) {
            *flag = false;
        }
        if let Some(waiter) = self.slot_waiters.pop_front() {
            self.queues.push_ready(waiter);
        }
        let Some(mut pending) = self.outstanding.remove(&task) else {
            return false;
        };
        self.stats.preempt_refused += 1;
        pending.preempting = None;
        pending.reason = Some(PendingReason::LmUnreachable { lm });
        self.queues.push_ready(pending);
        true
    }

    /// One scheduling pass over every ready task.
    pub fn schedule(&mut self, _now: Micros) -> PassOutput {
        let mut out = PassOutput::default();
        if !self.has_full_view() || self.lms.is_empty() {
            return out;
        }
        while let Some(pending) = self.queues.pop_ready() {
            let decision = self.place(pending, &mut out);
            out.decisions.push(decision);
        }
        self.close_open_batches();
        out
    }

    /// Ends a pass: the next dispatch to any LM opens a new batch.
    pub(crate) fn close_open_batches(&mut self) {
        self.open_batches.iter_mut().for_each(|b| *b = None);
    }

    /// Places one task: the pipeline; on a match, dispatch; on a miss, the task
    /// leaves (unplaceable) or, lacking free resources now, goes to the fairness step
    /// and waits.
    fn place(&mut self, mut pending: Box<Pending>, out: &mut PassOutput) -> Decision {
        if pending.task.kind == TaskKind::Queueable {
            return self.place_queueable(pending, out);
        }
        let shape = (pending.task.constraints, pending.task.resources);
        let views = Views {
            lms: &self.lms,
            me: self.config.id.index(),
            gms: self.config.gms as usize,
        };
        let known_miss = self.failed_shapes.contains(&shape);
        let Attempt { effort, result } = self.placement.run(&views, shape.0, shape.1, known_miss);
        let task = pending.task.id;
        let outcome = match result {
            Ok(found) => self.dispatch_found(found, &mut pending, out),
            Err(Miss::Unplaceable(reason)) => {
                self.stats.unplaceable += 1;
                DecisionOutcome::Unplaceable(reason)
            }
            Err(miss @ Miss::NoFreeResources { .. }) => {
                self.failed_shapes.insert(shape);
                self.no_room(pending, miss.reason(), out)
            }
        };
        Decision {
            task,
            partitions: effort.partitions,
            words: effort.words,
            outcome,
        }
    }

    fn dispatch_found(
        &mut self,
        found: Found,
        pending: &mut Pending,
        out: &mut PassOutput,
    ) -> DecisionOutcome {
        let Found {
            lm,
            node,
            placement,
        } = found;
        let batch = self.dispatch(lm, node, placement, pending, out, true);
        match placement {
            Placement::Internal => self.stats.dispatched_internal += 1,
            Placement::Repartition => self.stats.dispatched_repartition += 1,
        }
        DecisionOutcome::Dispatched {
            lm: LmId(lm as u16),
            node,
            placement,
            batch,
        }
    }

    /// No node has room now: the fairness step (preempt a queue over its share), or
    /// the task waits until the view gains resources (or a preemption slot frees).
    fn no_room(
        &mut self,
        mut pending: Box<Pending>,
        mut reason: PendingReason,
        out: &mut PassOutput,
    ) -> DecisionOutcome {
        let shape = (pending.task.constraints, pending.task.resources);
        let decided = match &self.config.fairness {
            Some(f) => {
                let usage = self
                    .usage_cache
                    .get_or_insert_with(|| usage_view(&self.lms));
                let refusals = &self.preempt_refusals;
                let refused = |lm, victim| {
                    refusals.contains(&(lm, victim, None))
                        || refusals.contains(&(lm, victim, Some(shape)))
                };
                contention(
                    f,
                    &self.lms,
                    usage,
                    pending.task.queue,
                    &refused,
                    &self.preempt_in_flight,
                )
            }
            None => Contention::NoVictim,
        };
        match decided {
            Contention::Preempt { lm, victim } => {
                self.stats.preempt_attempts += 1;
                self.preempt_in_flight[lm.index()] = true;
                pending.attempts += 1;
                out.preempts.push(PreemptRequest {
                    gm: self.config.id,
                    lm,
                    task: pending.task.clone(),
                    victim,
                });
                pending.preempting = Some((lm, victim));
                self.outstanding.insert(pending.task.id, pending);
                return DecisionOutcome::Preempting { lm, victim };
            }
            Contention::OverShare => reason = PendingReason::OverShare,
            Contention::NoVictim => {}
            Contention::Busy => {
                self.stats.requeues += 1;
                pending.reason = Some(reason.clone());
                pending.attempts += 1;
                self.slot_waiters.push_back(pending);
                return DecisionOutcome::Requeued(reason);
            }
        }
        self.stats.requeues += 1;
        pending.reason = Some(reason.clone());
        pending.attempts += 1;
        self.queues.push_blocked(pending);
        DecisionOutcome::Requeued(reason)
    }

    pub(crate) fn host_count_pub(
        &mut self,
        constraints: ConstraintSet,
        request: Resources,
    ) -> (u64, u64) {
        let c = self.placement.host_count(&self.lms, constraints, request);
        (c.with_constraints, c.large_enough)
    }

    pub(crate) fn lm_views(&self) -> &[Option<LmView>] {
        &self.lms
    }

    pub(crate) fn lm_view_mut(&mut self, l: usize) -> Option<&mut LmView> {
        self.lms.get_mut(l).and_then(Option::as_mut)
    }

    pub(crate) fn config(&self) -> &GmConfig {
        &self.config
    }

    pub(crate) fn stats_mut(&mut self) -> &mut GmStats {
        &mut self.stats
    }
}
