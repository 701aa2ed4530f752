//! Fairness in the LM service: `POST /v1/preempt` from a GM. The core verifies the
//! victim is over its share in the LM's own state, picks the tasks to preempt and
//! launches the waiting task in their room; the actor sends the kills to the workers
//! and, once each kill is confirmed, the preempted task back to its GM.

use super::actor::LmActor;
use actix::prelude::*;
use common::messages::{PreemptOutcome, PreemptRequest, PreemptResponse};
use common::protocol::GmToLm;
use lm_core::LmInput;
use service_kit::clock;
use service_kit::metrics::{family, single};

/// A GM's preemption request; answered with the outcome and the LM's state.
#[derive(Message, Debug)]
#[rtype(result = "Result<PreemptResponse, String>")]
pub struct Preempt(pub PreemptRequest);

impl Handler<Preempt> for LmActor {
    type Result = Result<PreemptResponse, String>;

    fn handle(&mut self, msg: Preempt, ctx: &mut Context<Self>) -> Self::Result {
        self.counters.preempt_requests += 1;
        let (task, gm, victim) = (msg.0.task.id, msg.0.gm, msg.0.victim);
        let out = self
            .core
            .step(clock::now(), LmInput::Gm(GmToLm::Preempt(msg.0)))
            .map_err(|e| e.to_string())?;
        let answer = out.preempt_answer();
        match answer.map(|r| &r.outcome) {
            Some(PreemptOutcome::Launched { node, preempted }) => {
                self.counters.preemptions += 1;
                tracing::info!(task = %task, job = task.job.0, %gm, %victim, %node, victims = preempted.len(), "preempted to launch a task");
            }
            Some(PreemptOutcome::Refused(why)) => {
                *self
                    .counters
                    .preempt_refused
                    .entry(why.label())
                    .or_default() += 1;
                tracing::info!(task = %task, job = task.job.0, %gm, %victim, reason = why.label(), "preemption refused");
            }
            None => {}
        }
        self.apply(out, ctx)
            .1
            .ok_or_else(|| "the core produced no preemption answer".to_owned())
    }
}

impl LmActor {
    /// Preemption metrics, appended to `/metrics`.
    pub(super) fn render_preempt_metrics(&self, out: &mut String) {
        let c = &self.counters;
        single(
            out,
            "megha_lm_preempt_requests_total",
            "counter",
            "Preemption requests from GMs.",
            c.preempt_requests as f64,
        );
        single(
            out,
            "megha_lm_preemptions_total",
            "counter",
            "Preemptions carried out (victims killed, the waiting task launched).",
            c.preemptions as f64,
        );
        let refused: Vec<(String, f64)> = c
            .preempt_refused
            .iter()
            .map(|(reason, n)| (format!("reason=\"{reason}\""), *n as f64))
            .collect();
        family(
            out,
            "megha_lm_preempt_refused_total",
            "counter",
            "Preemption requests refused after verification, by reason.",
            &refused,
        );
        single(
            out,
            "megha_lm_kills_sent_total",
            "counter",
            "Kill orders sent to workers.",
            c.kills_sent as f64,
        );
        single(
            out,
            "megha_lm_preempted_requeued_total",
            "counter",
            "Killed tasks handed back to their GM to run again.",
            c.requeued as f64,
        );
        single(
            out,
            "megha_lm_wasted_task_seconds_total",
            "counter",
            "Work lost by killed tasks (time they had run).",
            c.wasted.as_secs_f64(),
        );
    }
}
