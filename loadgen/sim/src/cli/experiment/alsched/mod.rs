//! `loadgen experiment alsched`: the value of soft constraints (alsched, issue 36).
//! A described cluster with racks and a few GPU nodes; a seeded mix of GPU jobs
//! (fast on a GPU, `--gpu-slowdown` times slower elsewhere), rack-local jobs (their
//! data in one rack, `--rack-slowdown` times slower outside it) and jobs with no
//! preference, with Poisson arrivals at each offered load. The same workload runs
//! under three policies:
//!
//! - `none`: preferences ignored (the run time still depends on where tasks land);
//! - `hard`: preferences as hard constraints (a task waits for its set);
//! - `soft_plain`: a `prefer(set)` utility tree per job with a preference (the GM
//!   tries the set first and falls back to any node instead of waiting);
//! - `soft_task`: as `soft_plain`, and the jobs that do not need a GPU prefer nodes
//!   without one (`not gpu`, which hard constraints cannot express; a rack-local
//!   job prefers its rack's nodes without a GPU, else its rack);
//! - `soft`: as `soft_task`, but a job's own preference pays only when all its tasks
//!   are in the set (`nCk(set, n, 1)`: a job ends with its last task), so the GM
//!   takes it only when the set has room for the whole job;
//! - `soft_delay`: the `soft` tree with `relax_after_s` (delay scheduling): a task
//!   waits up to `--relax-after-s` for its set, then falls back;
//! - `soft_ilp`: the `soft` tree, and the designated GM (GM 0) solves the waiting
//!   tasks of its jobs exactly at each pass (`--soft-ilp-ms`, the GM's flag); the
//!   other GMs place theirs greedily.
//!
//! Writes DIR/summary.json (per load, per policy: mean and p95 completion, utilisation,
//! preferred share), per load and policy `DIR/x<load>/<policy>/tasks.csv` (with the
//! branch of its job's tree each task got, for the tree policies; `loadgen report
//! DIR/x<load>` overlays the policies), and prints a table and the seed. With
//! `--seeds N`, each seed writes all that in `DIR/seed-S`, and `DIR/summary.json`
//! compares the policies over the seeds ([`over_seeds`]): one seed's result moves
//! with pass timing.

mod over_seeds;

use super::jobs::Completions;
use super::seeds;
use crate::report::write_tasks_file;
use crate::sim::soft::{SoftJob, SoftJobs};
use crate::sim::workload::Job;
use crate::sim::{self, SimConfig, SimOutcome};
use anyhow::{bail, Context, Result};
use clap::Args;
use common::attributes::Attributes;
use common::cluster::ClusterSpec;
use common::cluster_described::{DescribedCluster, DescribedLm, NodeGroup};
use common::rng::{seeded, Rng};
use common::utility::{compile, SetExpr, SetOp, UtilityTree};
use common::{ConstraintSet, Micros, Resources, TaskId, TaskSpec};
use over_seeds::{over_seeds, print_over_seeds};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The policies compared, in table order.
pub const POLICIES: [&str; 7] = [
    "none",
    "hard",
    "soft_plain",
    "soft_task",
    "soft",
    "soft_delay",
    "soft_ilp",
];

#[derive(Args, Debug)]
pub struct AlschedArgs {
    /// Output directory (created if missing): summary.json, and x<load>/<policy>/tasks.csv.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Jobs per run.
    #[arg(long, default_value_t = 600, value_name = "N")]
    pub jobs: u64,
    /// Racks (each of `--rack-nodes` nodes; racks are spread over two LMs).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub racks: usize,
    #[arg(long, default_value_t = 25, value_name = "N")]
    pub rack_nodes: usize,
    /// GPU nodes per rack (the default, 1 of 25, makes GPUs scarce: GPU jobs ask
    /// for about 30 % of the work, GPUs are 4 % of the cores).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub rack_gpus: usize,
    #[arg(long, default_value_t = 4, value_name = "CORES")]
    pub node_cpus: u64,
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub gms: u16,
    /// Offered loads: the work of the arrivals at their preferred run times as a
    /// share of the cluster's cores.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.5,0.7,0.9",
        value_name = "L,..."
    )]
    pub loads: Vec<f64>,
    /// A GPU job's task runs this many times longer off a GPU node.
    #[arg(long, default_value_t = 2.0)]
    pub gpu_slowdown: f64,
    /// A rack-local job's task runs this many times longer outside its rack.
    #[arg(long, default_value_t = 1.5)]
    pub rack_slowdown: f64,
    /// A task's run time on its preferred placement, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub task_s: f64,
    /// `soft_delay`: how long a job waits for its preferred set, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub relax_after_s: f64,
    /// `soft_ilp`: the cap of the designated GM's exact solve per pass, ms. A cap
    /// the solve reaches makes the run depend on the machine's speed.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = crate::cli::simulate::parse_soft_ilp_ms)]
    pub soft_ilp_ms: u64,
    #[command(flatten)]
    pub runs: seeds::SeedFlags,
}

