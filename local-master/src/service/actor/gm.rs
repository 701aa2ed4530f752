//! Requests from GMs, whatever the message (launch batch, preemption, ...): one
//! endpoint (`POST /v1/messages`), one handler, one call of the core's `step`.
//!
//! The core validates the request against the LM's authoritative state and answers
//! it at once; its orders go to the workers (see [`LmActor::apply`]). The answer is
//! returned once those orders have reached their workers (or after
//! [`DELIVERY_WAIT`]): a GM told "launched" can then rely on the task existing
//! somewhere other than this LM's memory (a worker lists it when it registers with a
//! restarted LM).

use super::LmActor;
use actix::prelude::*;
use common::messages::{LaunchOutcome, Placement, PreemptOutcome};
use common::protocol::{GmToLm, LmToGm};
use lm_core::gate::Refusal;
use lm_core::LmInput;
use service_kit::clock;
use std::time::Duration;

/// A GM's request; answered with the LM's answer (which carries its state).
#[derive(Message, Debug)]
#[rtype(result = "Result<LmToGm, GmRequestError>")]
pub struct FromGm(pub GmToLm);

/// Why a request was not handled at all (nothing of it was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GmRequestError {
    /// Malformed for this LM (addressed to another one).
    #[error("{0}")]
    Invalid(String),
    /// From a GM life older than one this LM has seen (a standby took over): the
    /// sender is fenced.
    #[error("{0}")]
    Superseded(String),
    /// Some workers have not registered yet (start-up, or after a restart, when the
    /// tasks they hold are not yet in the state): send again shortly.
    #[error("not ready: {missing} of {slots} workers have not registered with this LM yet")]
    NotReady { missing: usize, slots: usize },
    /// A late first copy of a launch batch this LM answered busy and never applied
    /// (a duplicating transport delivered it after the answer): its GM took the
    /// batch back and may have placed its tasks elsewhere, so it is answered busy
    /// again. A resend (`LaunchBatch::resend`: its GM is still in doubt) is applied.
    #[error("launch batch {seq} of {gm} was answered busy before and not applied; this late copy is not applied either")]
    AnsweredBusy { gm: common::GmId, seq: u64 },
}

/// A launch batch the HTTP layer answered busy (broker backlog): a late first copy
/// of it is not applied (see [`GmRequestError::AnsweredBusy`]).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct AnsweredBusy {
    pub gm: common::GmId,
    pub seq: u64,
}

impl Handler<AnsweredBusy> for LmActor {
    type Result = ();

    fn handle(&mut self, msg: AnsweredBusy, _: &mut Context<Self>) {
        self.gate.answered_busy(msg.gm, msg.seq);
    }
}

/// How long an answer waits for its orders to reach the workers (the GM's own
/// timeout and resend take over beyond).
pub const DELIVERY_WAIT: Duration = Duration::from_secs(3);

/// A future that resolves when a worker has received its orders.
type Delivery = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Handler<FromGm> for LmActor {
    type Result = ResponseFuture<Result<LmToGm, GmRequestError>>;

    fn handle(&mut self, msg: FromGm, ctx: &mut Context<Self>) -> Self::Result {
        let answer = self.handle_gm_request(msg.0, ctx);
        Box::pin(async move {
            let (answer, deliveries) = answer?;
            let all = futures_util::future::join_all(deliveries);
            if tokio::time::timeout(DELIVERY_WAIT, all).await.is_err() {
                tracing::warn!(
                    answer = answer.kind(),
                    "orders not yet delivered to their workers; answering anyway"
                );
            }
            Ok(answer)
        })
    }
}

impl LmActor {
    fn handle_gm_request(
        &mut self,
        message: GmToLm,
        ctx: &mut Context<Self>,
    ) -> Result<(LmToGm, Vec<Delivery>), GmRequestError> {
        let readiness = self.readiness();
        let core = &self.core;
        match self
            .gate
            .admit(&message, readiness, |gm, seq| core.has_batch(gm, seq))
        {
            Ok(()) => {}
            Err(Refusal::LateCopy { gm, seq }) => {
                self.counters.late_copies_refused += 1;
                tracing::warn!(%gm, seq, "late copy of a launch batch answered busy before; not applied");
                return Err(GmRequestError::AnsweredBusy { gm, seq });
            }
            Err(Refusal::NotReady { missing, slots }) => {
                return Err(GmRequestError::NotReady { missing, slots });
            }
        }
        self.count_request(&message);
        let out = self
            .core
            .step(clock::now(), LmInput::Gm(message))
            .map_err(|e| match e {
                crate::core::LmError::OlderGmLife { gm, life, newest } => {
                    tracing::warn!(%gm, life, newest, refused = self.core.older_gm_life_refused(), "request of a replaced GM life refused (fenced: a newer life of that GM took over)");
                    GmRequestError::Superseded(e.to_string())
                }
                e @ crate::core::LmError::ForeignGangMember { .. } => {
                    tracing::warn!(error = %e, "gang stop refused: it names a task of another job");
                    GmRequestError::Invalid(e.to_string())
                }
                e => GmRequestError::Invalid(e.to_string()),
            })?;
        let mut slots: Vec<usize> = out
            .to_workers
            .iter()
            .map(|o| self.slot_of(o.node()))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let answer = self
            .apply(out, ctx)
            .ok_or_else(|| GmRequestError::Invalid("the core produced no answer".to_owned()))?;
        self.count_answer(&answer);
        Ok((answer, self.deliveries(&slots)))
    }

