//! The safe expiry of held preemption requests: an LM's answer to this GM's ask
//! about requests whose final answer is overdue
//! ([`common::messages::ReconcileRequest::preempts`], sent by
//! `held_preempts_due`). Still held: the GM keeps waiting (and asks again a
//! period later). Launched: the task runs there. Not held: the LM voided the
//! request in the same step, so the task goes back to its queue and can never
//! run twice. An answer about a request no longer waited for (a repeat, or one
//! settled meanwhile by its final answer or the LM's restart) is late: a launch
//! takes the task out of the queues if it is still there, as a late final answer
//! does.

use super::step::GmOutput;
use super::GlobalMaster;
use common::messages::{HeldPreemptState, ReconcileResponse};
use common::reasons::PendingReason;

impl GlobalMaster {
    /// Applies `answer`'s states of held requests, each once.
    pub(super) fn held_asks_answered(&mut self, answer: &ReconcileResponse, out: &mut GmOutput) {
        let lm = answer.lm;
        for &(task, state) in &answer.preempts {
            if !self.fairness.waits_for(lm, task) {
                self.stats.held_asks_late += 1;
                if state == HeldPreemptState::Launched && self.withdraw_launched(task) {
                    out.answered.launched.push(task);
                    self.stop_cancelled(lm, [task], out);
                }
                continue;
            }
            match state {
                HeldPreemptState::StillHeld => {
                    self.stats.held_asks_still_held += 1;
                    self.fairness.still_held(lm, task);
                }
                HeldPreemptState::Launched => {
                    self.stats.held_asks_launched += 1;
                    self.fairness.answered(lm, task);
                    if self.dispatcher.answered(&task).is_some() {
                        self.stats.launched += 1;
                        out.answered.launched.push(task);
                        self.stop_cancelled(lm, [task], out);
                    }
                }
                HeldPreemptState::NotHeld => {
                    self.stats.held_asks_not_held += 1;
                    self.fairness.answered(lm, task);
                    if let Some(mut pending) = self.dispatcher.answered(&task) {
                        self.stats.preempt_refused += 1;
                        pending.preempting = None;
                        let reason = PendingReason::LmUnreachable { lm };
                        pending.reason = Some(reason.clone());
                        self.backlog.push_ready(pending);
                        out.requeued.push((task, reason));
                        self.drop_cancelled(&[task], out);
                    }
                }
            }
        }
    }
}
