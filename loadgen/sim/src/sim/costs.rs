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
use common::{Micros, TaskId};
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
    /// GM: extra cost of a decision that dispatches its task (`loadgen calibrate`:
    /// the GM actor's per-task cost in an embedded run beyond the core's decision:
    /// the task's event, its request in a batch). Zero by default.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gm_dispatch_ns: u64,
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
    /// Worker: the distribution of the start cost, when measured (`loadgen calibrate`:
    /// an embedded run's launch to start less one mailbox hop), as quantiles evenly
    /// spaced from the least to the largest (`n` values: p0, p100/(n-1), ..., p100).
    /// Each start draws from it, seeded per task and run (see
    /// [`CostModel::worker_start`]); when present it replaces `worker_start_ns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_start_quantiles_ns: Vec<u64>,
    /// Client -> GM: from a job's arrival to its tasks reaching their GM (the
    /// submission's path; `loadgen calibrate`: an embedded run's arrival to dispatch,
    /// loadgen's message to the GM actor and its wake-up). Zero by default: the trace's
    /// arrival is the GM's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub submit_ns: u64,
    /// One-way delay of the messages between an LM and its workers (start orders,
    /// kills, reports), when it differs from the network delay (`loadgen calibrate`:
    /// the LM -> worker path is inside the measured start distribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_link_ns: Option<u64>,
    /// Sparrow scheduler: cost per probe sent and per task handed out.
    pub sparrow_probe_ns: u64,
    /// One-way delay of a message between two roles, overriding
    /// `--network-delay-ms` when present (calibrate: one in-memory hop of the
    /// embedded mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_delay_ns: Option<u64>,
    /// LM: the cost of each send when it sends one message to every GM (its state,
    /// and what goes to all of them), one GM after the other: GM `g` receives it
    /// `g` sends after GM 0, so GM 0 hears first, as in the embedded mode's fan-out
    /// (`loadgen calibrate`: one mailbox hop; see [`CostModel::fanout`]). Zero: every GM at once (the default;
    /// schedules as before). Races between GMs for a freed node turn on it: without
    /// it the 8-node check flipped between two schedules as the other costs moved
    /// (docs/simulator-performance.md).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lm_fanout_ns: u64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            gm_decision_ns: 2_000,
            gm_word_ns: 5,
            gm_dispatch_ns: 0,
            gm_snapshot_node_ns: 10,
            lm_batch_ns: 10_000,
            lm_request_ns: 3_000,
            lm_snapshot_node_ns: 5,
            lm_report_ns: 1_000,
            worker_start_ns: 0,
            worker_start_quantiles_ns: Vec::new(),
            submit_ns: 0,
            worker_link_ns: None,
            sparrow_probe_ns: 1_000,
            network_delay_ns: None,
            lm_fanout_ns: 0,
        }
    }
}

impl CostModel {
    /// The zero model: every event is free.
    pub fn zero() -> Self {
        CostModel {
            gm_decision_ns: 0,
            gm_word_ns: 0,
            gm_dispatch_ns: 0,
            gm_snapshot_node_ns: 0,
            lm_batch_ns: 0,
            lm_request_ns: 0,
            lm_snapshot_node_ns: 0,
            lm_report_ns: 0,
            worker_start_ns: 0,
            worker_start_quantiles_ns: Vec::new(),
            submit_ns: 0,
            worker_link_ns: None,
            sparrow_probe_ns: 0,
            network_delay_ns: None,
            lm_fanout_ns: 0,
        }
    }

    /// Rounds a cost in nanoseconds up to whole microseconds (the simulator's tick).
    pub fn micros(ns: u64) -> Micros {
        Micros(ns.div_ceil(1000))
    }

    /// How much later than GM 0 GM `g` receives an LM's message to every GM: `g`
    /// sends of `lm_fanout_ns` each, a send rounded up to a whole microsecond (the
    /// simulator's tick) so that GM `g + 1` always hears after GM `g`.
    pub fn fanout(&self, g: usize) -> Micros {
        Micros((g as u64).saturating_mul(Self::micros(self.lm_fanout_ns).0))
    }

    /// Charges `units` at `ns` nanoseconds each, rounded up to whole microseconds.
    pub fn per_unit(units: u64, ns: u64) -> Micros {
        Self::micros(units.saturating_mul(ns))
    }

    /// One GM decision that scanned `words` bit-vector words (and dispatched
    /// nothing).
    pub fn gm_decision(&self, words: u64) -> Micros {
        self.gm_decision_of(words, false)
    }

