//! `loadgen experiment fairness`: the Megha paper's fairness setup (section VI-E;
//! what `scripts/fairness-experiment.sh` ran) in the simulator, with the rules that
//! bound preemption (issue 37 item 4a). Four queues with 10, 25, 15 and 50 % shares
//! on 3 GMs; the first 300 jobs of YH1_sub (12,200 tasks); no placement constraints;
//! about 200, 500 and 1,500 one-core nodes (3 GMs x 2 LMs), each with and without
//! preemption. Writes DIR/summary.json (one entry per run) and each run's simulate
//! reports in DIR/<nodes>-preemption-<bool>/; prints a table.

use super::flags::TraceFlags;
use crate::cli::simulate::{read_trace, run_one, PreemptArgs};
use crate::report::Summary;
use crate::sim::{workload, SchedulerKind};
use crate::trace::TraceFormat;
use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use common::Micros;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The queues of the paper's setup.
pub const QUEUES: &str = "a:0.10:0,b:0.25:1,c:0.15:1,d:0.50:2";

#[derive(Args, Debug)]
pub struct FairnessArgs {
    /// Output directory (created if missing): summary.json and one directory per run.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// About this many nodes per size (rounded up to a multiple of 6: 3 GMs x 2 LMs).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "200,500,1500",
        value_name = "N,..."
    )]
    pub nodes: Vec<usize>,
    /// The trace (Sparrow/Megha `.tr`).
    #[arg(long, default_value = "data/traces/YH1_sub.tr", value_name = "FILE")]
    pub trace: PathBuf,
    /// Its first N jobs.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub first_jobs: u64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The preemption rules of the runs with preemption.
    #[command(flatten)]
    pub preempt: PreemptArgs,
    /// Also run each size without preemption (false: only with it, to try rules
    /// faster; the runs without preemption do not depend on the rules).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub without_preemption: bool,
    /// No table on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// The simulate flags this experiment sets, parsed as `simulate` parses them.
/// One run's line of summary.json.
fn entry(nodes: usize, preemption: bool, s: &Summary) -> Value {
    let (jain_mean, jain_min) = s
        .fairness
        .as_ref()
        .map_or((1.0, 1.0), |f| (f.jain_mean, f.jain_min));
    json!({
        "nodes": nodes,
        "preemption": preemption,
        "jain_mean": jain_mean,
        "jain_min": jain_min,
        "preemptions": s.preemptions,
        "preemptions_per_task": s.preemptions as f64 / s.tasks.max(1) as f64,
        "max_preemptions_of_a_task": s.max_task_preemptions,
        "wasted_task_s": s.wasted_task_seconds,
        "preempt_attempts": s.preempt_attempts,
        "preempt_refused": s.preempt_refused,
        "tasks": s.tasks,
        "allocation_mean_s": s.allocation_s.mean,
        "allocation_p50_s": s.allocation_s.p50,
        "allocation_p99_s": s.allocation_s.p99,
    })
}

pub fn run(args: FairnessArgs) -> Result<()> {
    if args.nodes.contains(&0) || args.first_jobs == 0 {
        bail!("--nodes and --first-jobs must be at least 1");
    }
    let rules = args.preempt.rules()?;
    println!("seed: {}", args.seed);
    let mut runs = Vec::new();
    for &about in &args.nodes {
        let per = about.div_ceil(6);
        let modes: &[bool] = if args.without_preemption {
            &[true, false]
        } else {
            &[true]
        };
        for &preemption in modes {
            let argv: Vec<String> = [
                "experiment",
                "--gms",
                "3",
                "--lms",
                "2",
                "--partition-size",
                &per.to_string(),
                "--queues",
                QUEUES,
                "--preemption",
                &preemption.to_string(),
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
            let mut flags = TraceFlags::try_parse_from(argv).context("experiment flags")?;
            flags.model.preempt = args.preempt.clone();
            let cluster = flags.cluster.load(args.seed)?;
            let mut trace = read_trace(
                &args.trace,
                TraceFormat::Tr,
                flags.selection.clone(),
                args.seed,
            )?;
            flags.model.adjust_trace(&mut trace);
            let jobs = workload::build(&trace, &flags.model.workload()?);
            let config = flags.model.sim_config(SchedulerKind::Megha, cluster.gms)?;
            let dir = args
                .out
                .join(format!("{}-preemption-{preemption}", per * 6));
            let window = Micros::from_secs_f64(flags.model.fairness_window_s);
            let summary = run_one(&cluster, &jobs, &config, &dir, true, window)?;
            eprintln!(
                "{} nodes, preemption {preemption}: {:.1} s",
                per * 6,
                summary.wall_time_s
            );
            runs.push(entry(per * 6, preemption, &summary));
        }
    }
    let summary = json!({
        "seed": args.seed,
        "trace": args.trace.display().to_string(),
        "first_jobs": args.first_jobs,
        "queues": QUEUES,
        "rules": rules,
        "runs": runs,
    });
    let path = super::output::write_summary(&args.out, &summary)?;
    if !args.quiet {
        print_table(&runs);
        println!("written to {}", path.display());
    }
    Ok(())
}

/// The table of docs/fairness.md.
fn print_table(runs: &[Value]) {
    println!("| nodes | preemption | Jain mean / min | preemptions per task | most of one task | wasted task-s | mean alloc. s | p99 s |");
    println!("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in runs {
        println!(
            "| {} | {} | {:.3} / {:.3} | {:.3} | {} | {:.0} | {:.0} | {:.0} |",
            r["nodes"],
            if r["preemption"] == true { "on" } else { "off" },
            r["jain_mean"].as_f64().unwrap_or(0.0),
            r["jain_min"].as_f64().unwrap_or(0.0),
            r["preemptions_per_task"].as_f64().unwrap_or(0.0),
            r["max_preemptions_of_a_task"],
            r["wasted_task_s"].as_f64().unwrap_or(0.0),
            r["allocation_mean_s"].as_f64().unwrap_or(0.0),
            r["allocation_p99_s"].as_f64().unwrap_or(0.0),
        );
    }
}
