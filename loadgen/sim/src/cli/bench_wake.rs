//! `loadgen bench-wake`: what retrying blocked tasks costs under overload, with the
//! GM's full retry (`--wake all`, the paper's simulator) and with the wake index
//! (`--wake indexed`), on the same inputs in the same run. Each simulation runs in
//! its own child process (`loadgen simulate`); the figures come from its
//! `summary.json`. Prints figures; asserts nothing.
//!
//! Scenarios: a generated overloaded trace (deterministic from `--seed`: jobs of 250
//! one-core tasks every 0.5 s, durations 10-110 s, about three times what the
//! cluster can run while they arrive) on the 10,000-node Megha cluster, and YH1_sub
//! on a generated 1,000-node cluster with per-job and per-task constraints.

use anyhow::{bail, Context, Result};
use clap::Args;
use common::rng::seeded;
use rand::Rng;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The random stream of the generated trace (apart from those in `common::rng`).
const OVERLOAD_STREAM: u64 = 17;

#[derive(Args, Debug)]
pub struct BenchWakeArgs {
    /// The 10,000-node Megha cluster config.
    #[arg(long, default_value = "data/clusters/megha_config_G5L5S10000_C.json")]
    pub cluster: PathBuf,
    /// Tasks of the generated overloaded trace (jobs of 250 tasks); several
    /// (comma-separated) give a scaling series, one scenario each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "300000",
        value_name = "N"
    )]
    pub overload_tasks: Vec<u64>,
    /// Run the overloaded traces on a generated cluster of this many one-core nodes
    /// (10 GMs x 10 LMs, a multiple of 100) instead of the Megha cluster config.
    #[arg(long, value_name = "NODES")]
    pub overload_nodes: Option<usize>,
    /// The moderate trace run on 1,000 nodes.
    #[arg(long, default_value = "data/traces/YH1_sub.tr")]
    pub trace: PathBuf,
    /// Scenarios to run (overload, yh1-per-job, yh1-per-task).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "overload,yh1-per-job,yh1-per-task"
    )]
    pub scenarios: Vec<String>,
    /// Wake policies to compare.
    #[arg(long, value_delimiter = ',', default_value = "all,indexed")]
    pub wake: Vec<String>,
    /// Where the runs (and the generated trace) are written.
    #[arg(long, default_value = "out/bench-wake")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Writes the overloaded trace: `tasks / 250` jobs of 250 tasks, one every 0.5 s
/// from 1 s, durations uniform in [10, 110) s (ms precision).
pub fn write_overload_trace(path: &Path, tasks: u64, seed: u64) -> Result<()> {
    write_overload_trace_every(path, tasks, 0.5, seed)
}

/// [`write_overload_trace`] with one job every `every_s` seconds.
pub fn write_overload_trace_every(path: &Path, tasks: u64, every_s: f64, seed: u64) -> Result<()> {
    let mut rng = seeded(seed, OVERLOAD_STREAM);
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot create trace {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let per_job = 250u64;
    for job in 0..(tasks / per_job).max(1) {
        let durations: Vec<f64> = (0..per_job)
            .map(|_| f64::from(rng.random_range(10_000u32..110_000)) / 1000.0)
            .collect();
        let mean = durations.iter().sum::<f64>() / durations.len() as f64;
        write!(out, "{:.3} {per_job} {mean:.3}", 1.0 + job as f64 * every_s)?;
        for d in durations {
            write!(out, " {d:.3}")?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}

pub fn run(args: BenchWakeArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    println!("seed: {}", args.seed);
    let mut setups: Vec<(String, Vec<String>)> = Vec::new();
    for scenario in &args.scenarios {
        let setup = match scenario.as_str() {
            "overload" => {
                let cluster = match args.overload_nodes {
                    Some(n) if n >= 100 && n % 100 == 0 => [
                        "--gms",
                        "10",
                        "--lms",
                        "10",
                        "--partition-size",
                        &(n / 100).to_string(),
                    ]
                    .map(String::from)
                    .to_vec(),
                    Some(n) => bail!("--overload-nodes {n}: must be a positive multiple of 100"),
                    None if !args.cluster.exists() => bail!(
                        "cluster {} not found (run from the repository root or give --cluster)",
                        args.cluster.display()
                    ),
                    None => vec!["--cluster".into(), args.cluster.display().to_string()],
                };
                for &tasks in &args.overload_tasks {
                    let trace = args.out.join(format!("overload-{tasks}.tr"));
                    write_overload_trace(&trace, tasks, args.seed)?;
                    let mut setup = vec!["--trace".into(), trace.display().to_string()];
                    setup.extend(cluster.iter().cloned());
                    setups.push((format!("overload-{tasks}"), setup));
                }
                continue;
            }
            "yh1-per-job" | "yh1-per-task" => {
                if !args.trace.exists() {
                    bail!(
                        "trace {} not found (run from the repository root or give --trace)",
                        args.trace.display()
                    );
                }
                let mode = scenario.trim_start_matches("yh1-");
                [
                    "--trace",
                    &args.trace.display().to_string(),
                    "--gms",
                    "5",
                    "--lms",
                    "5",
                    "--partition-size",
                    "40",
                    "--constraints",
                    mode,
                ]
                .map(String::from)
                .to_vec()
            }
            other => bail!(
                "--scenarios: unknown scenario {other:?}; expected overload, yh1-per-job or yh1-per-task"
            ),
        };
        setups.push((scenario.clone(), setup));
    }
    println!(
        "{:<16} {:<8} {:>8} {:>8} {:>8} {:>14} {:>14} {:>9} {:>9} {:>8}",
        "scenario",
        "wake",
        "tasks",
        "cpu s",
        "wall s",
        "retries",
        "woken",
        "p50 s",
        "p99 s",
        "peak MiB"
    );
    for (name, setup) in &setups {
        let mut first: Option<(f64, u64)> = None;
        for wake in &args.wake {
            let out = args.out.join(name).join(wake);
            let status = Command::new(&exe)
                .arg("simulate")
                .args(setup)
                .args(["--scheduler", "megha", "--quiet", "--wake", wake, "--seed"])
                .arg(args.seed.to_string())
                .arg("--out")
                .arg(&out)
                .stderr(std::process::Stdio::null())
                .status()
                .context("cannot start a simulation child process")?;
            if !status.success() {
                bail!("simulation {name} --wake {wake} failed ({status})");
            }
            let path = out.join("summary.json");
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let s: serde_json::Value = serde_json::from_str(&text)?;
            let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
            let cpu = f("cpu_time_s");
            let retries = s["retries"].as_u64().unwrap_or(0);
            let versus = match first {
                Some((c, r)) => format!(
                    "  ({:.1}x less CPU, {:.0}x fewer retries)",
                    c / cpu,
                    r as f64 / retries.max(1) as f64
                ),
                None => {
                    first = Some((cpu, retries));
                    String::new()
                }
            };
            println!(
                "{:<16} {:<8} {:>8} {:>8.2} {:>8.2} {:>14} {:>14} {:>9.2} {:>9.2} {:>8.0}{}",
                name,
                wake,
                f("tasks"),
                cpu,
                f("wall_time_s"),
                retries,
                s["woken"].as_u64().unwrap_or(0),
                s["allocation_s"]["p50"].as_f64().unwrap_or(f64::NAN),
                s["allocation_s"]["p99"].as_f64().unwrap_or(f64::NAN),
                f("peak_rss_mb"),
                versus
            );
        }
    }
    Ok(())
}
