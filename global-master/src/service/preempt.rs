//! Fairness in the GM service (Megha Algorithm 2): a `Preempting` decision becomes a
//! `POST /v1/preempt` to the LM, whose answer goes back to the core; preempted tasks
//! come back from the LMs (`POST /v1/internal/requeue`) and are queued again.
//!
//! A preemption request whose fate is unknown (timeout, lost answer) is sent again:
//! an LM that already applied it answers `Duplicate`, which the core counts as
//! launched. One the transport gives up on is handled like a refusal, so the task goes
//! back to its queue and is never lost.

use super::actor::GmActor;
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{
    PreemptOutcome, PreemptRefusal, PreemptRequest, PreemptResponse, PreemptedTasks,
};
use common::reasons::PendingReason;
use common::{LmId, Micros, TaskId};
use service_kit::clock;
use service_kit::links::{call_until_settled, Link, LinkError};
use service_kit::metrics::{family, single};
use std::collections::BTreeMap;

pub type PreemptLink = Link<PreemptRequest, PreemptResponse>;

/// Preemption counters of the shell (the core counts attempts and requeues).
#[derive(Debug, Default)]
pub struct PreemptMetrics {
    /// Requests sent to LMs.
    pub requests: u64,
    /// Requests the LM carried out (the task launched in the freed room).
    pub preemptions: u64,
    /// Refusals, by reason (`transport` when the LM could not be reached).
    pub refused: BTreeMap<&'static str, u64>,
    /// Tasks of this GM's queues handed back after a preemption, and the work lost.
    pub requeued: u64,
    pub lost_work: Micros,
}

impl GmActor {
    /// Sends a preemption request to its LM; the answer comes back as [`PreemptDone`].
    pub(super) fn send_preempt(&mut self, request: PreemptRequest, ctx: &mut Context<Self>) {
        let (lm, task) = (request.lm, request.task.id);
        let Some(link) = self.preempt_links.get(lm.index()).cloned() else {
            tracing::error!(%lm, task = %task, "no preemption link to this LM");
            ctx.notify(PreemptDone {
                lm,
                task,
                result: Err(LinkError::Unreachable(format!("{lm} has no link"))),
            });
            return;
        };
        self.preempt.requests += 1;
        tracing::info!(task = %task, job = task.job.0, %lm, victim = %request.victim, "asking the LM to preempt");
        let me = ctx.address();
        let doubt_timeout = self.doubt_timeout;
        tokio::spawn(async move {
            // The LM answers a request it already carried out `duplicate`.
            let what = format!("preemption for {task} to {lm}");
            let result = call_until_settled(&link, &request, doubt_timeout, &what).await;
            me.do_send(PreemptDone { lm, task, result });
        });
    }

    /// Preemption metrics, appended to `/metrics`.
    pub(super) fn render_preempt_metrics(&self, out: &mut String) {
        let s = self.core.stats();
        let p = &self.preempt;
        single(
            out,
            "megha_gm_preempt_attempts_total",
            "counter",
            "Tasks that found no room under contention and asked an LM to preempt.",
            s.preempt_attempts as f64,
        );
        single(
            out,
            "megha_gm_preempt_requests_total",
            "counter",
            "Preemption requests sent to LMs.",
            p.requests as f64,
        );
        single(
            out,
            "megha_gm_preemptions_total",
            "counter",
            "Preemptions the LMs carried out (the waiting task launched).",
            p.preemptions as f64,
        );
        let refused: Vec<(String, f64)> = p
            .refused
            .iter()
            .map(|(reason, n)| (format!("reason=\"{reason}\""), *n as f64))
            .collect();
        family(
            out,
            "megha_gm_preempt_refused_total",
            "counter",
            "Preemptions refused by the LM (or not delivered: transport), by reason.",
            &refused,
        );
        single(
            out,
            "megha_gm_preempted_requeued_total",
            "counter",
            "Tasks of this GM's queues that were preempted and queued again.",
            s.preempted_requeued as f64,
        );
        single(
            out,
            "megha_gm_preempted_lost_work_seconds_total",
            "counter",
            "Work lost by this GM's preempted tasks (time they had run).",
            p.lost_work.as_secs_f64(),
        );
    }
}

/// The answer to one preemption request (or why there is none).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PreemptDone {
    pub lm: LmId,
    pub task: TaskId,
    pub result: Result<PreemptResponse, LinkError>,
}

impl Handler<PreemptDone> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: PreemptDone, ctx: &mut Context<Self>) {
        let now = clock::now();
        let task = msg.task;
        match msg.result {
            Ok(response) => {
                if let Some(slot) = self.metrics.last_snapshot.get_mut(msg.lm.index()) {
                    *slot = Some(response.snapshot.taken_at);
                }
                if let PreemptOutcome::Refused(why) = &response.outcome {
                    let label = why.label();
                    tracing::info!(task = %task, job = task.job.0, lm = %msg.lm, reason = label, "preemption refused; the task waits in its queue");
                    if *why != PreemptRefusal::Duplicate {
                        *self.preempt.refused.entry(label).or_default() += 1;
                    }
                }
                if self.core.handle_preempt_response(now, &response) {
                    self.preempt.preemptions += 1;
                    if let Some(submitted) = self.tracker.launched(task, now) {
                        self.metrics
                            .launch_latency
                            .observe(now.since(submitted).as_secs_f64());
                    }
                }
            }
            Err(error) => {
                tracing::warn!(task = %task, job = task.job.0, lm = %msg.lm, %error, "preemption request failed; the task goes back to its queue");
                *self.preempt.refused.entry("transport").or_default() += 1;
                if self.core.abandon_preempt(now, msg.lm, task) {
                    self.tracker
                        .pending(task, &PendingReason::LmUnreachable { lm: msg.lm }, false);
                }
            }
        }
        self.request_pass(ctx);
    }
}

/// Tasks of this GM's queues that an LM preempted: queued again.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Requeue(pub PreemptedTasks);

impl Handler<Requeue> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: Requeue, ctx: &mut Context<Self>) {
        let now = clock::now();
        let gm = self.core.id();
        let reason = PendingReason::Preempted { lm: msg.0.lm };
        let mut events = Vec::with_capacity(msg.0.tasks.len());
        for (spec, lost) in &msg.0.tasks {
            tracing::info!(task = %spec.id, job = spec.id.job.0, lm = %msg.0.lm, lost_ms = lost.0 / 1000, "preempted task queued again");
            self.preempt.requeued += 1;
            self.preempt.lost_work += *lost;
            self.tracker.pending(spec.id, &reason, false);
            events.push(TaskEvent {
                task: spec.id,
                at: now,
                kind: TaskEventKind::Requeued {
                    gm,
                    reason: reason.clone(),
                },
            });
        }
        self.core.requeue_preempted(now, &msg.0);
        if !events.is_empty() {
            (self.events)(events);
        }
        self.request_pass(ctx);
    }
}