/// What a job prefers.
#[derive(Clone, Debug)]
enum Preference {
    Gpu,
    Rack(usize),
    Nothing,
}

/// One drawn job, before a policy shapes it.
#[derive(Clone, Debug)]
struct Drawn {
    arrival: Micros,
    tasks: u32,
    preference: Preference,
}

/// What one policy gave at one load.
#[derive(Clone, Debug, Default)]
struct Measured {
    mean_completion_s: f64,
    p95_completion_s: f64,
    utilisation: f64,
    preferred_share: f64,
    preferred_task_share: f64,
    jobs_finished: usize,
    /// Launches an LM refused (the GM's view was stale), and tasks requeued.
    lm_rejections: u64,
    requeues: u64,
    /// The designated GM's exact solves (`soft_ilp`), planned and fallen back.
    soft_ilp_solves: u64,
    soft_ilp_fallbacks: u64,
    wall_s: f64,
}

impl Measured {
    fn to_json(&self) -> Value {
        json!({
            "mean_completion_s": self.mean_completion_s,
            "p95_completion_s": self.p95_completion_s,
            "utilisation": self.utilisation,
            "preferred_share": self.preferred_share,
            "preferred_task_share": self.preferred_task_share,
            "jobs_finished": self.jobs_finished,
            "lm_rejections": self.lm_rejections,
            "requeues": self.requeues,
            "soft_ilp_solves": self.soft_ilp_solves,
            "soft_ilp_fallbacks": self.soft_ilp_fallbacks,
            "wall_s": self.wall_s,
        })
    }
}

fn cluster(args: &AlschedArgs) -> Result<(ClusterSpec, Attributes)> {
    let lms = 2.min(args.racks).max(1);
    let mut described = DescribedCluster {
        gms: args.gms,
        lms: vec![DescribedLm { nodes: Vec::new() }; lms],
    };
    for r in 0..args.racks {
        let rack = format!("rack=r{r}");
        let group = |count, gpu: bool| NodeGroup {
            count,
            cpus: args.node_cpus,
            memory_mb: 16384,
            attributes: if gpu {
                vec!["gpu".into(), rack.clone()]
            } else {
                vec![rack.clone()]
            },
        };
        let nodes = &mut described.lms[r % lms].nodes;
        nodes.push(group(args.rack_gpus, true));
        nodes.push(group(args.rack_nodes - args.rack_gpus, false));
    }
    Ok(described.build()?)
}

/// The seeded mix: 30 % GPU jobs, 40 % rack-local, 30 % without a preference;
/// 4 to 10 tasks each; Poisson arrivals for `load`.
fn draw(args: &AlschedArgs, seed: u64, load: f64, cores: f64) -> Vec<Drawn> {
    let mut rng = seeded(seed, 36);
    let mean_tasks = 7.0;
    let gap_s = mean_tasks * args.task_s / (cores * load);
    let mut t = 0.0;
    (0..args.jobs)
        .map(|_| {
            t += -gap_s * (1.0 - rng.random::<f64>()).ln();
            let p = rng.random::<f64>();
            let preference = if p < 0.3 {
                Preference::Gpu
            } else if p < 0.7 {
                Preference::Rack(rng.random_range(0..args.racks))
            } else {
                Preference::Nothing
            };
            Drawn {
                arrival: Micros::from_secs_f64(t),
                tasks: rng.random_range(4..=10),
                preference,
            }
        })
        .collect()
}