    /// One GM decision that scanned `words` words and, if `dispatched`, sent its
    /// task to an LM (`gm_dispatch_ns` more).
    pub fn gm_decision_of(&self, words: u64, dispatched: bool) -> Micros {
        let extra = if dispatched { self.gm_dispatch_ns } else { 0 };
        Self::micros(
            self.gm_decision_ns
                .saturating_add(words.saturating_mul(self.gm_word_ns))
                .saturating_add(extra),
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

    /// The cost of starting run `attempt` of `task`, drawn for `seed`: the
    /// measured distribution (`worker_start_quantiles_ns`, linear between quantiles)
    /// when there is one, else `worker_start_ns`. The draw depends only on the seed,
    /// the task and the run, not on the order of events, and uses no generator state,
    /// so a model without quantiles leaves every schedule as it was.
    pub fn worker_start(&self, seed: u64, task: TaskId, attempt: u32) -> Micros {
        let q = &self.worker_start_quantiles_ns;
        if q.len() < 2 {
            return Self::micros(q.first().copied().unwrap_or(self.worker_start_ns));
        }
        let mut h = mix(seed ^ 0x5741_524b_5354_5254); // "WARKSTRT": the stream.
        h = mix(h ^ task.job.0);
        h = mix(h ^ (u64::from(task.index) << 32 | u64::from(attempt)));
        // 53 bits: a uniform draw in [0, 1).
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let x = u * (q.len() - 1) as f64;
        let i = (x as usize).min(q.len() - 2);
        let (lo, hi) = (q[i] as f64, q[i + 1] as f64);
        Self::micros((lo + (hi - lo) * (x - i as f64)).round() as u64)
    }

    /// Reads a cost file (TOML, the fields of [`CostModel`]).
    pub fn load(path: &Path) -> Result<CostModel> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read cost model {}", path.display()))?;
        let model: CostModel = toml::from_str(&text).with_context(|| {
            format!(
                "cost model {}: expected TOML with the fields gm_decision_ns, gm_word_ns, \
                 gm_snapshot_node_ns, lm_batch_ns, lm_request_ns, lm_snapshot_node_ns, \
                 lm_report_ns, sparrow_probe_ns (integers, nanoseconds), and optionally \
                 gm_dispatch_ns, worker_start_ns, worker_start_quantiles_ns (a list), submit_ns, \
                 worker_link_ns, network_delay_ns and lm_fanout_ns",
                path.display()
            )
        })?;
        if model
            .worker_start_quantiles_ns
            .windows(2)
            .any(|w| w[0] > w[1])
        {
            anyhow::bail!(
                "cost model {}: worker_start_quantiles_ns must not decrease (quantiles \
                 from the least to the largest)",
                path.display()
            );
        }
        Ok(model)
    }
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::CostModel;
    use common::{JobId, Micros, TaskId};

    fn task(job: u64, index: u32) -> TaskId {
        TaskId {
            job: JobId(job),
            index,
        }
    }

    #[test]
    fn gm_g_hears_an_lms_fan_out_g_sends_after_gm_0() {
        let none = CostModel::default();
        assert_eq!((none.fanout(0), none.fanout(3)), (Micros(0), Micros(0)));
        let sub_microsecond = CostModel {
            lm_fanout_ns: 230,
            ..CostModel::default()
        };
        let at: Vec<u64> = (0..3).map(|g| sub_microsecond.fanout(g).0).collect();
        assert_eq!(at, vec![0, 1, 2], "a send takes at least a tick");
        let slow = CostModel {
            lm_fanout_ns: 1_500,
            ..CostModel::default()
        };
        assert_eq!(slow.fanout(2), Micros(4));
    }

    #[test]
    fn without_quantiles_a_start_costs_worker_start_ns() {
        let model = CostModel {
            worker_start_ns: 2_500,
            ..CostModel::zero()
        };
        assert_eq!(model.worker_start(7, task(1, 0), 1), Micros(3));
        assert_eq!(
            CostModel::default().worker_start(7, task(1, 0), 1),
            Micros(0)
        );
    }

    #[test]
    fn starts_draw_from_the_quantiles_deterministically() {
        let model = CostModel {
            worker_start_ns: 1_000_000_000,
            // 1 ms to 3 ms, median 2 ms: uniform between each pair.
            worker_start_quantiles_ns: vec![1_000_000, 2_000_000, 3_000_000],
            ..CostModel::zero()
        };
        let draws: Vec<u64> = (0..2_000)
            .map(|k| model.worker_start(42, task(k / 4, (k % 4) as u32), 1).0)
            .collect();
        assert!(draws.iter().all(|&d| (1_000..=3_000).contains(&d)));
        let below = draws.iter().filter(|&&d| d < 2_000).count();
        assert!(
            (900..1_100).contains(&below),
            "{below} of 2000 below the median"
        );
        // Same seed, task and run: same draw; another seed or run: another stream.
        let again: Vec<u64> = (0..2_000)
            .map(|k| model.worker_start(42, task(k / 4, (k % 4) as u32), 1).0)
            .collect();
        assert_eq!(draws, again);
        let other: Vec<u64> = (0..2_000)
            .map(|k| model.worker_start(43, task(k / 4, (k % 4) as u32), 1).0)
            .collect();
        assert_ne!(draws, other);
        assert_ne!(
            model.worker_start(42, task(0, 0), 1),
            model.worker_start(42, task(0, 0), 2)
        );
    }

    #[test]
    fn a_cost_file_with_decreasing_quantiles_is_refused_naming_the_field() {
        let dir = std::env::temp_dir().join(format!("costs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("costs.toml");
        let mut text = toml::to_string(&CostModel::default()).unwrap();
        text.push_str("worker_start_quantiles_ns = [5, 3]\n");
        std::fs::write(&path, &text).unwrap();
        let err = CostModel::load(&path).unwrap_err().to_string();
        assert!(err.contains("worker_start_quantiles_ns"), "{err}");
        std::fs::write(&path, text.replace("[5, 3]", "[3, 5]")).unwrap();
        let model = CostModel::load(&path).unwrap();
        assert_eq!(model.worker_start_quantiles_ns, vec![3, 5]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
