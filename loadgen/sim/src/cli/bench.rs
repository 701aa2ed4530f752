//! `loadgen bench`: how fast the simulator runs at data-center scale. Each run is a
//! child process (`loadgen simulate`) so that peak memory is measured per run; the
//! figures come from its `summary.json`. Prints figures; asserts nothing.
//!
//! Series (`--series`, comma-separated):
//! - `yh1`: YH1_sub (Megha) on 10,000 nodes (the Megha cluster config), 50,000
//!   (generated, 10 GMs x 10 LMs x 500), and overloaded on 1,000 and 2,000 nodes
//!   (5 GMs x 5 LMs x 40 or 80).
//! - `overload`: the generated overloaded trace (`bench-wake`'s shape, about three
//!   times what the cluster runs) at 10^4, 10^5 and 10^6 tasks on 50,000 nodes, the
//!   arrival rate scaled with the cluster; ratios to the first size show growth.
//! - `schedulers`: YH1_sub under Megha, Sparrow and the centralized baseline on
//!   10,000 and 50,000 nodes.
//!
//! The `yh1` and `overload` series run under each wake rule of `--wake` (default
//! both: `indexed`, ours, and `all`, the peer's: every blocked task retried at every
//! gain), side by side; the overload growth is given per rule. The last lines say
//! which targets of docs/simulator-performance.md hold (with `--baseline`, also
//! whether the peer's rule costs at most a fifth of the baseline's CPU on the
//! overloaded runs).
//!
//! `--baseline EXE` also runs every simulation with another `loadgen` build (an
//! earlier commit, say) right before this one's, prints the ratios of wall time (and
//! instructions) and says whether the two `tasks.csv` are byte-identical: the check
//! that a speed-up changed no result. `--repeat N` runs each N times (alternating
//! with the baseline) and keeps the least wall time, which damps a shared machine's
//! noise.
//!
//! `--instructions` runs each simulation a second time under
//! `valgrind --tool=callgrind` and prints its instruction count, a figure that does
//! not depend on the machine's load (perf counters are not available in VMs).

use super::bench_targets::{self, MeasuredRun};
use super::bench_wake::write_overload_trace_every;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Trace to simulate.
    #[arg(long, default_value = "data/traces/YH1_sub.tr")]
    pub trace: PathBuf,
    /// The 10,000-node Megha cluster config.
    #[arg(long, default_value = "data/clusters/megha_config_G5L5S10000_C.json")]
    pub cluster: PathBuf,
    /// Series to run: yh1, overload, schedulers (see `loadgen bench --help`).
    #[arg(long, value_delimiter = ',', default_value = "yh1,overload")]
    pub series: Vec<String>,
    /// Task counts of the overload series (jobs of 250 tasks).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,100000,1000000",
        value_name = "N"
    )]
    pub overload_tasks: Vec<u64>,
    /// Nodes of the overload series (10 GMs x 10 LMs, a multiple of 100).
    #[arg(long, default_value_t = 50_000, value_name = "NODES")]
    pub overload_nodes: usize,
    /// Schedulers of the `schedulers` series.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "megha,sparrow,centralized"
    )]
    pub schedulers: Vec<String>,
    /// Also count instructions under `valgrind --tool=callgrind` (slow: about 50x).
    #[arg(long)]
    pub instructions: bool,
    /// Where the runs write their reports (and the generated traces).
    #[arg(long, default_value = "out/bench")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Another loadgen executable (an earlier build) to run every simulation with
    /// as well: prints its figures, the ratios, and whether tasks.csv is identical.
    #[arg(long, value_name = "EXE")]
    pub baseline: Option<PathBuf>,
    /// Runs per simulation (alternating with the baseline); the least wall time is
    /// kept.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Wake rules the yh1 and overload series run under: indexed (ours, the
    /// default) and all (the peer's).
    #[arg(long, value_delimiter = ',', default_value = "indexed,all", value_parser = ["indexed", "all"])]
    pub wake: Vec<String>,
}

/// One simulation to measure.
struct Run {
    pub name: String,
    pub scheduler: String,
    pub args: Vec<String>,
    /// The wake rule (`--wake`), if the run sets one.
    pub wake: Option<String>,
}

/// What a run measured.
#[derive(Clone, Debug)]
struct Figures {
    pub tasks: f64,
    pub wall: f64,
    pub cpu: f64,
    pub peak_mib: f64,
    pub p50: f64,
    pub p99: f64,
    pub instructions: Option<u64>,
}

