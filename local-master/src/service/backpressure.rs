//! Backpressure from the broker: while more than `--max-broker-backlog-bytes` of
//! task events wait for the broker (it is away or slow), the LM takes no new work.
//!
//! Every task this LM launches publishes events (started, finished or failed,
//! preempted...) that observers and the designated GM consume from the broker, and
//! the publisher drops none of them: while the broker is away they wait in memory
//! (see [`service_kit::amqp::Publisher`]). So the LM bounds that memory the only way
//! that loses nothing: it stops accepting the requests that create new tasks.
//!
//! - **Refused** (`503`, `Retry-After: 2`, nothing applied): launch batches and
//!   preemption requests (a preemption launches a task and kills others). The GM
//!   reads it as "busy" ([`service_kit::links::LinkError::Busy`]): the tasks go
//!   back to its queues at once and its placement passes this LM by for the
//!   `Retry-After` time, so they run on other LMs meanwhile, without a loop of
//!   refusals. A batch sent again because an earlier copy is in doubt (its answer
//!   was lost) is not settled by a refusal: the GM sends it again after the
//!   `Retry-After` time, until its doubt timeout (`--doubt-timeout-s`).
//! - **Accepted**: cancellations (they stop tasks: fewer events to come, resources
//!   back) and a restarted GM's reconciliation (it settles tasks the GM already
//!   sent; the events it may cause, runs ended lost, are bounded by the tasks it
//!   names, and refusing it would hold the GM's resumption). Worker reports are
//!   never refused (facts about tasks already running; refusing them would not
//!   publish less and would keep GMs from learning of ends).
//!
//! Bound: the backlog stays under the limit, plus the events of the work accepted
//! before it was reached (at most the tasks this LM's nodes hold, each with a few
//! events), plus one batch. State snapshots do not accumulate (the publisher keeps
//! the newest only) and during the outage GMs still get this LM's state from its
//! launch answers, which carry it.
//!
//! Each refusal is counted by kind (`megha_lm_broker_backlog_refusals_total`, which
//! counts resends too) and logged: a warning when refusals start, a debug line each,
//! an info line when the LM accepts work again.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::protocol::facts::Backlog;
use common::protocol::GmToLm;
use service_kit::amqp::Publisher;
use service_kit::clock;
use service_kit::metrics::table::{self, Metric, Read::By, Read::One};
use service_kit::metrics::Page;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Seconds a refused GM is told to wait (`Retry-After`).
pub const RETRY_AFTER_S: u64 = 2;

/// The LM's broker publisher and what its backlog refused.
#[derive(Debug)]
pub struct BrokerBackpressure {
    publisher: Publisher,
    refused_launches: AtomicU64,
    refused_preemptions: AtomicU64,
    /// Refusing now (for the log lines at the edges).
    refusing: AtomicBool,
}

impl BrokerBackpressure {
    pub fn new(publisher: Publisher) -> Self {
        BrokerBackpressure {
            publisher,
            refused_launches: AtomicU64::new(0),
            refused_preemptions: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
        }
    }

    /// The answer to `message` when the broker's backlog refuses it (see the module
    /// documentation); `None`: handle it.
    pub fn refuse(&self, message: &GmToLm) -> Option<Response> {
        let counter = match message.backlog() {
            Backlog::RefusedAsLaunch => &self.refused_launches,
            Backlog::RefusedAsPreemption => &self.refused_preemptions,
            Backlog::Taken => return None,
        };
        let pending = self.publisher.pending_bytes();
        let limit = self.publisher.backlog_limit();
        if !self.publisher.backlogged() {
            if self.refusing.swap(false, Ordering::Relaxed) {
                tracing::info!(
                    pending_bytes = pending,
                    limit_bytes = limit,
                    "the broker took the event backlog: accepting launches again"
                );
            }
            return None;
        }
        counter.fetch_add(1, Ordering::Relaxed);
        if !self.refusing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                pending_bytes = pending,
                limit_bytes = limit,
                broker_connected = self.publisher.status.is_connected(),
                "events waiting for the broker are over --max-broker-backlog-bytes: refusing launch batches and preemptions (503) until it takes them"
            );
        }
        tracing::debug!(gm = %message.gm(), what = message.describe(), pending_bytes = pending, "refused: broker backlog");
        let error = format!(
            "the broker is behind: {pending} bytes of task events wait for it (limit {limit}, --max-broker-backlog-bytes); nothing was applied, send again later"
        );
        Some(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, RETRY_AFTER_S.to_string())],
                Json(serde_json::json!({ "error": error })),
            )
                .into_response(),
        )
    }

    /// The `/metrics` families of the broker publisher and its backpressure
    /// ([`BACKPRESSURE_METRICS`]).
    pub fn render(&self, page: &mut Page) {
        table::render(BACKPRESSURE_METRICS, self, clock::now(), page);
    }
}

/// The families of the broker publisher and its backpressure, in the order they are
/// added to the page.
pub const BACKPRESSURE_METRICS: &[Metric<BrokerBackpressure>] = &[
    Metric {
        name: "megha_lm_broker_backlog_bytes",
        kind: "gauge",
        help: "Bytes published (task events, the newest state) not yet confirmed by the broker.",
        read: One(|b| b.publisher.pending_bytes() as f64),
    },
    Metric {
        name: "megha_lm_broker_backlog_limit_bytes",
        kind: "gauge",
        help: "--max-broker-backlog-bytes: past it, launch batches and preemptions are refused (503).",
        read: One(|b| b.publisher.backlog_limit() as f64),
    },
    Metric {
        name: "megha_lm_broker_backlog_refusals_total",
        kind: "counter",
        help: "GM requests refused (503, Retry-After) while the broker backlog was over its limit, resends included.",
        read: By("request", |b, _| {
            vec![
                ("launch".into(), b.refused_launches.load(Ordering::Relaxed) as f64),
                ("preempt".into(), b.refused_preemptions.load(Ordering::Relaxed) as f64),
            ]
        }),
    },
    Metric {
        name: "megha_lm_snapshots_superseded_total",
        kind: "counter",
        help: "State snapshots replaced by a newer one before the broker took them (only the newest waits while it is away).",
        read: One(|b| b.publisher.status.superseded.load(Ordering::Relaxed) as f64),
    },
    Metric {
        name: "megha_lm_broker_connected",
        kind: "gauge",
        help: "1 while the publisher is connected to the broker.",
        read: One(|b| f64::from(u8::from(b.publisher.status.is_connected()))),
    },
];

#[cfg(test)]
mod tests;
