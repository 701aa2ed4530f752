//! Fairness in the LM service: the preemption counters. A GM's preemption request
//! arrives like every request ([`super::gm`]); the core verifies the victim is over
//! its share in the LM's own state, picks the tasks to preempt and launches the
//! waiting task in their room; the actor sends the kills to the workers and, once
//! each kill is confirmed, the preempted task back to its GM.

use super::LmActor;
use common::protocol::kind;
use common::Micros;
use service_kit::metrics::table::{Metric, Read::By, Read::One};

/// Preemption requests refused after verification, by reason.
fn refused_by_reason(l: &LmActor, _: Micros) -> Vec<(String, f64)> {
    (l.counters.preempt_refused.iter())
        .map(|(reason, n)| (reason.to_string(), *n as f64))
        .collect()
}

/// The preemption families, rendered after [`super::metrics::LM_METRICS`].
pub const PREEMPT_METRICS: &[Metric<LmActor>] = &[
    Metric {
        name: "megha_lm_preempt_requests_total",
        kind: "counter",
        help: "Preemption requests from GMs.",
        read: One(|l| l.counters.received.get(kind::PREEMPT) as f64),
    },
    Metric {
        name: "megha_lm_preemptions_total",
        kind: "counter",
        help: "Preemptions carried out (victims killed, the waiting task launched).",
        read: One(|l| l.counters.preemptions as f64),
    },
    Metric {
        name: "megha_lm_preempt_refused_total",
        kind: "counter",
        help: "Preemption requests refused after verification, by reason.",
        read: By("reason", refused_by_reason),
    },
    Metric {
        name: "megha_lm_kills_sent_total",
        kind: "counter",
        help: "Kill orders sent to workers.",
        read: One(|l| l.counters.kills_sent as f64),
    },
    Metric {
        name: "megha_lm_preempted_requeued_total",
        kind: "counter",
        help: "Killed tasks handed back to their GM to run again.",
        read: One(|l| l.counters.requeued as f64),
    },
    Metric {
        name: "megha_lm_wasted_task_seconds_total",
        kind: "counter",
        help: "Work lost by killed tasks (time they had run).",
        read: One(|l| l.counters.wasted.as_secs_f64()),
    },
];
