//! A DAG workload drawn from the TPC-H query DAGs measured on Spark
//! (`data/tpch-dags.json`, converted from the public decima-sim repository): 22
//! queries at 7 input sizes, each a DAG of stages with task counts and measured task
//! durations. `--format tpch` reads the file and yields [`TraceJob`]s whose `stages`
//! are the DAG's and whose tasks carry their `stage`.
//!
//! # What is drawn, and from which distribution
//!
//! One generator, seeded with [`TpchConfig::seed`] on its own stream
//! ([`TPCH_STREAM`]), draws in this order for each job:
//!
//! 1. **Arrival**: job 0 arrives at 0, each next one after an exponential gap (a
//!    Poisson process, as in Carbyne's experiments) whose mean is either given
//!    ([`Arrivals::MeanGap`], default 20 s, the paper's) or derived from a load
//!    factor ([`Arrivals::Load`]: the mean gap at which the jobs' expected
//!    core-seconds per second equal `factor x cluster_cores`).
//! 2. **Which DAG**: uniform over the DAGs the size and query filters keep.
//! 3. **Per stage, in file order, one task shape** for all its tasks (the file has no
//!    demands; Spark runs a stage's tasks in executors of one size): cores from
//!    [`draw::CPU_CORES`] (1, 2, 4 with 0.5, 0.3, 0.2: mostly one-core tasks, mean
//!    1.9 cores), then memory per core from [`draw::GIB_PER_CORE`] (2, 4, 8 GiB,
//!    equally likely: stages below, near and above the 6.4 GiB per core of a
//!    20-core / 128 GiB node, so that some stages are CPU-bound and some
//!    memory-bound and packing has something to do).
//! 4. **Per task, its duration**, sampled uniformly from the stage's measured ones:
//!    the first `wave_width` tasks (default 40) are the first wave, from `fresh_ms`
//!    for a stage without parents (its executors are new to the job) and from
//!    `first_wave_ms` otherwise; the later tasks from `rest_wave_ms`. An empty list
//!    falls back to `first_wave_ms`. With 40, a stage's expected mean duration is
//!    within 1.2% of the file's `mean_ms` for the median stage and the total work of
//!    the 154 DAGs is 0.98 of what `mean_ms` gives (20: 0.89, 50: 1.02, 75: 1.12).
//!
//! Layout: `model` (the DAGs as read), `parse` (the JSON and its validation),
//! `draw` (the distributions), `config` (what to draw), `args` (the `--tpch-*`
//! flags); here the [`TpchSource`].

mod args;
mod config;
mod draw;
mod model;
mod parse;

pub use args::TpchArgs;
pub use config::{
    Arrivals, TpchConfig, DEFAULT_JOBS, DEFAULT_MEAN_GAP_S, DEFAULT_WAVE_WIDTH, TPCH_STREAM,
};
pub use draw::{draw_job, expected_core_secs, exponential_gap, pick, CPU_CORES, GIB_PER_CORE};
pub use model::{TpchDag, TpchStage};
pub use parse::{parse_dags, read_dags, MAX_DURATION_MS};

use super::{ReadReport, TraceError, TraceJob};
use common::rng::{seeded, Rng, SeededRng};
use common::Micros;
use std::path::{Path, PathBuf};

/// Jobs drawn from the DAGs of a TPC-H file, one at a time.
#[derive(Debug)]
pub struct TpchSource {
    dags: Vec<TpchDag>,
    /// Indices into `dags` of the DAGs the filters keep.
    pool: Vec<usize>,
    cfg: TpchConfig,
    mean_gap: Micros,
    rng: SeededRng,
    arrival: Micros,
    /// The DAG each job drew (index into `dags`), by job id.
    drawn: Vec<u32>,
    report: ReadReport,
}

impl TpchSource {
    /// Reads and validates the file, then applies the filters.
    pub fn open(path: &Path, cfg: TpchConfig) -> Result<Self, TraceError> {
        TpchSource::new(read_dags(path)?, path, cfg)
    }

