//! Fairness in the LM service: the preemption counters. A GM's preemption request
//! arrives like every request ([`super::gm`]); the core verifies the victim is over
//! its share in the LM's own state, picks the tasks to preempt and launches the
//! waiting task in their room; the actor sends the kills to the workers and, once
//! each kill is confirmed, the preempted task back to its GM.

use super::LmActor;
use common::protocol::kind;
use service_kit::metrics::{family, single, Page};

impl LmActor {
    /// Preemption metrics, appended to `/metrics`.
    pub(crate) fn render_preempt_metrics(&self, out: &mut Page) {
        let c = &self.counters;
        single(
            out,
            "megha_lm_preempt_requests_total",
            "counter",
            "Preemption requests from GMs.",
            c.received.get(kind::PREEMPT) as f64,
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
            .map(|(reason, n)| (reason.to_string(), *n as f64))
            .collect();
        family(
            out,
            "megha_lm_preempt_refused_total",
            "counter",
            "Preemption requests refused after verification, by reason.",
            "reason",
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
