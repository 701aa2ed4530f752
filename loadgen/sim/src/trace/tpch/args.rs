//! The `--tpch-*` flags of `simulate` and `trace ...`, turned into a [`TpchConfig`].

use super::config::{Arrivals, TpchConfig, DEFAULT_JOBS, DEFAULT_MEAN_GAP_S, DEFAULT_WAVE_WIDTH};
use crate::trace::options::OptionError;
use common::Micros;

/// How to draw a workload from the TPC-H DAGs (with `--format tpch`).
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct TpchArgs {
    /// TPC-H: jobs to draw [default: 250].
    #[arg(long, value_name = "N")]
    pub tpch_jobs: Option<u64>,
    /// TPC-H: input sizes to draw from, comma-separated (e.g. 2g,5g) [default: all].
    #[arg(long, value_delimiter = ',', value_name = "SIZE,...")]
    pub tpch_sizes: Vec<String>,
    /// TPC-H: query numbers to draw from, comma-separated (e.g. 1,3,19) [default: all].
    #[arg(long, value_delimiter = ',', value_name = "Q,...")]
    pub tpch_queries: Vec<u32>,
    /// TPC-H: mean gap between job arrivals (Poisson) [default: 20, Carbyne's].
    #[arg(long, value_name = "SECS", conflicts_with = "tpch_load")]
    pub tpch_interarrival_s: Option<f64>,
    /// TPC-H: instead of a mean gap, the offered CPU load as a multiple of
    /// --tpch-cluster-cores (1 = the jobs' expected core-seconds arrive as fast as
    /// the cluster's cores can serve them).
    #[arg(long, value_name = "FACTOR", requires = "tpch_cluster_cores")]
    pub tpch_load: Option<f64>,
    /// TPC-H: the cores --tpch-load is measured against (e.g. 2000 for 100 nodes of 20).
    #[arg(long, value_name = "N", requires = "tpch_load")]
    pub tpch_cluster_cores: Option<u64>,
    /// TPC-H: tasks per stage in the first wave (the rest draw later-wave durations)
    /// [default: 40].
    #[arg(long, value_name = "N")]
    pub tpch_wave_width: Option<u32>,
    /// TPC-H: seed of every draw [default: the command's --seed, or the clock].
    #[arg(long, value_name = "SEED")]
    pub tpch_seed: Option<u64>,
}

impl TpchArgs {
    /// Whether any `--tpch-*` flag was given (they need `--format tpch`).
    pub fn any_given(&self) -> bool {
        *self != TpchArgs::default()
    }

    /// The configuration; `default_seed` is used without --tpch-seed.
    pub fn into_config(self, default_seed: u64) -> Result<TpchConfig, OptionError> {
        let jobs = self.tpch_jobs.unwrap_or(DEFAULT_JOBS);
        if jobs == 0 {
            return Err(OptionError::new("tpch-jobs", "must be at least 1"));
        }
        let wave_width = self.tpch_wave_width.unwrap_or(DEFAULT_WAVE_WIDTH);
        if wave_width == 0 {
            return Err(OptionError::new("tpch-wave-width", "must be at least 1"));
        }
        if self.tpch_sizes.iter().any(|s| s.trim().is_empty()) {
            return Err(OptionError::new("tpch-sizes", "an empty size"));
        }
        let arrivals = match (
            self.tpch_interarrival_s,
            self.tpch_load,
            self.tpch_cluster_cores,
        ) {
            (Some(_), Some(_), _) => {
                return Err(OptionError::new(
                    "tpch-load",
                    "give either --tpch-load or --tpch-interarrival-s",
                ))
            }
            (_, Some(factor), Some(cluster_cores)) => {
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(OptionError::new("tpch-load", "must be a finite number > 0"));
                }
                if cluster_cores == 0 {
                    return Err(OptionError::new("tpch-cluster-cores", "must be at least 1"));
                }
                Arrivals::Load {
                    factor,
                    cluster_cores,
                }
            }
            (_, Some(_), None) | (_, None, Some(_)) => {
                return Err(OptionError::new(
                    "tpch-load",
                    "--tpch-load and --tpch-cluster-cores go together",
                ))
            }
            (gap, None, None) => {
                let secs = gap.unwrap_or(DEFAULT_MEAN_GAP_S as f64);
                if !(secs.is_finite() && secs > 0.0) {
                    return Err(OptionError::new(
                        "tpch-interarrival-s",
                        "must be a finite number of seconds > 0",
                    ));
                }
                Arrivals::MeanGap(Micros::from_secs_f64(secs))
            }
        };
        Ok(TpchConfig {
            jobs,
            sizes: self
                .tpch_sizes
                .into_iter()
                .map(|s| s.trim().to_owned())
                .collect(),
            queries: self.tpch_queries,
            arrivals,
            wave_width,
            seed: self.tpch_seed.unwrap_or(default_seed),
        })
    }
}
