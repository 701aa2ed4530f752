//! `loadgen experiment mercury`: Mercury (sections 5 and 7.4) in the simulator,
//! GUARANTEED against QUEUEABLE work on the same traces and cluster. Two workloads
//! committed in `data/traces/` (`mercury_short.tr`: jobs of ten 2 s tasks every
//! 0.16 s, 125 % of capacity; `mercury_mixed.tr`: per job 8 x 2 s + 2 x 50 s, one
//! job a second, 116 %) on 100 one-core nodes (2 GMs x 2 LMs x 25), under the
//! policies only-G, only-Q, 50%-Q and <10s-70%-Q, with Mercury's 3 s heartbeat and
//! Megha's 10 s. Writes DIR/summary.json (per workload and heartbeat, per policy:
//! task throughput, its gain over only-G, job latency, QUEUEABLE kills, shed and
//! promoted) and prints a table; each run's own reports go to
//! DIR/<workload>-hb<S>/<policy>/ (`loadgen report` reads them).

use crate::cli::simulate::{self, SimulateArgs};
use crate::sim::task_types::TaskTypes;
use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// The policies, in table order (only-G first: the gains are over it).
const POLICIES: [&str; 4] = ["only-g", "only-q", "hybrid:inf:0.5", "hybrid:10:0.7"];

/// The workloads: `data/traces/mercury_<name>.tr`.
const WORKLOADS: [&str; 2] = ["short", "mixed"];

#[derive(Args, Debug)]
pub struct MercuryArgs {
    /// Output directory (created if missing): summary.json, and each run's
    /// reports in <workload>-hb<S>/<policy>/.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Where mercury_short.tr and mercury_mixed.tr are.
    #[arg(long, default_value = "data/traces", value_name = "DIR")]
    pub traces: PathBuf,
    /// Heartbeats to run, seconds (Mercury's 3 s, Megha's 10 s).
    #[arg(long, value_delimiter = ',', default_values_t = [3.0, 10.0], value_name = "S,...")]
    pub heartbeat_s: Vec<f64>,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No table on stdout.
    #[arg(long)]
    pub quiet: bool,
    /// More `loadgen simulate` flags for every run, after `--` (e.g. `--
    /// --promote-after-s 1` or `-- --queueable-quota max:4`).
    #[arg(last = true, value_name = "SIMULATE FLAGS")]
    pub extra: Vec<String>,
}

/// `simulate`'s flags, parsed as `loadgen simulate` parses them.
#[derive(Parser, Debug)]
struct Simulate {
    #[command(flatten)]
    args: SimulateArgs,
}

pub fn run(args: MercuryArgs) -> Result<()> {
    if let Some(hb) = args
        .heartbeat_s
        .iter()
        .find(|h| !(h.is_finite() && **h > 0.0))
    {
        return Err(anyhow!("--heartbeat-s: {hb} is not a positive number"));
    }
    println!("seed: {}", args.seed);
    let mut runs = Map::new();
    for workload in WORKLOADS {
        for &hb in &args.heartbeat_s {
            let name = format!("{workload}-hb{hb}");
            let rows = run_one(&args, workload, hb, &name)?;
            if !args.quiet {
                print_rows(&name, &rows);
            }
            runs.insert(name, Value::Object(rows));
        }
    }
    let summary = json!({
        "seed": args.seed,
        "nodes": 100,
        "policies": POLICIES,
        "extra_flags": args.extra,
        "runs": runs,
    });
    let path = super::output::write_summary(&args.out, &summary)?;
    if !args.quiet {
        println!("written to {}", path.display());
    }
    Ok(())
}

/// Every policy on one workload at one heartbeat: (policy, figures) in table order.
fn run_one(args: &MercuryArgs, workload: &str, hb: f64, name: &str) -> Result<Map<String, Value>> {
    let dir = args.out.join(name);
    let trace = args.traces.join(format!("mercury_{workload}.tr"));
    let mut argv: Vec<String> = vec![
        "simulate".into(),
        "--trace".into(),
        trace.display().to_string(),
        "--gms".into(),
        "2".into(),
        "--lms".into(),
        "2".into(),
        "--partition-size".into(),
        "25".into(),
        "--constraints".into(),
        "none".into(),
        "--seed".into(),
        args.seed.to_string(),
        "--heartbeat-s".into(),
        hb.to_string(),
        "--task-types".into(),
        POLICIES.join(","),
        "--quiet".into(),
        "--out".into(),
        dir.display().to_string(),
    ];
    argv.extend(args.extra.iter().cloned());
    let parsed = Simulate::try_parse_from(&argv).map_err(|e| anyhow!("simulate flags: {e}"))?;
    eprintln!("{name}: {} policies", POLICIES.len());
    simulate::run(parsed.args)?;
    let mut rows = Map::new();
    let mut only_g = None;
    for policy in POLICIES {
        let types: TaskTypes = policy.parse().map_err(|e| anyhow!("{policy}: {e}"))?;
        let path = dir.join(types.dir_name()).join("summary.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let s: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let tasks_per_s = s["task_throughput_per_s"].as_f64().unwrap_or(0.0);
        let base = *only_g.get_or_insert(tasks_per_s);
        let gain = (base > 0.0).then(|| tasks_per_s / base - 1.0);
        rows.insert(
            policy.to_owned(),
            json!({
                "tasks_per_s": tasks_per_s,
                "gain_over_only_g": gain,
                "job_mean_s": s["job_latency_s"]["mean"],
                "job_p99_s": s["job_latency_s"]["p99"],
                "queueable_kills": s["queueable_kills"],
                "shed": s["shed"],
                "promoted": s["promoted"],
            }),
        );
    }
    Ok(rows)
}

fn print_rows(name: &str, rows: &Map<String, Value>) {
    println!("{name}");
    println!(
        "{:<16} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6} {:>8}",
        "policy", "tasks/s", "gain", "job mean s", "job p99 s", "Q kills", "shed", "promoted"
    );
    for policy in POLICIES {
        let Some(r) = rows.get(policy) else { continue };
        let num = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let count = |k: &str| {
            r[k].as_u64()
                .map_or_else(|| "-".to_owned(), |n| n.to_string())
        };
        let gain = r["gain_over_only_g"]
            .as_f64()
            .map_or_else(|| "-".to_owned(), |g| format!("{:+.1}%", g * 100.0));
        println!(
            "{:<16} {:>9.2} {:>9} {:>10.1} {:>10.1} {:>8} {:>6} {:>8}",
            policy,
            num("tasks_per_s"),
            gain,
            num("job_mean_s"),
            num("job_p99_s"),
            count("queueable_kills"),
            count("shed"),
            count("promoted")
        );
    }
}
