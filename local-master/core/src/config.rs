//! What an LM core is configured with: its heartbeat, and how it treats QUEUEABLE
//! work (cap, estimates, shedding, quotas, promotion). A leaf.

use common::quota::QueueableQuota;
use common::Micros;

#[derive(Clone, Debug)]
pub struct LmConfig {
    /// How often the LM sends its state to every GM (the paper uses 10 s).
    pub heartbeat_period: Micros,
}

impl Default for LmConfig {
    fn default() -> Self {
        LmConfig {
            heartbeat_period: Micros::from_secs(10),
        }
    }
}

/// How an LM treats QUEUEABLE work.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueableConfig {
    /// Share of each node's capacity running QUEUEABLE work may hold (1.0: no cap).
    pub cap: f64,
    /// T_l: the launch overhead added to every node's estimate.
    pub launch_overhead: Micros,
    /// Shed queued work from nodes whose estimate exceeds mean + k·sigma (k here).
    pub shed_sigma: Option<f64>,
    /// Per-job limit on outstanding QUEUEABLE containers; the LM enforces `max` on
    /// its own counts (see `queueable::quota`).
    pub quota: QueueableQuota,
    /// Promote long-running QUEUEABLE containers to GUARANTEED at heartbeats.
    pub promotion: Option<PromotionPolicy>,
}

impl Default for QueueableConfig {
    fn default() -> Self {
        QueueableConfig {
            cap: 1.0,
            launch_overhead: Micros::from_millis(10),
            shed_sigma: None,
            quota: QueueableQuota::UNLIMITED,
            promotion: None,
        }
    }
}

/// When the LM promotes running QUEUEABLE work on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct PromotionPolicy {
    /// Only tasks that have run at least this long.
    pub after: Micros,
    /// At most this many promotions per LM heartbeat.
    pub per_tick: usize,
}