/// The jobs and their preferences under one policy.
fn shape(
    args: &AlschedArgs,
    drawn: &[Drawn],
    names: &Attributes,
    policy: &str,
) -> Result<(Vec<Job>, SoftJobs)> {
    let mut jobs = Vec::new();
    let mut soft = SoftJobs::default();
    let fast = Micros::from_secs_f64(args.task_s);
    for (j, d) in drawn.iter().enumerate() {
        let (name, slowdown) = match d.preference {
            Preference::Gpu => ("gpu".to_owned(), args.gpu_slowdown),
            Preference::Rack(r) => (format!("rack=r{r}"), args.rack_slowdown),
            Preference::Nothing => (String::new(), 1.0),
        };
        let hard = match (policy, name.is_empty()) {
            ("hard", false) => names.set([name.as_str()])?,
            _ => ConstraintSet::EMPTY,
        };
        let tasks: Vec<TaskSpec> = (0..d.tasks)
            .map(|i| {
                TaskSpec::short(TaskId::new(j as u64, i), Resources::cores(1, 1024), fast)
                    .with_constraints(hard)
            })
            .collect();
        let relax = (policy == "soft_delay").then_some(args.relax_after_s);
        let tree = match policy {
            "soft_plain" => soft_tree(&d.preference, false, relax),
            "soft_task" => soft_tree(&d.preference, true, relax),
            "soft" | "soft_delay" | "soft_ilp" => whole_job_tree(&d.preference, d.tasks, relax),
            _ => None,
        };
        let utility = match tree {
            Some(tree) => Some(Arc::new(compile(&tree, names, d.tasks, "utility")?)),
            None => None,
        };
        let preferred = match name.is_empty() {
            true => common::utility::BitExpr::All,
            false => common::utility::BitExpr::Bit(
                names.bit(&name).context("a drawn attribute is named")?,
            ),
        };
        if utility.is_some() || !name.is_empty() {
            let slow = Micros::from_secs_f64(args.task_s * slowdown);
            soft.insert(
                j as u64,
                SoftJob {
                    utility,
                    preferred,
                    slow_duration: vec![slow; d.tasks as usize],
                },
            );
        }
        jobs.push(Job {
            id: j as u64,
            arrival: d.arrival,
            tasks,
            dag: None,
        });
    }
    Ok((jobs, soft))
}

/// A job's tree under the soft policies: its own preference; with `avoid`, jobs
/// that do not need a GPU also prefer nodes without one (`not gpu`: hard
/// constraints cannot say it), so that the scarce GPUs stay free for the jobs that
/// run faster there. `relax`: delay scheduling on the job's own preference.
fn soft_tree(preference: &Preference, avoid: bool, relax: Option<f64>) -> Option<UtilityTree> {
    let not_gpu = || SetExpr::Op(SetOp::Not(Box::new(SetExpr::attr("gpu"))));
    let prefer = |set, otherwise, relax_after_s| UtilityTree::Prefer {
        relax_after_passes: None,
        set,
        otherwise,
        relax_after_s,
    };
    match (preference, avoid) {
        (Preference::Gpu, _) => Some(prefer(SetExpr::attr("gpu"), None, relax)),
        (Preference::Rack(r), false) => {
            Some(prefer(SetExpr::attr(&format!("rack=r{r}")), None, relax))
        }
        (Preference::Rack(r), true) => {
            let rack = SetExpr::attr(&format!("rack=r{r}"));
            let set = SetExpr::Op(SetOp::And(vec![rack.clone(), not_gpu()]));
            Some(prefer(set, Some(rack), relax))
        }
        (Preference::Nothing, false) => None,
        (Preference::Nothing, true) => Some(prefer(not_gpu(), None, None)),
    }
}

/// A job's tree under `soft` and `soft_delay`: a job ends with its last task, so
/// its preference pays only when every task is in the set (`nCk(set, n, 1)`: the GM
/// takes the branch only when the set has room for the whole job); a rack-local job
/// takes its rack's nodes without a GPU first, else its rack (worth 0.9); jobs that
/// do not need a GPU prefer, task by task, nodes without one (`LnCk`).
fn whole_job_tree(preference: &Preference, n: u32, relax: Option<f64>) -> Option<UtilityTree> {
    let not_gpu = || SetExpr::Op(SetOp::Not(Box::new(SetExpr::attr("gpu"))));
    let all = |set, u| {
        UtilityTree::NCk(common::utility::Leaf {
            set,
            k: n,
            u,
            relax_after_s: relax,
            relax_after_passes: None,
        })
    };
    match preference {
        Preference::Gpu => Some(all(SetExpr::attr("gpu"), 1.0)),
        Preference::Rack(r) => {
            let rack = SetExpr::attr(&format!("rack=r{r}"));
            let cool = SetExpr::Op(SetOp::And(vec![rack.clone(), not_gpu()]));
            Some(UtilityTree::Max(vec![all(cool, 1.0), all(rack, 0.9)]))
        }
        Preference::Nothing => soft_tree(preference, true, None),
    }
}

