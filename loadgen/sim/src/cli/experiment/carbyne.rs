//! `loadgen experiment carbyne`: Carbyne's evaluation (OSDI'16, section 5) scaled to
//! this machine. TPC-H DAG jobs (data/tpch) with Poisson arrivals on a simulated
//! cluster, scheduled in turn by the GM core under each job-ordering policy (drf,
//! tetris, sjf, carbyne) on the same seeded workload; then Carbyne at each
//! P(altruism) of the sweep, and the same at each further load multiple.
//! Writes DIR/summary.json and prints a table.

use super::jobs::{completion_times, metrics, slowed, JobMetrics};
use crate::cli::simulate::{read_trace_from, ClusterArgs, ModelArgs};
use crate::sim::{self, workload, SchedulerKind};
use crate::trace::options::TraceOptionsArgs;
use crate::trace::tpch::TpchArgs;
use crate::trace::{SourceConfig, TraceFormat};
use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use common::Micros;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Instant;

/// The policies compared, in the order of the table.
pub const POLICIES: [&str; 4] = ["drf", "tetris", "sjf", "carbyne"];

#[derive(Args, Debug)]
pub struct CarbyneArgs {
    /// Output directory (created if missing): summary.json, and per load and
    /// policy `x<load>/<policy>/jobs.csv` (each job's completion time; `loadgen
    /// report DIR/x<load>` draws their CDFs).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// TPC-H DAG jobs to draw (the paper's setting is 250; 100 keeps a debug-build
    /// run to a few minutes).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub jobs: u64,
    /// Simulated nodes (one GM, one LM: the paper's single resource manager).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub nodes: usize,
    /// Global Masters sharing the nodes (federation: each orders its own jobs).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub gms: u16,
    #[arg(long, default_value_t = 20, value_name = "CORES")]
    pub node_cpus: u64,
    #[arg(long, default_value_t = 131072, value_name = "MIB")]
    pub node_memory_mb: u64,
    /// Load multiples: x1 is the paper's mean gap of 20 s between arrivals, xN a
    /// gap of 20/N s (on 100 nodes of 20 cores jobs contend from about x8). The
    /// first is the main table; the others are written too.
    #[arg(long, value_delimiter = ',', default_value = "8", value_name = "X,...")]
    pub loads: Vec<f64>,
    /// P(altruism) values of Carbyne's sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,0.5,1",
        value_name = "P,..."
    )]
    pub altruism: Vec<f64>,
    /// Window of Jain's index, seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub window_s: f64,
    /// Least time between two replans triggered by task ends, ms.
    #[arg(long, default_value_t = 500.0, value_name = "MS")]
    pub replan_ms: f64,
    /// The TPC-H DAGs.
    #[arg(
        long,
        default_value = "data/tpch/tpch-dags.json.gz",
        value_name = "FILE"
    )]
    pub trace: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No table on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// The simulate flags this experiment sets, parsed as `simulate` parses them.
#[derive(Parser, Debug)]
struct Flags {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    tpch: TpchArgs,
}

pub fn run(args: CarbyneArgs) -> Result<()> {
    if args.nodes == 0 || args.gms == 0 || args.jobs == 0 {
        bail!("--nodes, --gms and --jobs must be at least 1");
    }
    if !args.nodes.is_multiple_of(usize::from(args.gms)) {
        bail!("--nodes must be a multiple of --gms (one partition per GM)");
    }
    if let Some(x) = args.loads.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
        bail!("--loads: {x} is not a positive number");
    }
    if let Some(p) = args.altruism.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        bail!("--altruism: {p} is not between 0 and 1");
    }
    if !(args.window_s.is_finite() && args.window_s > 0.0) {
        bail!("--window-s must be a positive number");
    }
    println!("seed: {}", args.seed);
    let started = Instant::now();
    let mut summary = Map::new();
    summary.insert("seed".into(), json!(args.seed));
    summary.insert("nodes".into(), json!(args.nodes));
    summary.insert("gms".into(), json!(args.gms));
    summary.insert("jobs".into(), json!(args.jobs));
    summary.insert("node_cpus".into(), json!(args.node_cpus));
    summary.insert("node_memory_mb".into(), json!(args.node_memory_mb));
    let mut by_load = Map::new();
    for (k, &load) in args.loads.iter().enumerate() {
        let table = run_load(&args, load)?;
        if !args.quiet {
            print_table(load, &table);
        }
        if k == 0 {
            summary.insert("load".into(), json!(load));
            for (name, m) in &table {
                summary.insert(name.clone(), m.to_json());
            }
        }
        let mut entry = Map::new();
        for (name, m) in table {
            entry.insert(name, m.to_json());
        }
        by_load.insert(format!("x{load}"), Value::Object(entry));
    }
    summary.insert("loads".into(), Value::Object(by_load));
    summary.insert("wall_s".into(), json!(started.elapsed().as_secs_f64()));
    let path = super::output::write_summary(&args.out, &Value::Object(summary))?;
    if !args.quiet {
        println!("written to {}", path.display());
        if let Some(load) = args.loads.first() {
            println!(
                "job completion time CDFs: loadgen report {} --out REPORT",
                args.out.join(format!("x{load}")).display()
            );
        }
    }
    Ok(())
}

