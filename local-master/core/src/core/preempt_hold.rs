//! The preemption hold ([`common::preemption::PreemptionRules::hold`]): a fairness
//! preemption that would kill is held at the LM; after every step, the room that
//! freed goes to the held requests (oldest first) before any GM's launch can take
//! it, and a request whose hold ended preempts (or is refused) as one not held.
//!
//! Why at the LM: every GM sees freed room in its view at about the same time,
//! and the GM of a queue over its share, with a long backlog, takes most of it;
//! the queue under its share then preempts again and the kill was wasted. The LM
//! is the one writer of its nodes, so a claim it holds cannot lose that race.
//!
//! A GM whose final answer to a held request is overdue asks the LM about it
//! ([`common::messages::ReconcileRequest::preempts`]); the LM answers still
//! held, launched, or neither, and voids the request in the same step when it
//! answers neither, so that the answer stays true: the GM queues the task again.

use super::preempt::VictimChoice;
use super::LocalMaster;
use crate::effects::LmEffects;
use common::messages::{HeldPreemptState, PreemptOutcome, PreemptRefusal, PreemptRequest};
use common::{GmId, JobId, Micros, NodeId, TaskId};

impl LocalMaster {
    /// Serves the held requests: each one that now fits on a node launches there
    /// (no kill); each one whose hold ended is decided as a request not held.
    /// Requests of a replaced GM life are dropped (nobody waits for them).
    pub(super) fn serve_held_preempts(&mut self, now: Micros, effects: &mut LmEffects) {
        if self.preempt_holds.is_empty() {
            return;
        }
        // The nodes with any room (few, when requests are held): one scan a step.
        let open: Vec<usize> = (0..self.free.len())
            .filter(|&n| !self.down[n] && !self.drained[n] && !self.free[n].is_zero())
            .collect();
        for held in self.preempt_holds.take_all() {
            let request = &held.request;
            if self.answers.superseded(request.gm, request.life) {
                continue;
            }
            let (gm, task) = (request.gm, request.task.id);
            let outcome = match self.room_for(request, &open) {
                Some(node) => {
                    let choice = VictimChoice {
                        node,
                        victims: Vec::new(),
                    };
                    self.carry_out(now, held.request, &choice, effects)
                }
                None if now >= held.until => match self.verify(now, request) {
                    Ok(choice) => self.carry_out(now, held.request, &choice, effects),
                    Err(refusal) => PreemptOutcome::Refused(refusal),
                },
                None => {
                    self.preempt_holds.keep(held);
                    continue;
                }
            };
            let answer = self.preempt_answer(now, gm, task, outcome, true);
            effects.held_preempt_answers.push(answer);
        }
    }

    /// A node among `open` (of the requesting GM's partition first) with free
    /// room for the request's task now, as a launch would find it.
    fn room_for(&self, request: &PreemptRequest, open: &[usize]) -> Option<NodeId> {
        let task = &request.task;
        let mut elsewhere = None;
        for &n in open {
            if !task.constraints.satisfied_by(self.topology.constraints[n])
                || !self.free[n].fits(&task.resources)
            {
                continue;
            }
            if self.topology.home[n] == request.gm {
                return Some(NodeId(n as u32));
            }
            elsewhere.get_or_insert(NodeId(n as u32));
        }
        elsewhere
    }

    /// `gm` cancelled `job`: its held requests are refused (nothing is killed for
    /// a cancelled task), on the GM's stream.
    pub(super) fn cancel_held_preempts(
        &mut self,
        now: Micros,
        gm: common::GmId,
        job: JobId,
        effects: &mut LmEffects,
    ) {
        for held in self.preempt_holds.remove_job(gm, job) {
            let outcome = PreemptOutcome::Refused(PreemptRefusal::Cancelled);
            let answer = self.preempt_answer(now, gm, held.request.task.id, outcome, true);
            effects.held_preempt_answers.push(answer);
        }
    }

    /// Preemption requests held now.
    pub fn held_preempts(&self) -> usize {
        self.preempt_holds.len()
    }

    /// `gm` (life `life`, its newest request numbered `seq`) asks about its held
    /// requests for `asked` (task, run) whose final answer it has not had: each
    /// is still held, launched (it runs, is being stopped, or ended here), or
    /// neither, and then void from now on (nothing of `gm` numbered up to `seq`
    /// for that task launches here any more), in this one step.
    pub(super) fn held_asked(
        &mut self,
        (gm, life, seq): (GmId, u64, u64),
        asked: &[(TaskId, u32)],
    ) -> Vec<(TaskId, HeldPreemptState)> {
        let mut states = Vec::with_capacity(asked.len());
        for &(task, run) in asked {
            let state = if self.preempt_holds.until_of(gm, task).is_some() {
                HeldPreemptState::StillHeld
            } else if self.running.contains_key(&task)
                || self.queued.contains_key(&task)
                || self.pending_kills.contains_key(&task)
                || self.restarted.has_finished(&task, run)
                || self.restarted.has_failed(task, run)
                || self.lost.contains(&(task, run))
            {
                HeldPreemptState::Launched
            } else {
                self.preempt_holds.void(gm, life, task, seq);
                HeldPreemptState::NotHeld
            };
            states.push((task, state));
        }
        states
    }
}