fn measure(
    cluster: &ClusterSpec,
    jobs: &[Job],
    soft: &SoftJobs,
    outcome: &SimOutcome,
    cores: f64,
) -> Measured {
    let Completions {
        done,
        mean,
        p95,
        first,
        last,
        ..
    } = Completions::of(jobs, outcome);
    // Busy core-seconds over the cores times the span from first arrival to last end.
    let busy: f64 = outcome
        .runs
        .iter()
        .map(|r| {
            let end = r.end.unwrap_or(outcome.span);
            end.0.saturating_sub(r.start.0) as f64 * r.resources.cpu_millis as f64 / 1000.0
        })
        .sum();
    let span = last.0.saturating_sub(first.0).max(1) as f64;
    // Preferred share: jobs with a preference whose every task ran in its set.
    let attrs: Vec<Vec<ConstraintSet>> = cluster
        .lms
        .iter()
        .map(|lm| lm.nodes().map(|(_, _, n)| n.constraints).collect())
        .collect();
    let mut per_job: std::collections::BTreeMap<u64, (u32, u32)> = Default::default();
    for r in &outcome.records {
        let Some(job) = soft.get(&r.job) else {
            continue;
        };
        if job.preferred == common::utility::BitExpr::All {
            continue; // no preference of its own (a `not gpu` tree only)
        }
        let (Some(lm), Some(node)) = (r.lm, r.node) else {
            continue;
        };
        let on = attrs[lm.index()][node.index()];
        let e = per_job.entry(r.job).or_default();
        e.0 += 1;
        e.1 += u32::from(job.preferred_on(on));
    }
    let jobs_pref = per_job.values().filter(|(n, p)| n == p).count();
    let (tasks, preferred) = per_job
        .values()
        .fold((0u32, 0u32), |(a, b), (n, p)| (a + n, b + p));
    Measured {
        mean_completion_s: mean,
        p95_completion_s: p95,
        utilisation: busy / (cores * span),
        preferred_share: jobs_pref as f64 / per_job.len().max(1) as f64,
        preferred_task_share: f64::from(preferred) / f64::from(tasks.max(1)),
        jobs_finished: done.len(),
        lm_rejections: outcome.counters.lm_rejections,
        requeues: outcome.counters.requeues,
        soft_ilp_solves: outcome.counters.soft_ilp_solves,
        soft_ilp_fallbacks: outcome.counters.soft_ilp_fallbacks,
        wall_s: 0.0,
    }
}

pub fn run(args: AlschedArgs) -> Result<()> {
    if args.jobs == 0 || args.racks == 0 || args.gms == 0 {
        bail!("--jobs, --racks and --gms must be at least 1");
    }
    if args.rack_gpus > args.rack_nodes || args.rack_nodes == 0 {
        bail!("--rack-gpus must be at most --rack-nodes, which must be at least 1");
    }
    if let Some(x) = args.loads.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
        bail!("--loads: {x} is not a positive number");
    }
    seeds::run(seeds::Experiment {
        out: &args.out,
        flags: &args.runs,
        one: |seed, out: &Path, quiet| run_one(&args, seed, out, quiet),
        compare: |each: &[Value]| {
            let setup = over_seeds::Setup {
                first_seed: args.runs.seed,
                seeds: args.runs.seeds,
                jobs: args.jobs,
                loads: &args.loads,
                policies: &POLICIES,
            };
            over_seeds(setup, each)
        },
        print: |summary: &Value| print_over_seeds(summary, &POLICIES),
    })
}