    fn count_request(&mut self, message: &GmToLm) {
        let c = &mut self.counters;
        match message {
            GmToLm::Launch(batch) => {
                c.batches += 1;
                c.requests += batch.requests.len() as u64;
            }
            GmToLm::Preempt(_) => c.preempt_requests += 1,
            GmToLm::Cancel(_) => c.cancel_requests += 1,
            GmToLm::Reconcile(r) if !r.preempts.is_empty() => {
                tracing::info!(gm = %r.gm, requests = r.preempts.len(), "a GM asks about held preemption requests whose final answer it has not had")
            }
            GmToLm::Reconcile(r) => {
                tracing::info!(gm = %r.gm, tasks = r.tasks.len(), "a restarted GM asks which of its tasks this LM holds")
            }
            GmToLm::Gang(g) => {
                tracing::debug!(gm = %g.gm, job = g.job.0, generation = g.generation, op = g.op.label(), "gang request")
            }
        }
    }

    /// Counters and log lines of an answer.
    pub(super) fn count_answer(&mut self, answer: &LmToGm) {
        let c = &mut self.counters;
        match answer {
            LmToGm::LaunchAnswer(r) => {
                for (task, outcome) in &r.outcomes {
                    match outcome {
                        LaunchOutcome::Launched { placement } => {
                            c.launched += 1;
                            if *placement == Placement::Repartition {
                                c.repartitions += 1;
                            }
                        }
                        LaunchOutcome::Rejected(reason) => {
                            c.rejections += 1;
                            tracing::debug!(task = %task, job = task.job.0, gm = %r.gm, seq = r.seq, %reason, "launch refused");
                        }
                    }
                }
            }
            LmToGm::PreemptAnswer(r) => match &r.outcome {
                PreemptOutcome::Launched { node, preempted } => {
                    c.preemptions += 1;
                    tracing::info!(task = %r.task, job = r.task.job.0, gm = %r.gm, %node, victims = preempted.len(), "preempted to launch a task");
                }
                PreemptOutcome::Refused(why) => {
                    *c.preempt_refused.entry(why.label()).or_default() += 1;
                    tracing::info!(task = %r.task, job = r.task.job.0, gm = %r.gm, reason = why.label(), "preemption refused");
                }
                PreemptOutcome::Held { until } => {
                    tracing::info!(task = %r.task, job = r.task.job.0, gm = %r.gm, until_us = until.0, "preemption held for room that frees by itself");
                }
            },
            LmToGm::CancelAnswer(r) => {
                c.tasks_cancelled += r.cancelled.len() as u64;
                if !r.cancelled.is_empty() {
                    tracing::info!(job = r.job.0, gm = %r.gm, tasks = r.cancelled.len(), "cancelled: stopping the job's tasks");
                }
                if !r.not_yours.is_empty() {
                    c.cancel_not_yours += r.not_yours.len() as u64;
                    tracing::warn!(job = r.job.0, gm = %r.gm, tasks = r.not_yours.len(), "cancel request for tasks another GM launched; left running");
                }
            }
            LmToGm::ReconcileAnswer(r) if !r.preempts.is_empty() => {
                for (task, state) in &r.preempts {
                    tracing::info!(gm = %r.gm, task = %task, job = task.job.0, state = state.label(), "answered a GM's ask about a held preemption request (not_held: void here from now on)");
                }
            }
            LmToGm::ReconcileAnswer(r) => {
                tracing::info!(gm = %r.gm, held = r.held.len(), finished = r.finished.len(), "told a restarted GM which of its tasks this LM holds");
            }
            LmToGm::GangAnswer(r) => match &r.outcome {
                // A request of an abandoned generation, or a commit of a part not
                // held (expired): nothing was done for it (the core counts them).
                common::messages::GangOutcome::Stale { newest } => {
                    tracing::info!(job = r.job.0, gm = %r.gm, generation = r.generation, newest, op = %r.op, "gang request of an abandoned generation ignored")
                }
                common::messages::GangOutcome::NotHeld => {
                    tracing::warn!(job = r.job.0, gm = %r.gm, generation = r.generation, "gang commit of a part not held (expired or released): nothing launched")
                }
                outcome => {
                    tracing::debug!(job = r.job.0, gm = %r.gm, generation = r.generation, op = %r.op, outcome = outcome.label(), "gang answer")
                }
            },
            LmToGm::State(_) | LmToGm::Requeue(_) | LmToGm::Ended(_) | LmToGm::Started(_) => {}
        }
    }

    /// Futures that resolve once the workers of `slots` have received their orders.
    fn deliveries(&self, slots: &[usize]) -> Vec<Delivery> {
        slots
            .iter()
            .filter_map(|slot| self.worker_sender(*slot))
            .map(|sender| Box::pin(sender.delivered()) as Delivery)
            .collect()
    }
}
