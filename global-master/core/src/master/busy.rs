//! Requests that did not reach an LM, and LMs that take no new work for a while.
//!
//! A request the transport gave up on ([`Undelivered`]) is undone: a launch batch's
//! tasks go back to their queues and its deductions leave the view; a preemption's
//! task goes back too; a cancel is sent again later. An LM that answered *busy*
//! (it applied nothing and asks to be called again after some time: its broker
//! backlog is full, or its workers have not registered yet) gets the same undoing,
//! and placement passes it by until that time: its tasks go to other LMs at the
//! next pass instead of waiting for it, and without a loop of refusals. When the
//! time is over, every node of the LM counts as grown (tasks blocked meanwhile may
//! fit there) and a pass is wanted.

use super::step::{GmOutput, Undelivered};
use super::GlobalMaster;
use common::reasons::PendingReason;
use common::{LmId, Micros};

impl GlobalMaster {
    /// Undoes a request that did not reach its LM; its tasks wait for `reason`.
    pub(super) fn undelivered(
        &mut self,
        now: Micros,
        request: Undelivered,
        reason: PendingReason,
        out: &mut GmOutput,
    ) {
        match request {
            Undelivered::Batch { lm, seq, tasks } => {
                out.requeued = tasks
                    .iter()
                    .filter(|t| self.dispatcher.awaits(t))
                    .map(|t| (*t, reason.clone()))
                    .collect();
                out.affected = self.abandon_batch_for(now, lm, seq, &tasks, reason);
                out.wants_pass = out.affected > 0;
                self.drop_cancelled(&tasks, out);
            }
            Undelivered::Preempt { lm, task } => {
                if self.abandon_preempt_for(now, lm, task, reason.clone()) {
                    out.requeued = vec![(task, reason)];
                }
                out.affected = out.requeued.len();
                out.wants_pass = true;
                self.drop_cancelled(&[task], out);
            }
            Undelivered::Cancel { lm, job } => self.cancel_undelivered(now, lm, job),
            Undelivered::Reconcile { .. } => {}
            Undelivered::Gang {
                lm,
                job,
                generation,
            } => {
                self.gang_undelivered(now, lm, job, generation, out);
                out.wants_pass = true;
            }
        }
    }

    /// Placement passes `lm` by until `until` (or a later time it was given).
    pub(super) fn lm_busy(&mut self, lm: LmId, until: Micros) {
        self.stats.lm_busy += 1;
        let Some(view) = self.view.get_mut(lm.index()) else {
            // No view yet: nothing places there anyway.
            return;
        };
        view.busy_until = Some(view.busy_until.map_or(until, |u| u.max(until)));
        if !self.busy_lms.contains(&lm) {
            self.busy_lms.push(lm);
        }
    }

    /// LMs whose busy time is over take work again: their nodes count as grown.
    /// True when one did (a pass is wanted).
    pub(super) fn lms_back(&mut self, now: Micros) -> bool {
        if self.busy_lms.is_empty() {
            return false;
        }
        let mut back = false;
        let view = &mut self.view;
        self.busy_lms.retain(|lm| {
            let Some(v) = view.get_mut(lm.index()) else {
                return false;
            };
            match v.busy_until {
                Some(until) if until > now => true,
                Some(_) => {
                    v.busy_until = None;
                    v.raise_all();
                    back = true;
                    false
                }
                // A new life of the LM replaced the view: it takes work.
                None => false,
            }
        });
        if back {
            self.backlog.view_gained();
        }
        back
    }

    /// When the first busy LM takes work again, if any is busy.
    pub(super) fn next_lm_back(&self) -> Option<Micros> {
        self.busy_lms
            .iter()
            .filter_map(|lm| self.view.get(lm.index())?.busy_until)
            .min()
    }
}
