//! `loadgen experiment priorities`: two priority classes under overload (issue 37
//! item 4c). The first jobs of YH1_sub on one GM and one LM; every `--high-every`-th
//! job is of the high class. Runs: the high jobs alone (unloaded), then every job
//! without classes, with the high class ordered first, and with it also
//! preempting. The high class's allocation time should stay near its unloaded value
//! under overload. Writes DIR/summary.json and prints a table.

use super::flags::TraceFlags;
use crate::cli::simulate::read_trace;
use crate::sim::{self, workload, SchedulerKind};
use crate::trace::TraceFormat;
use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use common::priority::PriorityClasses;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// The high class's value.
const HIGH: u16 = 100;

#[derive(Args, Debug)]
pub struct PrioritiesArgs {
    /// Output directory (created if missing): summary.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// One-core nodes (one GM, one LM).
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub nodes: usize,
    #[arg(long, default_value = "data/traces/YH1_sub.tr", value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's first N jobs.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub first_jobs: u64,
    /// Every Nth job is of the high class.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub high_every: u64,
    /// Aging of the classes (submissions per class point; 0: strict).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub aging: u64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No table on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// Mean and p99 of allocation times, seconds.
fn stats(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return json!({"tasks": 0});
    }
    xs.sort_by(f64::total_cmp);
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let p = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    json!({"tasks": xs.len(), "mean_s": mean, "p50_s": p(0.5), "p99_s": p(0.99)})
}

pub fn run(args: PrioritiesArgs) -> Result<()> {
    if args.nodes == 0 || args.first_jobs == 0 || args.high_every == 0 {
        bail!("--nodes, --first-jobs and --high-every must be at least 1");
    }
    println!("seed: {}", args.seed);
    let argv: Vec<String> = [
        "experiment",
        "--gms",
        "1",
        "--lms",
        "1",
        "--partition-size",
        &args.nodes.to_string(),
        "--constraints",
        "none",
        "--seed",
        &args.seed.to_string(),
        "--first-jobs",
        &args.first_jobs.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let flags = TraceFlags::try_parse_from(argv).context("experiment flags")?;
    let cluster = flags.cluster.load(args.seed)?;
    let mut trace = read_trace(
        &args.trace,
        TraceFormat::Tr,
        flags.selection.clone(),
        args.seed,
    )?;
    flags.model.adjust_trace(&mut trace);
    let mut jobs = workload::build(&trace, &flags.model.workload()?);
    let is_high = |j: &workload::Job| j.id.is_multiple_of(args.high_every);
    for job in jobs.iter_mut().filter(|j| is_high(j)) {
        for t in &mut job.tasks {
            t.priority = HIGH;
        }
    }
    let classes = |preempting: bool| {
        let high = if preempting {
            "high:100:preempting"
        } else {
            "high:100"
        };
        PriorityClasses::parse(&["low:0".into(), high.into()], None, args.aging)
            .map_err(anyhow::Error::msg)
    };
    let unloaded: Vec<workload::Job> = jobs.iter().filter(|j| is_high(j)).cloned().collect();
    let plain: Vec<workload::Job> = jobs
        .iter()
        .cloned()
        .map(|mut j| {
            j.tasks.iter_mut().for_each(|t| t.priority = 0);
            j
        })
        .collect();
    let runs: [(&str, &[workload::Job], PriorityClasses); 4] = [
        ("unloaded", &unloaded, classes(false)?),
        ("no_classes", &plain, PriorityClasses::default()),
        ("ordered", &jobs, classes(false)?),
        ("preempting", &jobs, classes(true)?),
    ];
    let mut out = Vec::new();
    for (name, run_jobs, priorities) in runs {
        let mut config = flags.model.sim_config(SchedulerKind::Megha, cluster.gms)?;
        config.priorities = Arc::new(priorities);
        let started = std::time::Instant::now();
        let outcome = sim::run(&cluster, run_jobs, &config, &mut |_, _| {});
        let alloc = |high: bool| {
            outcome
                .records
                .iter()
                .filter(|r| r.job.is_multiple_of(args.high_every) == high)
                .filter_map(|r| r.allocation())
                .map(|a| a.as_secs_f64())
                .collect::<Vec<_>>()
        };
        eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
        out.push(json!({
            "run": name,
            "high": stats(alloc(true)),
            "low": stats(alloc(false)),
            "preemptions": outcome.counters.preemptions,
        }));
    }
    let summary = json!({
        "seed": args.seed,
        "nodes": args.nodes,
        "first_jobs": args.first_jobs,
        "high_every": args.high_every,
        "aging": args.aging,
        "runs": out,
    });
    let path = super::output::write_summary(&args.out, &summary)?;
    if !args.quiet {
        println!("| run | high mean s | high p99 s | low mean s | low p99 s | preemptions |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: |");
        for r in &out {
            let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                r["run"].as_str().unwrap_or(""),
                f(&r["high"]["mean_s"]),
                f(&r["high"]["p99_s"]),
                f(&r["low"]["mean_s"]),
                f(&r["low"]["p99_s"]),
                r["preemptions"]
            );
        }
        println!("written to {}", path.display());
    }
    Ok(())
}