fn generated(gms: usize, lms: usize, partition: usize) -> Vec<String> {
    [
        "--gms".to_owned(),
        gms.to_string(),
        "--lms".into(),
        lms.to_string(),
        "--partition-size".into(),
        partition.to_string(),
    ]
    .to_vec()
}

pub fn run(args: BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    println!("seed: {}", args.seed);
    let mut measured = Vec::new();
    for series in &args.series {
        let runs = match series.as_str() {
            "yh1" => yh1_series(&args)?,
            "overload" => overload_series(&args)?,
            "schedulers" => scheduler_series(&args)?,
            other => {
                bail!("--series: unknown series {other:?}; expected yh1, overload or schedulers")
            }
        };
        let runs = match series.as_str() {
            "yh1" | "overload" => with_rules(runs, &args.wake),
            _ => runs,
        };
        println!("\n== {series}");
        println!(
            "{:<22} {:<12} {:<8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>15}",
            "run",
            "scheduler",
            "wake",
            "tasks",
            "wall s",
            "cpu s",
            "peak MiB",
            "p50 s",
            "p99 s",
            "instructions"
        );
        // The first run of each rule (the overload growth is per rule).
        let mut firsts: Vec<(Option<String>, Figures)> = Vec::new();
        for run in &runs {
            let (f, base) = measure_pair(&exe, run, &args)?;
            let first = firsts.iter().find(|(w, _)| *w == run.wake).map(|(_, f)| f);
            let ratio = match (first, series.as_str()) {
                (Some(b), "overload") => format!(
                    "  x{:.0} tasks: x{:.1} wall, x{:.1} cpu, x{:.1} memory{}",
                    f.tasks / b.tasks,
                    f.wall / b.wall,
                    f.cpu / b.cpu,
                    f.peak_mib / b.peak_mib,
                    match (f.instructions, b.instructions) {
                        (Some(a), Some(b)) => format!(", x{:.1} instructions", a as f64 / b as f64),
                        _ => String::new(),
                    }
                ),
                _ => String::new(),
            };
            println!(
                "{:<22} {:<12} {:<8} {:>8} {:>8.2} {:>8.2} {:>9.0} {:>9.3} {:>9.3} {:>15}{}",
                run.name,
                run.scheduler,
                run.wake.as_deref().unwrap_or("-"),
                f.tasks,
                f.wall,
                f.cpu,
                f.peak_mib,
                f.p50,
                f.p99,
                f.instructions.map_or("-".to_owned(), |i| i.to_string()),
                ratio
            );
            if let Some(b) = &base {
                println!("{}", versus_baseline(run, &f, b, &args.out)?);
            }
            measured.push(MeasuredRun {
                series: series.clone(),
                name: run.name.clone(),
                wake: run.wake.clone(),
                tasks: f.tasks,
                wall: f.wall,
                cpu: f.cpu,
                peak_mib: f.peak_mib,
                baseline_cpu: base.as_ref().map(|b| b.cpu),
            });
            if first.is_none() {
                firsts.push((run.wake.clone(), f));
            }
        }
    }
    println!("\n== targets");
    for line in bench_targets::report(&measured) {
        println!("{line}");
    }
    Ok(())
}

/// Each run once per wake rule (its output in a directory of its own).
fn with_rules(runs: Vec<Run>, rules: &[String]) -> Vec<Run> {
    runs.into_iter()
        .flat_map(|run| {
            rules.iter().map(move |rule| Run {
                name: format!("{}/{rule}", run.name),
                scheduler: run.scheduler.clone(),
                args: run
                    .args
                    .iter()
                    .cloned()
                    .chain(["--wake".to_owned(), rule.clone()])
                    .collect(),
                wake: Some(rule.clone()),
            })
        })
        .collect()
}

/// Runs `run` `--repeat` times with this build (after the baseline's run each time,
/// if any) and keeps the least wall time of each.
fn measure_pair(exe: &Path, run: &Run, args: &BenchArgs) -> Result<(Figures, Option<Figures>)> {
    let mut best: Option<Figures> = None;
    let mut best_base: Option<Figures> = None;
    for i in 0..args.repeat {
        // Instructions do not depend on the machine: counted on the first round only.
        let count = args.instructions && i == 0;
        if let Some(baseline) = &args.baseline {
            let b = measure(baseline, run, args, "-baseline", count)?;
            best_base = Some(least_wall(best_base, b));
        }
        let f = measure(exe, run, args, "", count)?;
        best = Some(least_wall(best, f));
    }
    Ok((best.context("--repeat is at least 1")?, best_base))
}