/// Every policy and the sweep at one load: (name, metrics) in table order.
fn run_load(args: &CarbyneArgs, load: f64) -> Result<Vec<(String, JobMetrics)>> {
    let cores = args.nodes as u64 * args.node_cpus;
    let gap = format!("{}", 20.0 / load);
    let partition = (args.nodes / usize::from(args.gms)).to_string();
    let mut runs: Vec<(String, String, f64)> = POLICIES
        .iter()
        .map(|p| (p.to_string(), p.to_string(), 1.0))
        .collect();
    for &p in &args.altruism {
        runs.push((format!("carbyne_p{p}"), "carbyne".into(), p));
    }
    let mut out = Vec::new();
    let mut base = None;
    for (name, order, altruism) in runs {
        let argv: Vec<String> = [
            "experiment",
            "--gms",
            &args.gms.to_string(),
            "--lms",
            "1",
            "--partition-size",
            &partition,
            "--node-cpus",
            &args.node_cpus.to_string(),
            "--node-memory-mb",
            &args.node_memory_mb.to_string(),
            "--seed",
            &args.seed.to_string(),
            "--constraints",
            "none",
            "--order",
            &order,
            "--altruism",
            &altruism.to_string(),
            "--replan-ms",
            &args.replan_ms.to_string(),
            "--tpch-jobs",
            &args.jobs.to_string(),
            "--tpch-interarrival-s",
            &gap,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let flags = Flags::try_parse_from(argv).context("experiment flags")?;
        let cluster = flags.cluster.load(args.seed)?;
        let source = SourceConfig {
            tpch: crate::cli::trace::tpch_config(TraceFormat::Tpch, &flags.tpch, args.seed)?,
            ..SourceConfig::default()
        };
        let trace = read_trace_from(
            &args.trace,
            TraceFormat::Tpch,
            TraceOptionsArgs::default(),
            args.seed,
            &source,
        )?;
        let jobs = workload::build(&trace, &flags.model.workload()?);
        let config = flags.model.sim_config(SchedulerKind::Megha, cluster.gms)?;
        let t = Instant::now();
        let outcome = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
        let wall = t.elapsed().as_secs_f64();
        let window = Micros::from_secs_f64(args.window_s);
        let mut m = metrics(&jobs, &outcome, window, cores as f64);
        m.wall_s = wall;
        let jct = completion_times(&jobs, &outcome);
        write_jobs(&args.out.join(format!("x{load}")).join(&name), &jct)?;
        if name == "drf" {
            base = Some(jct.clone());
        }
        if let Some(b) = &base {
            m.slowed_vs_drf = slowed(b, &jct);
        }
        eprintln!("x{load} {name}: {wall:.1} s");
        out.push((name, m));
    }
    Ok(out)
}

/// `dir/jobs.csv`: each job's completion time (`jct_s` empty when it did not
/// finish), which `loadgen report` draws as CDFs.
fn write_jobs(
    dir: &std::path::Path,
    jct: &std::collections::BTreeMap<u64, Option<f64>>,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut text = String::from("job,jct_s\n");
    for (job, t) in jct {
        text.push_str(&format!(
            "{job},{}\n",
            t.map_or(String::new(), |t| format!("{t:.3}"))
        ));
    }
    let path = dir.join("jobs.csv");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn print_table(load: f64, table: &[(String, JobMetrics)]) {
    println!("load x{load}");
    println!(
        "{:<16} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>6} {:>7}",
        "policy",
        "avg JCT",
        "p95 JCT",
        "makespan",
        "Jain avg",
        "Jain min",
        "slowed",
        "done",
        "wall s"
    );
    let drf = table
        .iter()
        .find(|(n, _)| n == "drf")
        .map(|(_, m)| m.avg_jct_s);
    for (name, m) in table {
        println!(
            "{:<16} {:>8.1}s {:>8.1}s {:>9.1}s {:>9.3} {:>9.3} {:>8.1}% {:>6} {:>7.1}",
            name,
            m.avg_jct_s,
            m.p95_jct_s,
            m.makespan_s,
            m.jain_mean,
            m.jain_min,
            m.slowed_vs_drf * 100.0,
            m.jobs_finished,
            m.wall_s
        );
    }
    if let Some(d) = drf {
        for (name, m) in table {
            if m.avg_jct_s > 0.0 {
                print!("{name}: {:.2}x  ", d / m.avg_jct_s);
            }
        }
        println!("(DRF's avg JCT / the policy's)");
    }
}
