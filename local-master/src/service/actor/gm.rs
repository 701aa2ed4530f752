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
use common::protocol::facts::{Asked, Side, TaskFact};
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
        self.count_sent(&answer);
        Ok((answer, self.deliveries(&slots)))
    }

    fn count_request(&mut self, message: &GmToLm) {
        let c = &mut self.counters;
        c.received.add(message.kind());
        message.for_each_task(|_, asked| match asked {
            Asked::Launch => c.requests += 1,
            Asked::Preempt | Asked::GangReserve => {}
        });
        let gm = message.gm();
        for note in message.notes(Side::Receiver) {
            service_kit::log_note!(&note, %gm);
        }
    }

    /// Counters and log lines of a message this LM sends to a GM: an answer, or one
    /// of its own on the GM's stream (requeues, ends, starts, a held preemption
    /// request's final answer).
    pub(super) fn count_sent(&mut self, message: &LmToGm) {
        let c = &mut self.counters;
        let gm = message.to();
        message.for_each_task(|task, fact| match fact {
            TaskFact::Launched { repartition } => {
                c.launched += 1;
                if repartition {
                    c.repartitions += 1;
                }
            }
            TaskFact::Rejected(reason) => {
                c.rejections += 1;
                tracing::debug!(task = %task, job = task.job.0, %gm, %reason, "launch refused");
            }
            TaskFact::PreemptedToLaunch { node, victims } => {
                c.preemptions += 1;
                tracing::info!(task = %task, job = task.job.0, %gm, %node, victims, "preempted to launch a task");
            }
            TaskFact::PreemptRefused(why) => {
                *c.preempt_refused.entry(why.label()).or_default() += 1;
                tracing::info!(task = %task, job = task.job.0, %gm, reason = why.label(), "preemption refused");
            }
            TaskFact::PreemptHeld { until } => {
                tracing::info!(task = %task, job = task.job.0, %gm, until_us = until.0, "preemption held for room that frees by itself");
            }
            TaskFact::Requeued { lost, .. } => {
                c.requeued += 1;
                c.wasted += lost;
                tracing::info!(task = %task, job = task.job.0, %gm, lost_ms = lost.0 / 1000, "handing a preempted task back to its GM");
            }
            TaskFact::Cancelled => c.tasks_cancelled += 1,
            TaskFact::NotYours => c.cancel_not_yours += 1,
            TaskFact::Ended(_) => c.ends_reported += 1,
            TaskFact::Started => c.starts_reported += 1,
        });
        for note in message.notes(Side::Sender) {
            service_kit::log_note!(&note, %gm);
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