fn least_wall(kept: Option<Figures>, new: Figures) -> Figures {
    match kept {
        Some(k) if k.wall <= new.wall => Figures {
            instructions: k.instructions.or(new.instructions),
            ..k
        },
        Some(k) => Figures {
            instructions: new.instructions.or(k.instructions),
            ..new
        },
        None => new,
    }
}

/// The line comparing a run with its baseline: ratios, and whether the per-task
/// results are byte-identical (and if not, the first line that differs).
fn versus_baseline(run: &Run, f: &Figures, b: &Figures, out: &Path) -> Result<String> {
    let dir = out.join(&run.name);
    let ours = dir.join(&run.scheduler).join("tasks.csv");
    let theirs = dir
        .join(format!("{}-baseline", run.scheduler))
        .join("tasks.csv");
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    let (a, z) = (read(&ours)?, read(&theirs)?);
    let same = if a == z {
        "tasks.csv identical".to_owned()
    } else {
        let line = a
            .split(|&c| c == b'\n')
            .zip(z.split(|&c| c == b'\n'))
            .position(|(x, y)| x != y)
            .map_or_else(|| "their lengths".to_owned(), |i| format!("line {}", i + 1));
        format!("tasks.csv DIFFERS from the baseline's (first at {line})")
    };
    let instructions = match (f.instructions, b.instructions) {
        (Some(x), Some(y)) => format!(", x{:.3} instructions", x as f64 / y as f64),
        _ => String::new(),
    };
    Ok(format!(
        "{:<22} {:<12} baseline {:.2} s -> {:.2} s: x{:.3} wall, x{:.3} cpu, x{:.2} memory{instructions}; {same}",
        "",
        "",
        b.wall,
        f.wall,
        f.wall / b.wall,
        f.cpu / b.cpu,
        f.peak_mib / b.peak_mib
    ))
}

fn trace_args(args: &BenchArgs) -> Result<Vec<String>> {
    if !args.trace.exists() {
        bail!(
            "trace {} not found (run from the repository root or give --trace)",
            args.trace.display()
        );
    }
    Ok(vec!["--trace".into(), args.trace.display().to_string()])
}

fn megha_config(args: &BenchArgs) -> Result<Vec<String>> {
    if !args.cluster.exists() {
        bail!(
            "cluster {} not found (run from the repository root or give --cluster)",
            args.cluster.display()
        );
    }
    Ok(vec!["--cluster".into(), args.cluster.display().to_string()])
}

fn yh1_series(args: &BenchArgs) -> Result<Vec<Run>> {
    let trace = trace_args(args)?;
    let with = |cluster: Vec<String>| trace.iter().cloned().chain(cluster).collect();
    Ok(vec![
        Run {
            name: "yh1-10k".into(),
            scheduler: "megha".into(),
            args: with(megha_config(args)?),
            wake: None,
        },
        Run {
            name: "yh1-50k".into(),
            scheduler: "megha".into(),
            args: with(generated(10, 10, 500)),
            wake: None,
        },
        Run {
            name: "yh1-1k-overloaded".into(),
            scheduler: "megha".into(),
            args: with(generated(5, 5, 40)),
            wake: None,
        },
        Run {
            name: "yh1-2k-overloaded".into(),
            scheduler: "megha".into(),
            args: with(generated(5, 5, 80)),
            wake: None,
        },
    ])
}

fn overload_series(args: &BenchArgs) -> Result<Vec<Run>> {
    let n = args.overload_nodes;
    if n < 100 || !n.is_multiple_of(100) {
        bail!("--overload-nodes {n}: must be a positive multiple of 100");
    }
    // bench-wake's shape: 250 tasks every 0.5 s overload 10,000 nodes about three
    // times; a larger cluster gets proportionally more frequent jobs.
    let every_s = 0.5 * 10_000.0 / n as f64;
    let mut runs = Vec::new();
    for &tasks in &args.overload_tasks {
        let path = args.out.join(format!("overload-{tasks}-{n}.tr"));
        write_overload_trace_every(&path, tasks, every_s, args.seed)?;
        let mut a = vec!["--trace".into(), path.display().to_string()];
        a.extend(generated(10, 10, n / 100));
        runs.push(Run {
            name: format!("overload-{tasks}-{}k", n / 1000),
            scheduler: "megha".into(),
            args: a,
            wake: None,
        });
    }
    Ok(runs)
}

