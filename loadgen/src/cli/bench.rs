//! `loadgen bench`: how fast the simulator runs the Megha evaluation at data-center
//! scale. Each (cluster, scheduler) runs in its own child process so that peak memory
//! is measured per run. Prints figures; asserts nothing.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::Command;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Trace to simulate.
    #[arg(long, default_value = "data/traces/YH1_sub.tr")]
    pub trace: PathBuf,
    /// The 10,000-node Megha cluster config.
    #[arg(long, default_value = "data/clusters/megha_config_G5L5S10000_C.json")]
    pub cluster: PathBuf,
    /// Also run a generated 50,000-node cluster (10 GMs x 10 LMs x 500 nodes).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub large: bool,
    /// Schedulers to measure.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "megha,sparrow,centralized"
    )]
    pub schedulers: Vec<String>,
    /// Where the runs write their reports.
    #[arg(long, default_value = "out/bench")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

pub fn run(args: BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    if !args.trace.exists() {
        bail!(
            "trace {} not found (run from the repository root)",
            args.trace.display()
        );
    }
    let mut setups: Vec<(String, Vec<String>)> = vec![(
        "10k-megha-config".into(),
        vec!["--cluster".into(), args.cluster.display().to_string()],
    )];
    if args.large {
        setups.push((
            "50k-generated".into(),
            ["--gms", "10", "--lms", "10", "--partition-size", "500"]
                .map(String::from)
                .to_vec(),
        ));
    }
    println!("seed: {}", args.seed);
    println!(
        "{:<18} {:<12} {:>8} {:>9} {:>12} {:>10} {:>10} {:>10}",
        "cluster", "scheduler", "tasks", "wall s", "tasks/s", "peak MiB", "p50 s", "p99 s"
    );
    for (name, cluster_args) in &setups {
        let mut megha_wall = None;
        for scheduler in &args.schedulers {
            let out = args.out.join(name).join(scheduler);
            let status = Command::new(&exe)
                .arg("simulate")
                .arg("--trace")
                .arg(&args.trace)
                .args(cluster_args)
                .args(["--scheduler", scheduler, "--quiet", "--seed"])
                .arg(args.seed.to_string())
                .arg("--out")
                .arg(&out)
                .stderr(std::process::Stdio::null())
                .status()
                .context("cannot start a simulation child process")?;
            if !status.success() {
                bail!("simulation {name}/{scheduler} failed ({status})");
            }
            let text = std::fs::read_to_string(out.join("summary.json"))?;
            let s: serde_json::Value = serde_json::from_str(&text)?;
            let wall = s["wall_time_s"].as_f64().unwrap_or(f64::NAN);
            let tasks = s["tasks"].as_f64().unwrap_or(f64::NAN);
            if scheduler == "megha" {
                megha_wall = Some(wall);
            }
            let ratio = megha_wall
                .filter(|_| scheduler != "megha")
                .map(|m| format!("  ({:.2}x megha's wall time)", wall / m))
                .unwrap_or_default();
            println!(
                "{:<18} {:<12} {:>8} {:>9.2} {:>12.0} {:>10.1} {:>10.4} {:>10.4}{}",
                name,
                scheduler,
                tasks,
                wall,
                tasks / wall,
                s["peak_rss_mb"].as_f64().unwrap_or(f64::NAN),
                s["allocation_s"]["p50"].as_f64().unwrap_or(f64::NAN),
                s["allocation_s"]["p99"].as_f64().unwrap_or(f64::NAN),
                ratio
            );
        }
    }
    Ok(())
}
