//! What to draw from the TPC-H DAGs ([`TpchConfig`]). A leaf.

use common::Micros;

/// The rng stream of TPC-H draws (ASCII `tpch`, far from `common::rng::streams`'
/// small numbers, so no other consumer shares its draws).
pub const TPCH_STREAM: u64 = 0x7470_6368;

/// How job arrivals are spaced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps of this mean.
    MeanGap(Micros),
    /// The mean gap at which the offered CPU load is `factor x cluster_cores`: the
    /// mean expected core-seconds of a job of the pool divided by
    /// `factor x cluster_cores`.
    Load { factor: f64, cluster_cores: u64 },
}

/// What to draw. `sizes` and `queries` empty = all of the file's.
#[derive(Clone, Debug, PartialEq)]
pub struct TpchConfig {
    pub jobs: u64,
    pub sizes: Vec<String>,
    pub queries: Vec<u32>,
    pub arrivals: Arrivals,
    pub wave_width: u32,
    pub seed: u64,
}

pub const DEFAULT_JOBS: u64 = 250;
pub const DEFAULT_MEAN_GAP_S: u64 = 20;
pub const DEFAULT_WAVE_WIDTH: u32 = 40;

impl Default for TpchConfig {
    fn default() -> Self {
        TpchConfig {
            jobs: DEFAULT_JOBS,
            sizes: Vec::new(),
            queries: Vec::new(),
            arrivals: Arrivals::MeanGap(Micros::from_secs(DEFAULT_MEAN_GAP_S)),
            wave_width: DEFAULT_WAVE_WIDTH,
            seed: 0,
        }
    }
}
