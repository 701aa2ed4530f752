//! `loadgen experiment gangs`: gang-aware placement against placing a gang's tasks
//! one by one (issue 37 item 4b; docs/gangs.md). The trace's first jobs (YH1_sub by
//! default); a seeded share of them (20%) become gangs of 8 to 64 tasks of the job's
//! mean duration. Both runs place the same jobs on the same cluster:
//!
//! - `gang_aware`: each gang is submitted as one (`ClientToGm::SubmitGang`): its
//!   members are reserved on their LMs and launched on one commit.
//! - `one_by_one`: its tasks are ordinary tasks, placed one by one, with a start
//!   barrier (`SimConfig::start_barrier`, `megha/barrier.rs` in the simulator): a
//!   member that starts before the others waits there, holding its node; when the
//!   last member starts at `t`, every member ends at `t` plus its duration, as the
//!   ranks of an MPI job or the workers of a distributed training job do. (Before
//!   the barrier model, the simulator freed an early member's node after its own
//!   duration, which favoured this run.)
//!
//! Per run: job completion time (a job's last task's finish - its arrival; all
//! jobs, gangs, the rest), idle reserved node-seconds (per gang, the sum over
//! members of last start - own start: the time members held a node at the
//! barrier; one task per one-core node), `partial_starts` (gangs of which a member
//! started before every member's room was secured: held at its LM for a gang,
//! launched otherwise), the widest spread of a gang's member starts, and
//! `barrier_stuck` (members still waiting when the run ended: one-by-one placement
//! deadlocked, every node held at barriers; the jobs then count as unfinished).
//! `DIR/jobs.csv` has every job's completion time in each run.

use super::flags::TraceFlags;
use super::seeds::{self, Ratios};
use crate::cli::simulate::read_trace;
use crate::sim::{self, workload, SchedulerKind, SimOutcome};
use crate::trace::TraceFormat;
use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use common::gang::GangSpec;
use common::rng::{seeded, streams, Rng};
use common::{Micros, TaskId};
use rustc_hash::FxHashMap;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct GangsArgs {
    /// Output directory (created if missing): summary.json and jobs.csv (per job:
    /// arrival, tasks, gang or not, work, completion time in each run).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[arg(long, default_value = "data/traces/YH1_sub.tr", value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's first N jobs.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub first_jobs: u64,
    /// The share of jobs that are gangs.
    #[arg(long, default_value_t = 0.2, value_name = "SHARE")]
    pub gang_share: f64,
    /// Smallest and largest gang (uniform between).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub min_gang: u32,
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_gang: u32,
    #[arg(long, default_value_t = 2)]
    pub gms: u16,
    #[arg(long, default_value_t = 4)]
    pub lms: u16,
    /// One-core nodes per partition (nodes = gms x lms x this).
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub partition_size: usize,
    #[command(flatten)]
    pub runs: seeds::SeedFlags,
}

/// Mean, p50 and p95, seconds.
fn stats(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return json!({"jobs": 0});
    }
    xs.sort_by(f64::total_cmp);
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let p = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    json!({"jobs": xs.len(), "mean_s": mean, "p50_s": p(0.5), "p95_s": p(0.95)})
}

/// Turns a seeded share of `jobs` into gangs; returns each gang's size by job id.
fn make_gangs(jobs: &mut [workload::Job], args: &GangsArgs, seed: u64) -> FxHashMap<u64, u32> {
    let mut rng = seeded(seed, streams::GANGS);
    let mut gangs = FxHashMap::default();
    for job in jobs.iter_mut() {
        if job.tasks.is_empty() || job.dag.is_some() || !rng.random_bool(args.gang_share) {
            continue;
        }
        let size = rng.random_range(args.min_gang..=args.max_gang);
        let total: u64 = job.tasks.iter().map(|t| t.duration.0).sum();
        let mean = Micros(total / job.tasks.len() as u64);
        let template = job.tasks[0].clone();
        job.tasks = (0..size)
            .map(|i| {
                let mut t = template.clone();
                t.id = TaskId::new(job.id, i);
                t.duration = mean;
                t
            })
            .collect();
        gangs.insert(job.id, size);
    }
    gangs
}