fn scheduler_series(args: &BenchArgs) -> Result<Vec<Run>> {
    let trace = trace_args(args)?;
    let mut runs = Vec::new();
    for (name, cluster) in [
        ("yh1-10k", megha_config(args)?),
        ("yh1-50k", generated(10, 10, 500)),
    ] {
        for scheduler in &args.schedulers {
            runs.push(Run {
                name: name.into(),
                scheduler: scheduler.clone(),
                args: trace
                    .iter()
                    .cloned()
                    .chain(cluster.iter().cloned())
                    .collect(),
                wake: None,
            });
        }
    }
    Ok(runs)
}

fn simulate(exe: &Path, run: &Run, out: &Path, seed: u64) -> Command {
    let mut c = Command::new(exe);
    c.arg("simulate")
        .args(&run.args)
        .args(["--scheduler", &run.scheduler, "--quiet", "--seed"])
        .arg(seed.to_string())
        .arg("--out")
        .arg(out)
        .stderr(std::process::Stdio::null());
    c
}

/// One run of `exe` (this build, or the baseline with `suffix` "-baseline" on its
/// output directory).
fn measure(exe: &Path, run: &Run, args: &BenchArgs, suffix: &str, count: bool) -> Result<Figures> {
    let out = args
        .out
        .join(&run.name)
        .join(format!("{}{suffix}", run.scheduler));
    let status = simulate(exe, run, &out, args.seed)
        .status()
        .with_context(|| {
            format!(
                "cannot start {} (a simulation child process)",
                exe.display()
            )
        })?;
    if !status.success() {
        bail!(
            "simulation {}/{} failed ({status})",
            run.name,
            run.scheduler
        );
    }
    let path = out.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let s: serde_json::Value = serde_json::from_str(&text)?;
    let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
    let instructions = if count {
        Some(callgrind(exe, run, &out, args.seed)?)
    } else {
        None
    };
    Ok(Figures {
        tasks: f("tasks"),
        wall: f("wall_time_s"),
        cpu: f("cpu_time_s"),
        peak_mib: f("peak_rss_mb"),
        p50: s["allocation_s"]["p50"].as_f64().unwrap_or(f64::NAN),
        p99: s["allocation_s"]["p99"].as_f64().unwrap_or(f64::NAN),
        instructions,
    })
}

/// Instructions of the run under `valgrind --tool=callgrind` (its "Collected" line).
fn callgrind(exe: &Path, run: &Run, out: &Path, seed: u64) -> Result<u64> {
    let log = out.join("callgrind.log");
    let inner = simulate(exe, run, &out.join("callgrind"), seed);
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(format!("--log-file={}", log.display()))
        .arg(inner.get_program())
        .args(inner.get_args())
        .stdout(std::process::Stdio::null())
        .status()
        .context("--instructions needs valgrind (apt-get install valgrind)")?;
    if !output.success() {
        bail!("valgrind run of {} failed ({output})", run.name);
    }
    let text =
        std::fs::read_to_string(&log).with_context(|| format!("cannot read {}", log.display()))?;
    text.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("no instruction count in {}", log.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(wall: f64) -> Figures {
        Figures {
            tasks: 2.0,
            wall,
            cpu: wall,
            peak_mib: 10.0,
            p50: 0.0,
            p99: 0.0,
            instructions: None,
        }
    }

    #[test]
    fn the_baseline_line_says_whether_tasks_csv_is_identical() {
        let out = tempfile::tempdir().expect("a temporary directory");
        let run = Run {
            name: "r".into(),
            scheduler: "megha".into(),
            args: Vec::new(),
            wake: None,
        };
        let write = |dir: &str, text: &str| {
            let d = out.path().join("r").join(dir);
            std::fs::create_dir_all(&d).expect("create the run directory");
            std::fs::write(d.join("tasks.csv"), text).expect("write tasks.csv");
        };
        write("megha", "h\n1\n2\n");
        write("megha-baseline", "h\n1\n2\n");
        let line = versus_baseline(&run, &figures(1.0), &figures(2.0), out.path())
            .expect("both files exist");
        assert!(
            line.contains("x0.500 wall") && line.ends_with("tasks.csv identical"),
            "{line}"
        );
        write("megha-baseline", "h\n1\n3\n");
        let line = versus_baseline(&run, &figures(1.0), &figures(2.0), out.path())
            .expect("both files exist");
        assert!(
            line.ends_with("DIFFERS from the baseline's (first at line 3)"),
            "{line}"
        );
        std::fs::remove_file(out.path().join("r/megha/tasks.csv")).expect("remove");
        let err = versus_baseline(&run, &figures(1.0), &figures(2.0), out.path())
            .expect_err("a missing tasks.csv is an error");
        assert!(format!("{err:#}").contains("cannot read"), "{err:#}");
    }
}
