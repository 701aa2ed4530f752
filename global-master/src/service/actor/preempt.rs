//! Fairness in the GM service (Megha Algorithm 2): the shell's preemption counters.
//! A `Preempting` decision becomes a `GmToLm::Preempt` request to the LM (sent like
//! every request, see [`crate::service::actor::deliver`]); preempted tasks come back from the LMs
//! (`LmToGm::Requeue`) and are queued again.
//!
//! A preemption request whose fate is unknown (timeout, lost answer) is sent again:
//! an LM that already applied it answers `Duplicate`, which the core counts as
//! launched. One the transport gives up on is handled like a refusal, so the task goes
//! back to its queue and is never lost.

use crate::service::actor::GmActor;
use common::protocol::kind;
use service_kit::metrics::{family, single, Page};

impl GmActor {
    /// Preemption metrics, appended to `/metrics`.
    pub fn render_preempt_metrics(&self, out: &mut Page) {
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
            self.metrics.sent.get(kind::PREEMPT) as f64,
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
            .map(|(reason, n)| (reason.to_string(), *n as f64))
            .collect();
        family(
            out,
            "megha_gm_preempt_refused_total",
            "counter",
            "Preemptions refused by the LM (or not delivered: transport), by reason.",
            "reason",
            &refused,
        );
        let asks = [
            ("still_held", s.held_asks_still_held),
            ("launched", s.held_asks_launched),
            ("not_held", s.held_asks_not_held),
            ("unanswered", s.held_asks_unanswered),
            ("late", s.held_asks_late),
        ];
        let asks: Vec<(String, f64)> = (asks.iter())
            .map(|(outcome, n)| (outcome.to_string(), *n as f64))
            .collect();
        family(
            out,
            "megha_gm_held_expiry_asks_total",
            "counter",
            "Asks to an LM about held preemption requests whose final answer is overdue, by outcome: still_held (asked again a period later), launched (the task runs), not_held (the LM voided the request; the task is queued again), unanswered (no answer within the period; asked again), late (an answer about a request no longer waited for).",
            "outcome",
            &asks,
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
