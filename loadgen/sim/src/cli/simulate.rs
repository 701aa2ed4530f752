//! `loadgen simulate`: replay a trace in the deterministic simulator.
//!
//! Layout: the command, reading the trace and running one scheduler (here); its
//! flags by concern: `cluster` ([`ClusterArgs`]), `model` ([`ModelArgs`], shared
//! with bench), `mercury` ([`MercuryArgs`]); the printed `tables`.

mod cluster;
mod mercury;
mod model;
mod preempt;
mod tables;

pub use cluster::ClusterArgs;
pub use mercury::MercuryArgs;
pub use model::{
    parse_soft_ilp_ms, separate_identical_arrivals, whole_second_durations, LmPublishMode,
    ModelArgs, Preset,
};
pub use preempt::PreemptArgs;
pub use tables::{print_table, print_task_types};

use crate::report::{write_summary, write_tasks_file, Summary};
use crate::sim::task_types;
use crate::sim::workload;
use crate::sim::{self, SchedulerKind, SimConfig};
use crate::trace::options::TraceOptionsArgs;
use crate::trace::tpch::TpchArgs;
use crate::trace::{open_trace, SourceConfig, TraceFormat, TraceJob};
use anyhow::{bail, Context, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::Micros;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Simulate a trace on a cluster and write tasks.csv and summary.json.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The trace to replay (by default in the Sparrow/Megha `.tr` format:
    /// `arrival_s n_tasks mean_s d1 .. dn`, one job per line).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's format.
    #[arg(long, value_enum, default_value = "tr")]
    pub format: TraceFormat,
    #[command(flatten)]
    pub selection: TraceOptionsArgs,
    /// With --format tpch: what to draw (seeded by --seed unless --tpch-seed).
    #[command(flatten)]
    pub tpch: TpchArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Scheduler(s) to run on the same inputs; several (comma-separated) are run one
    /// after the other and written to DIR/<scheduler>/.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "megha")]
    pub scheduler: Vec<SchedulerKind>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub mercury: MercuryArgs,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No progress bar and no table on stdout (summary.json is still written).
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: SimulateArgs) -> Result<()> {
    let seed = args.model.seed;
    eprintln!("seed: {seed}");
    let cluster = args.cluster.load(seed)?;
    let source = SourceConfig {
        tpch: super::trace::tpch_config(args.format, &args.tpch, seed)?,
        ..SourceConfig::default()
    };
    let mut trace = read_trace_from(
        &args.trace,
        args.format,
        args.selection.clone(),
        seed,
        &source,
    )?;
    args.model.adjust_trace(&mut trace);
    if let Some(preset) = args.model.preset {
        eprintln!(
            "preset {preset:?}: constraints {:?}, heartbeat {} s, whole-second durations {}, separated identical arrivals {}",
            args.model.constraint_mode(),
            args.model.heartbeat_secs(),
            args.model.whole_second_durations.unwrap_or(true),
            args.model.separate_identical_arrivals.unwrap_or(true)
        );
    }
    let base_jobs = workload::build(&trace, &args.model.workload()?);
    let dags = base_jobs.iter().filter(|j| j.dag.is_some()).count();
    if dags > 0 && args.scheduler.contains(&SchedulerKind::Sparrow) {
        eprintln!(
            "note: {dags} jobs are DAGs; the sparrow baseline ignores their stages (megha and centralized keep them)"
        );
    }
    let policies = args.mercury.policies()?;
    let mut schedulers = args.scheduler.clone();
    schedulers.dedup();
    let mut summaries = Vec::new();
    for &scheduler in &schedulers {
        for &policy in &policies {
            let mut dir = args.out.clone();
            if schedulers.len() > 1 {
                dir = dir.join(scheduler.name());
            }
            if policies.len() > 1 {
                dir = dir.join(policy.dir_name());
            }
            let mut jobs = base_jobs.clone();
            task_types::assign(&mut jobs, policy, seed);
            let mut config = args.model.sim_config(scheduler, cluster.gms)?;
            args.mercury.apply(&mut config)?;
            let window = Micros::from_secs_f64(args.model.fairness_window_s);
            let mut summary = run_one(&cluster, &jobs, &config, &dir, args.quiet, window)?;
            summary.task_types = policy.to_string();
            // Rewrite the summary with the policy's name.
            let json = serde_json::to_string_pretty(&summary)?;
            std::fs::write(dir.join("summary.json"), json + "\n")?;
            summaries.push(summary);
        }
    }
    if !args.quiet {
        print_table(&summaries);
        if policies.len() > 1 {
            print_task_types(&summaries);
        }
        println!("written to {}", args.out.display());
    }
    Ok(())
}

/// Reads a whole trace with the selection options applied, reporting what the reader
/// dropped or repaired on stderr.
pub fn read_trace(
    path: &Path,
    format: TraceFormat,
    selection: TraceOptionsArgs,
    seed: u64,
) -> Result<Vec<TraceJob>> {
    read_trace_from(path, format, selection, seed, &SourceConfig::default())
}

/// [`read_trace`] with the readers' settings (e.g. the TPC-H draw).
pub fn read_trace_from(
    path: &Path,
    format: TraceFormat,
    selection: TraceOptionsArgs,
    seed: u64,
    source: &SourceConfig,
) -> Result<Vec<TraceJob>> {
    let options = selection.into_options(seed)?;
    let mut source = open_trace(path, format, source).map_err(|e| e.given_by("--trace"))?;
    let jobs = options
        .apply(source.by_ref())?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let report = source.report().to_string();
    if format != TraceFormat::Tr && !report.is_empty() {
        eprint!("{report}");
    }
    if jobs.is_empty() {
        bail!("trace {} selects no jobs", path.display());
    }
    Ok(jobs)
}

/// Runs one scheduler and writes its reports into `dir`.
pub fn run_one(
    cluster: &ClusterSpec,
    jobs: &[workload::Job],
    config: &SimConfig,
    dir: &Path,
    quiet: bool,
    fairness_window: Micros,
) -> Result<Summary> {
    let started = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let name = config.scheduler.name();
    let mut progress = |done: u64, total: u64| {
        if quiet {
            return;
        }
        if bar.is_none() && started.elapsed().as_secs_f64() > 1.0 {
            let b = indicatif::ProgressBar::new(total);
            b.set_message(name);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg:>12} [{elapsed_precise}] {wide_bar} {pos}/{len} tasks done",
            ) {
                b.set_style(style);
            }
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(done);
        }
    };
    let cpu_before = crate::report::cpu_seconds();
    let outcome = sim::run(cluster, jobs, config, &mut progress);
    let cpu = crate::report::cpu_seconds()
        .zip(cpu_before)
        .map_or(0.0, |(after, before)| after - before);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let wall = started.elapsed().as_secs_f64();
    let cannot_write = || format!("cannot write reports to {}", dir.display());
    std::fs::create_dir_all(dir).with_context(cannot_write)?;
    // tasks.csv is written on a second thread while the summary is worked out (its
    // rows were 8% of a YH1_sub run's instructions).
    let summary = std::thread::scope(|s| -> Result<Summary> {
        let write_csv = || write_tasks_file(dir, &outcome);
        let csv = std::thread::Builder::new()
            .name("tasks.csv".into())
            .spawn_scoped(s, write_csv);
        let mut summary = Summary::new(name, config.seed, cluster.node_count(), &outcome, wall);
        summary.wake = config.wake.name().to_owned();
        summary.lm_publish = config.lm_publish.describe();
        summary.cpu_time_s = cpu;
        if let Some(f) = &config.fairness {
            let total = cluster.total_capacity();
            let fair = crate::fairness::report(dir, f, total, &outcome, fairness_window)
                .with_context(|| format!("cannot write {}", dir.join("shares.csv").display()))?;
            summary.fairness = Some(fair);
        }
        let written = match csv {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No second thread to be had: the rows are written here instead.
            Err(_) => write_csv(),
        };
        written.with_context(cannot_write)?;
        Ok(summary)
    })?;
    write_summary(dir, &summary).with_context(cannot_write)?;
    Ok(summary)
}
