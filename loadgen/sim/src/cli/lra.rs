//! `loadgen lra experiment` and `loadgen lra bench`: the MEDEA 7.4 / 7.5 evaluation
//! of the four LRA placers (ILP, NC, TP, J-KUBE) on HBase-like workloads.
//!
//! The placers read no clock; latency is measured here around each `solve` call.

use crate::lra_workload::{cluster, hbase, hbase_paired, lras_for_utilisation, manager};
use anyhow::{anyhow, Context};
use common::NodeId;
use lra_placer::{
    quality_of, ClusterState, ConstraintManager, IlpConfig, LraId, LraOutcome, LraRequest, Placer,
    Problem, FRAGMENT_THRESHOLD,
};
use std::collections::BTreeSet;
use std::time::Instant;

#[derive(clap::Subcommand, Debug)]
pub enum LraCommand {
    /// Quality (violations, fragmentation, memory CV) at 10..90 % utilisation on one
    /// cluster, then placement latency across cluster sizes.
    Experiment {
        #[arg(long, default_value_t = 500)]
        nodes: u32,
        #[arg(long, default_value_t = 10)]
        racks: u32,
        /// Memory utilisation levels (%) at which quality is reported.
        #[arg(long, value_delimiter = ',', default_value = "10,30,50,70,90")]
        utilisation: Vec<u32>,
        /// Cluster sizes for the latency part (50 nodes per rack).
        #[arg(long, value_delimiter = ',', default_value = "50,500,2000,5000")]
        latency_nodes: Vec<u32>,
        /// LRAs placed (and timed) per size in the latency part.
        #[arg(long, default_value_t = 20)]
        latency_lras: usize,
        /// Also write the quality table to DIR/lra_quality.csv (for `loadgen report`).
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Latency per LRA and violation % at 500, 2,000 and 5,000 nodes, as a table.
    Bench {
        #[arg(long, value_delimiter = ',', default_value = "500,2000,5000")]
        nodes: Vec<u32>,
        /// LRAs placed and timed per size and placer.
        #[arg(long, default_value_t = 40)]
        lras: usize,
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Placers to compare: ilp, nc, tp, j-kube.
    #[arg(long, value_delimiter = ',', default_value = "ilp,nc,tp,j-kube")]
    placers: Vec<String>,
    /// LRAs per scheduling interval.
    #[arg(long, default_value_t = 2)]
    interval: usize,
    /// ILP solver time cap per interval.
    #[arg(long, default_value_t = 200)]
    time_limit_ms: u64,
    /// ILP candidate nodes beyond those the heuristics used.
    #[arg(long, default_value_t = 48)]
    max_candidates: usize,
    /// Mean background (task-based) memory load per node, 0..0.5.
    #[arg(long, default_value_t = 0.0)]
    background: f64,
    /// Memory utilisation (%) reached before timing, in the latency runs.
    #[arg(long, default_value_t = 20)]
    prefill: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Workers must sit in pairs on a node (cardinality [1, 1] instead of [0, 1]).
    #[arg(long)]
    paired: bool,
}

impl CommonArgs {
    fn placers(&self) -> anyhow::Result<Vec<Placer>> {
        if self.interval == 0 {
            return Err(anyhow!("--interval: must be at least 1"));
        }
        if !(0.0..=0.5).contains(&self.background) {
            return Err(anyhow!(
                "--background: {} is outside 0..0.5",
                self.background
            ));
        }
        self.placers
            .iter()
            .map(|name| match Placer::parse(name) {
                Some(Placer::Ilp(_)) => Ok(Placer::Ilp(IlpConfig {
                    time_limit_ms: self.time_limit_ms,
                    max_candidate_nodes: self.max_candidates,
                    ..IlpConfig::default()
                })),
                Some(p) => Ok(p),
                None => Err(anyhow!(
                    "--placers: unknown placer `{name}` (ilp, nc, tp, j-kube)"
                )),
            })
            .collect()
    }
}

pub fn run(cmd: LraCommand) -> anyhow::Result<()> {
    match cmd {
        LraCommand::Experiment {
            nodes,
            racks,
            utilisation,
            latency_nodes,
            latency_lras,
            out,
            common,
        } => {
            let placers = common.placers()?;
            println!("seed {}", common.seed);
            let rows = quality_table(nodes, racks, &utilisation, &placers, &common)?;
            if let Some(dir) = out {
                write_quality_csv(&dir, &rows)?;
            }
            latency_table(&latency_nodes, latency_lras, &placers, &common)
        }
        LraCommand::Bench {
            nodes,
            lras,
            common,
        } => {
            let placers = common.placers()?;
            println!("seed {}", common.seed);
            latency_table(&nodes, lras, &placers, &common)
        }
    }
}

/// Running state of one placer over a sequence of intervals.
struct Run {
    cluster: ClusterState,
    manager: ConstraintManager,
    next_id: u64,
    placed: BTreeSet<LraId>,
    submitted: usize,
    micros: Vec<f64>,
    fallbacks: usize,
    intervals: usize,
    paired: bool,
}

impl Run {
    fn new(cluster: ClusterState, paired: bool) -> anyhow::Result<Self> {
        let manager = manager(&cluster).context("operator constraints")?;
        Ok(Run {
            cluster,
            manager,
            next_id: 0,
            placed: BTreeSet::new(),
            submitted: 0,
            micros: Vec::new(),
            fallbacks: 0,
            intervals: 0,
            paired,
        })
    }

    /// Submits `count` new LRAs, `interval` at a time; records latency per LRA.
    fn submit(
        &mut self,
        placer: &Placer,
        count: usize,
        interval: usize,
        timed: bool,
    ) -> anyhow::Result<()> {
        let mut left = count;
        while left > 0 {
            let n = left.min(interval);
            left -= n;
            let batch: Vec<LraRequest> = (0..n)
                .map(|k| {
                    let id = LraId(self.next_id + k as u64);
                    if self.paired {
                        hbase_paired(id)
                    } else {
                        hbase(id)
                    }
                })
                .collect();
            self.next_id += n as u64;
            self.submitted += n;
            let problem = Problem::new(&self.cluster, &batch, &self.manager)?;
            let start = Instant::now();
            let solution = placer.solve(&problem);
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            solution
                .check(&problem)
                .map_err(|e| anyhow!("{} broke capacity: {e}", placer.name()))?;
            if timed {
                self.micros
                    .extend(std::iter::repeat_n(elapsed / n as f64, n));
                self.fallbacks += usize::from(solution.fallback.is_some());
                self.intervals += 1;
            }
            for ((id, outcome), lra) in solution.outcomes.iter().zip(&batch) {
                if let LraOutcome::Placed(nodes) = outcome {
                    for (j, node) in nodes.iter().enumerate() {
                        lra.deploy(&mut self.cluster, j, NodeId(node.0))?;
                    }
                    self.manager.add_application(
                        *id,
                        lra.constraints.clone(),
                        self.cluster.groups(),
                    )?;
                    if timed {
                        self.placed.insert(*id);
                    }
                }
            }
        }
        Ok(())
    }

    fn violation_pct(&self, only_timed: bool) -> anyhow::Result<f64> {
        let constraints = self.manager.effective_for(&[], self.cluster.groups())?;
        let q = quality_of(&self.cluster, &constraints, &FRAGMENT_THRESHOLD, |lra| {
            lra.is_some_and(|l| !only_timed || self.placed.contains(&l))
        });
        Ok(q.violation_pct)
    }
}

/// The header of `lra_quality.csv` (one row per placer and utilisation level).
pub const QUALITY_CSV_HEADER: &str =
    "placer,utilisation_pct,lras,placed,violation_pct,fragmentation_pct,memory_cv,ms_per_lra";

fn write_quality_csv(dir: &std::path::Path, rows: &[String]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("lra_quality.csv");
    let mut text = format!("{QUALITY_CSV_HEADER}\n");
    for r in rows {
        text.push_str(r);
        text.push('\n');
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("written to {}", path.display());
    Ok(())
}

/// Prints the quality table and returns its rows as `lra_quality.csv` lines.
fn quality_table(
    nodes: u32,
    racks: u32,
    levels: &[u32],
    placers: &[Placer],
    common: &CommonArgs,
) -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    println!(
        "\n# quality: {nodes} nodes, {racks} racks, {} LRAs per interval",
        common.interval
    );
    println!(
        "{:<8} {:>6} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8} {:>18}",
        "placer",
        "util%",
        "lras",
        "placed",
        "violate%",
        "frag%",
        "mem-cv",
        "ms/lra",
        "fallback/intervals"
    );
    let mut levels = levels.to_vec();
    levels.sort_unstable();
    for placer in placers {
        let mut run = Run::new(
            cluster(nodes, racks, common.background, common.seed),
            common.paired,
        )?;
        for &level in &levels {
            let more = lras_for_utilisation(&run.cluster, f64::from(level) / 100.0);
            // LRAs that did not fit still count as submitted: stop when nothing fits.
            run.submit(placer, more, common.interval, true)?;
            let constraints = run.manager.effective_for(&[], run.cluster.groups())?;
            let q = quality_of(&run.cluster, &constraints, &FRAGMENT_THRESHOLD, |l| {
                l.is_some()
            });
            let mean = run.micros.iter().sum::<f64>() / run.micros.len().max(1) as f64 / 1000.0;
            println!(
                "{:<8} {:>6} {:>7} {:>7} {:>10.2} {:>8.2} {:>8.3} {:>8.2} {:>18}",
                placer.name(),
                level,
                run.submitted,
                run.placed.len(),
                q.violation_pct,
                q.fragmentation_pct,
                q.memory_utilisation_cv,
                mean,
                format!("{}/{}", run.fallbacks, run.intervals)
            );
            rows.push(format!(
                "{},{level},{},{},{:.4},{:.4},{:.4},{:.4}",
                placer.name(),
                run.submitted,
                run.placed.len(),
                q.violation_pct,
                q.fragmentation_pct,
                q.memory_utilisation_cv,
                mean
            ));
        }
    }
    Ok(rows)
}

fn latency_table(
    sizes: &[u32],
    lras: usize,
    placers: &[Placer],
    common: &CommonArgs,
) -> anyhow::Result<()> {
    println!(
        "\n# latency: {lras} LRAs timed per run after a {}% prefill (by tp), 50 nodes per rack, {} LRAs per interval",
        common.prefill, common.interval
    );
    println!(
        "{:<8} {:>6} {:>10} {:>10} {:>10} {:>10} {:>18}",
        "placer", "nodes", "mean-ms", "p50-ms", "p95-ms", "violate%", "fallback/intervals"
    );
    for &size in sizes {
        let mut base = Run::new(
            cluster(size, (size / 50).max(1), common.background, common.seed),
            common.paired,
        )?;
        let prefill = lras_for_utilisation(&base.cluster, f64::from(common.prefill) / 100.0);
        base.submit(
            &Placer::TagPopularity,
            prefill,
            common.interval.max(8),
            false,
        )?;
        for placer in placers {
            let mut run = Run {
                cluster: base.cluster.clone(),
                manager: base.manager.clone(),
                next_id: base.next_id,
                placed: BTreeSet::new(),
                submitted: 0,
                micros: Vec::new(),
                fallbacks: 0,
                intervals: 0,
                paired: common.paired,
            };
            run.submit(placer, lras, common.interval, true)?;
            let mut sorted = run.micros.clone();
            sorted.sort_by(f64::total_cmp);
            let pick = |q: f64| {
                sorted
                    .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
                    .copied()
                    .unwrap_or(0.0)
                    / 1000.0
            };
            let mean = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64 / 1000.0;
            println!(
                "{:<8} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10}",
                placer.name(),
                size,
                mean,
                pick(0.5),
                pick(0.95),
                run.violation_pct(true)?,
                format!("{}/{}", run.fallbacks, run.intervals)
            );
        }
    }
    Ok(())
}
