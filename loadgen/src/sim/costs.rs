//! The simulator's processing-cost model: what handling an event costs each role, in
//! nanoseconds, and the one-way delay of a message. The defaults keep processing a few
//! percent of allocation time, as Megha's prototype found; `loadgen calibrate`
//! measures the real code paths on this machine and writes a file that
//! `loadgen simulate --cost-model FILE` reads (TOML, the fields below).
//!
//! The simulator's clock counts microseconds: the cost of one event (a decision, a
//! batch, a snapshot, a report, a start) is summed in nanoseconds, then rounded up to
//! whole microseconds.

use anyhow::{Context, Result};
use common::Micros;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Per-event processing costs, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// GM: fixed cost of one placement decision.
    pub gm_decision_ns: u64,
    /// GM: cost per 64-bit word of bit-vectors scanned by a decision.
    pub gm_word_ns: u64,
    /// GM: cost per node when applying an LM snapshot.
    pub gm_snapshot_node_ns: u64,
    /// LM: fixed cost of handling a batch of requests.
    pub lm_batch_ns: u64,
    /// LM: cost of validating one request of a batch.
    pub lm_request_ns: u64,
    /// LM: cost per node when building a snapshot (heartbeat, or piggybacked on an
    /// answer).
    pub lm_snapshot_node_ns: u64,
    /// LM: cost of one worker report.
    pub lm_report_ns: u64,
    /// Worker: cost of starting one task (the order's handling up to the start).
    #[serde(default)]
    pub worker_start_ns: u64,
    /// Sparrow scheduler: cost per probe sent and per task handed out.
    pub sparrow_probe_ns: u64,
    /// One-way delay of a message between two roles, overriding
    /// `--network-delay-ms` when present (calibrate: one in-memory hop of the
    /// embedded mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_delay_ns: Option<u64>,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            gm_decision_ns: 2_000,
            gm_word_ns: 5,
            gm_snapshot_node_ns: 10,
            lm_batch_ns: 10_000,
            lm_request_ns: 3_000,
            lm_snapshot_node_ns: 5,
            lm_report_ns: 1_000,
            worker_start_ns: 0,
            sparrow_probe_ns: 1_000,
            network_delay_ns: None,
        }
    }
}

impl CostModel {
    /// The zero model: every event is free.
    pub fn zero() -> Self {
        CostModel {
            gm_decision_ns: 0,
            gm_word_ns: 0,
            gm_snapshot_node_ns: 0,
            lm_batch_ns: 0,
            lm_request_ns: 0,
            lm_snapshot_node_ns: 0,
            lm_report_ns: 0,
            worker_start_ns: 0,
            sparrow_probe_ns: 0,
            network_delay_ns: None,
        }
    }

    /// Rounds a cost in nanoseconds up to whole microseconds (the simulator's tick).
    pub fn micros(ns: u64) -> Micros {
        Micros(ns.div_ceil(1000))
    }

    /// Charges `units` at `ns` nanoseconds each, rounded up to whole microseconds.
    pub fn per_unit(units: u64, ns: u64) -> Micros {
        Self::micros(units.saturating_mul(ns))
    }

    /// One GM decision that scanned `words` bit-vector words.
    pub fn gm_decision(&self, words: u64) -> Micros {
        Self::micros(
            self.gm_decision_ns
                .saturating_add(words.saturating_mul(self.gm_word_ns)),
        )
    }

    /// One LM batch of `requests` on an LM of `nodes` nodes (its answer carries the
    /// LM's snapshot).
    pub fn lm_batch(&self, requests: u64, nodes: u64) -> Micros {
        Self::micros(
            self.lm_batch_ns
                .saturating_add(requests.saturating_mul(self.lm_request_ns))
                .saturating_add(nodes.saturating_mul(self.lm_snapshot_node_ns)),
        )
    }

    /// Reads a cost file (TOML, the fields of [`CostModel`]).
    pub fn load(path: &Path) -> Result<CostModel> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read cost model {}", path.display()))?;
        toml::from_str(&text).with_context(|| {
            format!(
                "cost model {}: expected TOML with the fields gm_decision_ns, gm_word_ns, \
                 gm_snapshot_node_ns, lm_batch_ns, lm_request_ns, lm_snapshot_node_ns, \
                 lm_report_ns, sparrow_probe_ns (integers, nanoseconds), and optionally \
                 worker_start_ns and network_delay_ns",
                path.display()
            )
        })
    }
}