    /// A source over DAGs already read; `path` is named in errors.
    pub fn new(dags: Vec<TpchDag>, path: &Path, cfg: TpchConfig) -> Result<Self, TraceError> {
        let selection = |reason: String| TraceError::Selection {
            path: PathBuf::from(path),
            reason,
        };
        for s in &cfg.sizes {
            if !dags.iter().any(|d| &d.scale == s) {
                let mut all: Vec<&str> = dags.iter().map(|d| d.scale.as_str()).collect();
                // By size: 2g before 10g.
                all.sort_unstable_by_key(|s| (leading_number(s), *s));
                all.dedup();
                return Err(selection(format!(
                    "--tpch-sizes: no DAG of size {s} (the file has {})",
                    all.join(", ")
                )));
            }
        }
        for q in &cfg.queries {
            if !dags.iter().any(|d| d.query == *q) {
                return Err(selection(format!("--tpch-queries: no DAG of query {q}")));
            }
        }
        let pool: Vec<usize> = (0..dags.len())
            .filter(|&i| cfg.sizes.is_empty() || cfg.sizes.contains(&dags[i].scale))
            .filter(|&i| cfg.queries.is_empty() || cfg.queries.contains(&dags[i].query))
            .collect();
        if pool.is_empty() {
            return Err(selection(
                "no DAG has both a size of --tpch-sizes and a query of --tpch-queries".into(),
            ));
        }
        let mean_gap = match cfg.arrivals {
            Arrivals::MeanGap(gap) => gap,
            Arrivals::Load {
                factor,
                cluster_cores,
            } => {
                let work: f64 = pool
                    .iter()
                    .map(|&i| expected_core_secs(&dags[i], cfg.wave_width))
                    .sum::<f64>()
                    / pool.len() as f64;
                Micros::from_secs_f64(work / (factor * cluster_cores as f64))
            }
        };
        let mut report = ReadReport::default();
        report.mappings.push(format!(
            "tpch: {} jobs drawn from {} of {} DAGs, Poisson arrivals with a mean gap of {:.3} s, first wave {} tasks wide, seed {}",
            cfg.jobs,
            pool.len(),
            dags.len(),
            mean_gap.as_secs_f64(),
            cfg.wave_width,
            cfg.seed
        ));
        Ok(TpchSource {
            rng: seeded(cfg.seed, TPCH_STREAM),
            dags,
            pool,
            mean_gap,
            arrival: Micros::ZERO,
            drawn: Vec::new(),
            cfg,
            report,
        })
    }

    /// Every DAG of the file, filtered or not.
    pub fn dags(&self) -> &[TpchDag] {
        &self.dags
    }

    /// The DAGs jobs are drawn from.
    pub fn pool(&self) -> impl Iterator<Item = &TpchDag> {
        self.pool.iter().map(|&i| &self.dags[i])
    }

    /// The mean gap between arrivals (given, or derived from the load factor).
    pub fn mean_gap(&self) -> Micros {
        self.mean_gap
    }

    /// The name of the DAG job `id` was drawn from, once it has been drawn.
    pub fn dag_of(&self, id: u64) -> Option<&str> {
        let i = *self.drawn.get(usize::try_from(id).ok()?)?;
        Some(&self.dags[i as usize].name)
    }

    pub fn report(&self) -> &ReadReport {
        &self.report
    }
}

/// The number a size starts with (`100` for `100g`), `u64::MAX` for none.
fn leading_number(s: &str) -> u64 {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    s[..digits].parse().unwrap_or(u64::MAX)
}

impl Iterator for TpchSource {
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let id = self.drawn.len() as u64;
        if id >= self.cfg.jobs {
            return None;
        }
        if id > 0 {
            self.arrival += exponential_gap(&mut self.rng, self.mean_gap);
        }
        let pick = self.pool[self.rng.random_range(0..self.pool.len())];
        self.drawn.push(pick as u32);
        let job = draw_job(
            &mut self.rng,
            &self.dags[pick],
            id,
            self.arrival,
            self.cfg.wave_width,
        );
        self.report.records += 1;
        self.report.jobs += 1;
        self.report.tasks += job.tasks.len() as u64;
        Some(Ok(job))
    }
}
