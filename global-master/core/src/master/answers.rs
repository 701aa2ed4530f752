//! What comes back from the LMs: snapshots (heartbeats, or piggybacked on every
//! answer), launch answers, preemption answers, preempted tasks handed back, and the
//! transport's notices of requests never delivered. Each updates the parts it
//! concerns, in a fixed order.

use super::{new_pending, GlobalMaster};
use crate::cluster_view::SnapshotApplied;
use crate::outputs::ResponseOutput;
use common::messages::{
    LaunchOutcome, LaunchResponse, LmSnapshot, Placement, PreemptOutcome, PreemptRefusal,
    PreemptResponse, PreemptedTasks, ReconcileRequest,
};
use common::protocol::GmToLm;
use common::reasons::{PendingReason, RejectReason};
use common::{LmId, Micros, TaskId};

impl GlobalMaster {
    /// Applies an LM heartbeat (or the snapshot piggybacked on a response).
    /// The driver heard from life `incarnation` of `lm` outside its state (a
    /// restarted GM's reconcile answer: the tasks it holds). If the view follows
    /// another life already, or takes up another one first, `lm` is named in
    /// [`crate::GmOutput::lm_new_lives`] like any restart: what that answer said
    /// may no longer hold.
    pub fn lm_life_heard(&mut self, lm: LmId, incarnation: u64) {
        let Some(slot) = self.heard_lives.get_mut(lm.index()) else {
            return;
        };
        match self.view.get(lm.index()).map(|v| v.incarnation) {
            Some(now) if now != 0 && now != incarnation => {
                self.stats.lm_new_lives += 1;
                self.new_lives.push(lm);
            }
            Some(now) if now != 0 => {}
            _ => *slot = Some(incarnation),
        }
    }

    pub fn apply_snapshot(&mut self, now: Micros, snapshot: &LmSnapshot) {
        // One partition per GM: a state cut for another number of GMs is of another
        // cluster (or a misconfigured LM); placing with it would index partitions
        // that do not exist.
        if usize::from(snapshot.topology.gms) != usize::from(self.config.gms)
            || snapshot.topology.home.len() != snapshot.free.len()
        {
            self.stats.foreign_snapshots += 1;
            return;
        }
        let life_before = self
            .view
            .get(snapshot.lm.index())
            .map(|v| v.incarnation)
            .filter(|&i| i != 0)
            .or_else(|| {
                self.heard_lives
                    .get_mut(snapshot.lm.index())
                    .and_then(Option::take)
            });
        let (old_jobs, rebuilt, gained) = match self.view.apply(snapshot) {
            SnapshotApplied::UnknownLm => return,
            SnapshotApplied::Stale => {
                self.stats.stale_snapshots += 1;
                return;
            }
            SnapshotApplied::OtherLife => {
                self.stats.other_life_snapshots += 1;
                return;
            }
            SnapshotApplied::Applied {
                old_jobs,
                rebuilt,
                gained,
            } => (old_jobs, rebuilt, gained),
        };
        if rebuilt {
            self.placement.topology_changed();
            self.backlog.view_rebuilt();
        }
        self.stats.snapshots_applied += 1;
        if life_before.is_some_and(|i| i != snapshot.incarnation) {
            // The LM restarted: its new life may not know every task of ours it
            // ran (the driver asks it, see `GmOutput::lm_new_lives`).
            self.stats.lm_new_lives += 1;
            self.new_lives.push(snapshot.lm);
            for job in self.dispatcher.forget_settled(snapshot.lm.index()) {
                self.quota.landed(job);
            }
            // Requests its previous life held will never be answered.
            for task in self.fairness.held_at(snapshot.lm) {
                let reason = PendingReason::LmUnreachable { lm: snapshot.lm };
                self.abandon_preempt_for(now, snapshot.lm, task, reason);
            }
        }
        self.fairness.view_changed();
        self.quota.report(&old_jobs, &snapshot.jobs);
        // Launches sent after the snapshot was taken are not in it: deduct them again.
        let l = snapshot.lm.index();
        let applied = snapshot
            .applied_batches
            .get(self.config.id.index())
            .copied()
            .unwrap_or(0);
        for job in self.dispatcher.landed(l, applied) {
            self.quota.landed(job);
        }
        self.backlog.push_all_ready(self.quota.release());
        if let Some(view) = self.view.get_mut(l) {
            self.dispatcher.deduct_in_flight(l, view);
        }
        if gained || rebuilt {
            self.backlog.view_gained();
            self.fairness.view_gained(&mut self.backlog);
        }
    }