/// The figures of one run, and each job's completion time (seconds; `None`:
/// unfinished), in `jobs` order.
fn measure(
    jobs: &[workload::Job],
    gangs: &FxHashMap<u64, u32>,
    outcome: &SimOutcome,
) -> (Value, Vec<Option<f64>>) {
    let mut by_job: FxHashMap<u64, Vec<&sim::ledger::TaskRecord>> = FxHashMap::default();
    for r in &outcome.records {
        by_job.entry(r.job).or_default().push(r);
    }
    let (mut all, mut gang_jct, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    let (mut idle, mut partial, mut spread_max, mut unfinished) = (0.0f64, 0u64, 0.0f64, 0u64);
    let mut per_job = Vec::with_capacity(jobs.len());
    for job in jobs {
        let recs = by_job.get(&job.id).map(Vec::as_slice).unwrap_or(&[]);
        let starts: Vec<Micros> = recs.iter().filter_map(|r| r.start).collect();
        if gangs.contains_key(&job.id) {
            if !starts.is_empty() {
                let first = *starts.iter().min().expect("some");
                let secured = recs.iter().filter_map(|r| r.secured.or(r.launch)).max();
                if starts.len() < recs.len() || secured.is_some_and(|s| s > first) {
                    partial += 1;
                }
            }
            if starts.len() == recs.len() && !recs.is_empty() {
                let last = *starts.iter().max().expect("some");
                let first = *starts.iter().min().expect("some");
                spread_max = spread_max.max((last - first).as_secs_f64());
                idle += starts
                    .iter()
                    .map(|s| (last - *s).as_secs_f64())
                    .sum::<f64>();
            }
        }
        let finishes: Vec<Micros> = recs.iter().filter_map(|r| r.finish).collect();
        if finishes.len() < recs.len() || recs.is_empty() {
            unfinished += 1;
            per_job.push(None);
            continue;
        }
        let end = *finishes.iter().max().expect("some");
        let jct = (end - job.arrival).as_secs_f64();
        match gangs.contains_key(&job.id) {
            true => gang_jct.push(jct),
            false => rest.push(jct),
        }
        all.push(jct);
        per_job.push(Some(jct));
    }
    let figures = json!({
        "jct_all": stats(all),
        "jct_gangs": stats(gang_jct),
        "jct_other": stats(rest),
        "idle_reserved_node_s": idle,
        "partial_starts": partial,
        "max_gang_start_spread_s": spread_max,
        "unfinished_jobs": unfinished,
        "drained": outcome.drained,
        "lm_rejections": outcome.counters.lm_rejections,
        "barrier_stuck": outcome.counters.barrier_stuck,
    });
    (figures, per_job)
}

/// `DIR/jobs.csv`: per job, its arrival, tasks, whether it is a gang, its work
/// (the sum of its tasks' durations) and its completion time in each run.
fn write_jobs_csv(
    out: &std::path::Path,
    jobs: &[workload::Job],
    gangs: &FxHashMap<u64, u32>,
    jct: &[(&str, Vec<Option<f64>>)],
) -> Result<()> {
    let mut text = String::from("job,arrival_s,tasks,gang,work_s");
    for (name, _) in jct {
        text.push_str(&format!(",jct_{name}_s"));
    }
    text.push('\n');
    for (i, job) in jobs.iter().enumerate() {
        let work: u64 = job.tasks.iter().map(|t| t.duration.0).sum();
        text.push_str(&format!(
            "{},{:.3},{},{},{:.3}",
            job.id,
            job.arrival.as_secs_f64(),
            job.tasks.len(),
            u8::from(gangs.contains_key(&job.id)),
            Micros(work).as_secs_f64()
        ));
        for (_, per_job) in jct {
            match per_job.get(i).copied().flatten() {
                Some(s) => text.push_str(&format!(",{s:.3}")),
                None => text.push(','),
            }
        }
        text.push('\n');
    }
    let path = out.join("jobs.csv");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

pub fn run(args: GangsArgs) -> Result<()> {
    seeds::run(seeds::Experiment {
        out: &args.out,
        flags: &args.runs,
        one: |seed, out: &std::path::Path, quiet| run_one(&args, seed, out, quiet),
        compare: |each: &[Value]| over_seeds(&args, each),
        print: print_over_seeds,
    })
}

/// The two placements compared over many seeds: per group of jobs (all, gangs,
/// others), the per-seed ratio gang-aware / one by one of the mean completion time.
fn over_seeds(args: &GangsArgs, each: &[Value]) -> Value {
    let mut groups = serde_json::Map::new();
    for group in ["jct_all", "jct_gangs", "jct_other"] {
        let pairs: Vec<(f64, f64)> = (each.iter())
            .filter_map(|s| {
                let mean = |run: &str| s["runs"][run][group]["mean_s"].as_f64();
                Some((mean("gang_aware")?, mean("one_by_one")?))
            })
            .collect();
        let ratios = Ratios::of(&pairs);
        groups.insert(
            group.into(),
            Ratios::json(ratios.as_ref(), "gang_aware", "one_by_one"),
        );
    }
    let total = |run: &str, field: &str| -> u64 {
        each.iter()
            .map(|s| s["runs"][run][field].as_u64().unwrap_or(0))
            .sum()
    };
    json!({
        "first_seed": args.runs.seed,
        "seeds": args.runs.seeds,
        "trace": args.trace.display().to_string(),
        "first_jobs": args.first_jobs,
        "gang_share": args.gang_share,
        "gang_sizes": [args.min_gang, args.max_gang],
        "ratio_gang_aware_over_one_by_one": groups,
        "partial_starts": {"gang_aware": total("gang_aware", "partial_starts"), "one_by_one": total("one_by_one", "partial_starts")},
        "unfinished_jobs": {"gang_aware": total("gang_aware", "unfinished_jobs"), "one_by_one": total("one_by_one", "unfinished_jobs")},
        "seeds_deadlocked_one_by_one": each.iter().filter(|s| s["runs"]["one_by_one"]["barrier_stuck"].as_u64().unwrap_or(0) > 0).count(),
    })
}

fn print_over_seeds(summary: &Value) {
    println!("| jobs | gang-aware better on | mean of ratios (gang-aware / one by one) | 95% interval | sd |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for group in ["jct_all", "jct_gangs", "jct_other"] {
        let g = &summary["ratio_gang_aware_over_one_by_one"][group];
        let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.4}"));
        println!(
            "| {} | {} of {} seeds | {} | [{}, {}] | {} |",
            &group[4..],
            g["gang_aware_better"],
            g["seeds"],
            f(&g["ratio_mean"]),
            f(&g["ratio_ci95"][0]),
            f(&g["ratio_ci95"][1]),
            f(&g["ratio_sd"])
        );
    }
    println!(
        "partial starts: gang-aware {}, one by one {}; seeds where one by one deadlocked: {}",
        summary["partial_starts"]["gang_aware"],
        summary["partial_starts"]["one_by_one"],
        summary["seeds_deadlocked_one_by_one"]
    );
}

/// One seed: both placements, DIR/summary.json and DIR/jobs.csv; the summary.
fn run_one(args: &GangsArgs, seed: u64, out: &std::path::Path, quiet: bool) -> Result<Value> {
    if args.first_jobs == 0 || args.gms == 0 || args.lms == 0 || args.partition_size == 0 {
        bail!("--first-jobs, --gms, --lms and --partition-size must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.gang_share) {
        bail!(
            "--gang-share must be between 0 and 1, not {}",
            args.gang_share
        );
    }
    if args.min_gang == 0 || args.min_gang > args.max_gang {
        bail!("--min-gang must be at least 1 and at most --max-gang");
    }
    if !quiet {
        println!("seed: {seed}");
    }
    let argv: Vec<String> = [
        "experiment",
        "--gms",
        &args.gms.to_string(),
        "--lms",
        &args.lms.to_string(),
        "--partition-size",
        &args.partition_size.to_string(),
        "--constraints",
        "none",
        "--seed",
        &seed.to_string(),
        "--first-jobs",
        &args.first_jobs.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let flags = TraceFlags::try_parse_from(argv).context("experiment flags")?;
    let cluster = flags.cluster.load(seed)?;
    let nodes = args.gms as usize * args.lms as usize * args.partition_size;
    if (args.max_gang as usize) > nodes {
        bail!(
            "--max-gang {} is larger than the cluster's {nodes} one-core nodes",
            args.max_gang
        );
    }
    let mut trace = read_trace(&args.trace, TraceFormat::Tr, flags.selection.clone(), seed)?;
    flags.model.adjust_trace(&mut trace);
    let mut jobs = workload::build(&trace, &flags.model.workload()?);
    let gangs = make_gangs(&mut jobs, args, seed);
    let tasks: usize = jobs.iter().map(|j| j.tasks.len()).sum();
    let gang_tasks: u64 = gangs.values().map(|s| u64::from(*s)).sum();
    let specs: FxHashMap<u64, GangSpec> = (gangs.iter())
        .map(|(job, size)| (*job, GangSpec::all(*size, Micros::from_secs_f64(86_400.0))))
        .collect();
    let mut runs = serde_json::Map::new();
    let mut per_job = Vec::new();
    for name in ["gang_aware", "one_by_one"] {
        let mut config = flags.model.sim_config(SchedulerKind::Megha, cluster.gms)?;
        if name == "gang_aware" {
            config.gangs = Some(Arc::new(specs.clone()));
        } else {
            config.start_barrier = Some(Arc::new(gangs.keys().copied().collect()));
        }
        let started = std::time::Instant::now();
        let outcome = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
        if !quiet {
            eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
        }
        let (figures, jct) = measure(&jobs, &gangs, &outcome);
        runs.insert(name.into(), figures);
        per_job.push((name, jct));
    }
    let summary = json!({
        "seed": seed,
        "trace": args.trace.display().to_string(),
        "first_jobs": args.first_jobs,
        "nodes": nodes,
        "gms": args.gms,
        "lms": args.lms,
        "jobs": jobs.len(),
        "tasks": tasks,
        "gangs": gangs.len(),
        "gang_tasks": gang_tasks,
        "gang_share": args.gang_share,
        "gang_sizes": [args.min_gang, args.max_gang],
        "runs": runs,
    });
    let path = super::output::write_summary(out, &summary)?;
    write_jobs_csv(out, &jobs, &gangs, &per_job)?;
    if !quiet {
        println!("| run | JCT mean s (all) | gangs mean s | gangs p95 s | others mean s | idle reserved node-s | partial starts |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for name in ["gang_aware", "one_by_one"] {
            let r = &summary["runs"][name];
            let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.1}"));
            println!(
                "| {name} | {} | {} | {} | {} | {} | {} |",
                f(&r["jct_all"]["mean_s"]),
                f(&r["jct_gangs"]["mean_s"]),
                f(&r["jct_gangs"]["p95_s"]),
                f(&r["jct_other"]["mean_s"]),
                f(&r["idle_reserved_node_s"]),
                r["partial_starts"]
            );
        }
        for name in ["gang_aware", "one_by_one"] {
            let r = &summary["runs"][name];
            if r["barrier_stuck"].as_u64().unwrap_or(0) > 0 {
                println!(
                    "{name}: deadlocked, {} tasks held nodes at their start barrier when the run \
                     ended; {} jobs unfinished (not in the means)",
                    r["barrier_stuck"], r["unfinished_jobs"]
                );
            }
        }
        println!("written to {}", path.display());
    }
    Ok(summary)
}