/// One seed: every policy at every load, `out/summary.json` and the runs'
/// `tasks.csv`; the summary.
fn run_one(args: &AlschedArgs, seed: u64, out: &Path, quiet: bool) -> Result<Value> {
    println!("seed: {seed}");
    let started = Instant::now();
    let (cluster, names) = cluster(args)?;
    let cores = cluster.total_capacity().cpu_millis as f64 / 1000.0;
    let mut by_load = Map::new();
    let mut goals = Vec::new();
    for &load in &args.loads {
        let drawn = draw(args, seed, load, cores);
        let mut table = Vec::new();
        for policy in POLICIES {
            let (jobs, soft) = shape(args, &drawn, &names, policy)?;
            let config = SimConfig {
                seed,
                soft_jobs: Some(Arc::new(soft.clone())),
                soft_ilp_ms: (policy == "soft_ilp").then_some(args.soft_ilp_ms),
                ..SimConfig::default()
            };
            let t = Instant::now();
            let outcome = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
            let dir = out.join(format!("x{load}")).join(policy);
            std::fs::create_dir_all(&dir)
                .and_then(|()| write_tasks_file(&dir, &outcome))
                .with_context(|| format!("writing {}", dir.join("tasks.csv").display()))?;
            let mut m = measure(&cluster, &jobs, &soft, &outcome, cores);
            m.wall_s = t.elapsed().as_secs_f64();
            if !quiet {
                eprintln!("load {load} {policy}: {:.1} s", m.wall_s);
            }
            table.push((policy, m));
        }
        let mean = |p: &str| {
            table
                .iter()
                .find(|(n, _)| *n == p)
                .map_or(f64::NAN, |(_, m)| m.mean_completion_s)
        };
        let (none, hard, soft) = (mean("none"), mean("hard"), mean("soft"));
        let delay = mean("soft_delay");
        // The goal is stated for `soft`; `soft_delay` (soft constraints with
        // delay scheduling) is judged the same way, the other variants are shown.
        goals.push((
            load,
            soft < none && soft < hard,
            hard / soft,
            delay < none && delay < hard,
        ));
        if !quiet {
            print_table(load, &table);
        }
        let mut entry = Map::new();
        for (policy, m) in &table {
            entry.insert(policy.to_string(), m.to_json());
        }
        entry.insert("hard_over_soft_mean".into(), json!(hard / soft));
        entry.insert("none_over_soft_mean".into(), json!(none / soft));
        by_load.insert(format!("{load}"), Value::Object(entry));
    }
    let (top, _, top_ratio, _) = goals.last().copied().unwrap_or((0.0, false, 0.0, false));
    let summary = json!({
        "seed": seed,
        "jobs": args.jobs,
        "racks": args.racks,
        "rack_nodes": args.rack_nodes,
        "rack_gpus": args.rack_gpus,
        "node_cpus": args.node_cpus,
        "gms": args.gms,
        "gpu_slowdown": args.gpu_slowdown,
        "rack_slowdown": args.rack_slowdown,
        "task_s": args.task_s,
        "soft_ilp_ms": args.soft_ilp_ms,
        "loads": Value::Object(by_load),
        "goal": {
            "soft_beats_none_and_hard_at_every_load": goals.iter().all(|g| g.1),
            "soft_delay_beats_none_and_hard_at_every_load": goals.iter().all(|g| g.3),
            "highest_load": top,
            "hard_over_soft_at_highest_load": top_ratio,
            "soft_beats_hard_3x_at_highest_load": top_ratio >= 3.0,
        },
        "wall_s": started.elapsed().as_secs_f64(),
    });
    let path = super::output::write_summary(out, &summary)?;
    if !quiet {
        println!("written to {}", path.display());
    }
    Ok(summary)
}

fn print_table(load: f64, table: &[(&str, Measured)]) {
    println!("load {load}");
    println!(
        "{:<10} {:>10} {:>10} {:>8} {:>10} {:>10} {:>6} {:>8}",
        "policy", "mean JCT", "p95 JCT", "util", "pref jobs", "pref tasks", "done", "rejected"
    );
    for (policy, m) in table {
        println!(
            "{:<10} {:>9.1}s {:>9.1}s {:>7.1}% {:>9.1}% {:>9.1}% {:>6} {:>8}",
            policy,
            m.mean_completion_s,
            m.p95_completion_s,
            m.utilisation * 100.0,
            m.preferred_share * 100.0,
            m.preferred_task_share * 100.0,
            m.jobs_finished,
            m.lm_rejections
        );
    }
}