    /// Applies an LM's answer: launched tasks leave the GM; refused ones go to the
    /// back of their queue, to be tried again against the fresher state.
    pub fn handle_response(&mut self, now: Micros, response: &LaunchResponse) -> ResponseOutput {
        self.apply_snapshot(now, &response.snapshot);
        let mut out = ResponseOutput::default();
        // Most answers launch every task: one allocation for them.
        let launches = response
            .outcomes
            .iter()
            .filter(|(_, o)| matches!(o, LaunchOutcome::Launched { .. }))
            .count();
        out.launched.reserve(launches);
        // "Duplicate": the LM already holds this task, launched by an earlier copy
        // of the request whose answer was lost (a retry across an LM restart, the
        // worker having re-registered it). It runs: requeueing would run it twice.
        let already = LaunchOutcome::Launched {
            placement: Placement::Internal,
        };
        for (task, outcome) in &response.outcomes {
            let Some(mut pending) = self.dispatcher.answered_in(response.lm, response.seq, task)
            else {
                if self.dispatcher.awaits(task) {
                    // It awaits another batch's answer: this one is stale.
                    self.stats.stale_answers += 1;
                }
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
            if self.lra.is_container(&pending.task) {
                self.lra
                    .answer(*task, response.lm, Some(outcome), &mut self.stats);
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
                LaunchOutcome::Rejected(_) if self.lifecycle.has_ended(*task) => {
                    // It ended for good while this run was out: nothing to queue.
                    self.stats.lm_rejections += 1;
                    self.stats.stale_answers += 1;
                }
                LaunchOutcome::Rejected(reason) => {
                    self.stats.lm_rejections += 1;
                    // Soft constraints: the refused run no longer counts.
                    if self.soft.has(task.job) {
                        self.soft.refused(*task);
                    }
                    pending.reason = Some(PendingReason::RejectedByLm {
                        rejection: reason.clone(),
                    });
                    self.backlog.push_ready(pending);
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
        // The refusal of a late copy of a request already settled (the LM told
        // this GM it did not hold it): nothing awaits it (the service counts it,
        // `megha_gm_preempt_refused_total{reason="void"}`).
        if let PreemptOutcome::Refused(PreemptRefusal::Void) = response.outcome {
            return false;
        }
        // Held: the task waits at the LM for room (its resources count as its
        // queue's usage meanwhile), and the LM may take this GM's next request.
        if let PreemptOutcome::Held { .. } = response.outcome {
            if let Some(p) = self.dispatcher.awaiting(&response.task) {
                let claim = (p.task.queue, p.task.resources);
                self.fairness.held(now, response.lm, response.task, claim);
            }
            self.fairness.slot_freed(response.lm, &mut self.backlog);
            return false;
        }
        if !self.fairness.answered(response.lm, response.task) && response.held {
            return self.late_held_answer(response);
        }
        // The LM can take another preemption: the oldest task waiting for one may
        // ask (a held request's final answer frees no slot: it freed at `held`).
        if !response.held {
            self.fairness.slot_freed(response.lm, &mut self.backlog);
        }
        let Some(mut pending) = self.dispatcher.answered(&response.task) else {
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
            // Answered above.
            PreemptOutcome::Held { .. } => false,
            PreemptOutcome::Refused(why) => {
                self.stats.preempt_refused += 1;
                if let Some((lm, victim)) = pending.preempting.take() {
                    let shape = (pending.task.constraints, pending.task.resources);
                    self.fairness.refused(lm, victim, shape, why);
                }
                self.backlog.push_ready(pending);
                false
            }
        }
    }

    /// The final answer of a held request this GM no longer waits for (the LM's
    /// life that held it was replaced, or an ask's answer settled it first): the
    /// task may have been queued again, and asked for elsewhere. If it launched
    /// here after all, it leaves the queues (it runs); a refusal changes nothing.
    fn late_held_answer(&mut self, response: &PreemptResponse) -> bool {
        self.stats.held_answers_late += 1;
        let PreemptOutcome::Launched { .. } = response.outcome else {
            return false;
        };
        self.withdraw_launched(response.task)
    }

    /// `task` launched at an LM by a held request this GM no longer waited for:
    /// out of the queues if it is still there (true: it runs).
    pub(super) fn withdraw_launched(&mut self, task: TaskId) -> bool {
        let withdrawn = self.backlog.remove_task(task).is_some()
            || !self.fairness.remove_if(&|t| *t == task).is_empty();
        if withdrawn {
            self.stats.launched += 1;
        }
        withdrawn
    }

    /// Held requests whose final answer is overdue (their LM died, is cut off,
    /// lost the answer, or restarted in a way this GM has not seen yet): the GM
    /// asks their LM whether it still holds each or launched its task, one ask
    /// per LM, again every [`crate::fairness::HELD_ASK_PERIOD`] while it gets no
    /// answer. The task is never queued again blind meanwhile: that LM's life
    /// may still launch it (see `master/held_asks.rs` for the answer).
    pub(super) fn held_preempts_due(&mut self, now: Micros, out: &mut super::step::GmOutput) {
        let mut asks: Vec<ReconcileRequest> = Vec::new();
        for (lm, task) in self.fairness.held_expired(now) {
            let Some(run) = self.dispatcher.awaiting(&task).map(|p| p.task.attempt) else {
                // Not awaited any more: nothing to ask.
                self.fairness.answered(lm, task);
                continue;
            };
            if self.fairness.asking(now, lm, task) {
                self.stats.held_asks_unanswered += 1;
            }
            self.stats.held_asks_sent += 1;
            match asks.iter_mut().find(|a| a.lm == lm) {
                Some(ask) => ask.preempts.push((task, run)),
                None => asks.push(ReconcileRequest {
                    gm: self.config.id,
                    lm,
                    tasks: Vec::new(),
                    forget: false,
                    life: self.config.life,
                    preempts: vec![(task, run)],
                    preempt_seq: self.fairness.preempt_seq(),
                }),
            }
        }
        out.to_lms.extend(asks.into_iter().map(GmToLm::Reconcile));
    }

    /// Tasks of this GM's queues preempted by an LM: back to their queue, to be
    /// scheduled again as regular tasks.
    pub fn requeue_preempted(&mut self, now: Micros, preempted: &PreemptedTasks) {
        for (task, _lost) in &preempted.tasks {
            self.stats.preempted_requeued += 1;
            self.backlog.push_ready(new_pending(now, task.clone()));
        }
    }

    /// A preemption request got no answer (the transport gave up): the LM's slot is
    /// free again and the task goes back to its queue as after a refusal, so it is
    /// never lost. Returns false if the GM was not waiting for it.
    pub fn abandon_preempt(&mut self, now: Micros, lm: LmId, task: TaskId) -> bool {
        self.abandon_preempt_for(now, lm, task, PendingReason::LmUnreachable { lm })
    }

    /// [`GlobalMaster::abandon_preempt`], the task waiting for `reason`.
    pub(super) fn abandon_preempt_for(
        &mut self,
        _now: Micros,
        lm: LmId,
        task: TaskId,
        reason: PendingReason,
    ) -> bool {
        self.fairness.answered(lm, task);
        self.fairness.slot_freed(lm, &mut self.backlog);
        let Some(mut pending) = self.dispatcher.answered(&task) else {
            return false;
        };
        self.stats.preempt_refused += 1;
        pending.preempting = None;
        pending.reason = Some(reason);
        self.backlog.push_ready(pending);
        true
    }

    /// A launch batch never reached its LM (the transport gave up): its tasks go back
    /// to their queues with the reason, and its deductions leave the view.
    pub fn abandon_batch(&mut self, now: Micros, lm: LmId, seq: u64, tasks: &[TaskId]) -> usize {
        self.abandon_batch_for(now, lm, seq, tasks, PendingReason::LmUnreachable { lm })
    }

    /// [`GlobalMaster::abandon_batch`], the tasks waiting for `reason`.
    pub(super) fn abandon_batch_for(
        &mut self,
        _now: Micros,
        lm: LmId,
        seq: u64,
        tasks: &[TaskId],
        reason: PendingReason,
    ) -> usize {
        for job in self.dispatcher.abandon(&mut self.view, lm, seq) {
            self.quota.landed(job);
        }
        let mut requeued = 0;
        for task in tasks {
            if let Some(mut pending) = self.dispatcher.answered_in(lm, seq, task) {
                if self.lra.is_container(&pending.task) {
                    self.lra.answer(*task, lm, None, &mut self.stats);
                    continue;
                }
                if self.lifecycle.has_ended(*task) {
                    // It ended for good while this run was out: nothing to queue.
                    self.stats.undelivered_after_end += 1;
                    continue;
                }
                pending.reason = Some(reason.clone());
                self.backlog.push_ready(pending);
                requeued += 1;
            }
        }
        self.backlog.push_all_ready(self.quota.release());
        if requeued > 0 {
            self.backlog.view_gained();
        }
        requeued
    }
}
