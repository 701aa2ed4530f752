//! `loadgen calibrate --validate FILE`: does the simulator predict the live system?
//! Replays one trace in embedded mode (every role in this process, actix mailboxes
//! for links, real clocks and timers), simulates the same trace on the same cluster
//! with the cost model in FILE and with the built-in defaults, and prints the
//! allocation-time percentiles of each and the two-sample Kolmogorov-Smirnov
//! distance of each run to the embedded run and to a second embedded run (the two
//! embedded runs' distance is the floor: how far apart the live system lands twice
//! on this machine), with the medians of arrival to launch and launch to start. The
//! simulations, each adding one thing to the last:
//! `sim-default` (built-in costs, state at heartbeats only: the simulator's
//! defaults), `sim-costs` (the model in FILE), `sim-costs-publish` (and LM state
//! published on change as the services do: `--lm-publish changes`, the embedded
//! LMs' minimum interval); `sim-median-start` is the last with the worker's start
//! cost fixed at its median instead of drawn from its distribution. All use the
//! embedded run's heartbeat. Every run is a child process (`loadgen embedded`,
//! `loadgen simulate`) writing its reports under `--check-out`. With `--check-runs
//! N`, N runs of each kind (the simulations under N seeds) are pooled before the
//! distances are taken, and the 5% critical distance of samples that size is printed
//! beside the floor.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Trace replayed in embedded mode and simulated (with --validate).
    #[arg(long, default_value = "data/traces/YH_small.tr", value_name = "FILE")]
    pub check_trace: PathBuf,
    /// Divide arrivals and durations by this factor in both runs (with --validate).
    #[arg(long, default_value_t = 50.0, value_name = "X")]
    pub check_speedup: f64,
    /// Cluster of both runs: GMs, LMs, nodes per partition (with --validate).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2,2,2",
        value_name = "G,L,P"
    )]
    pub check_cluster: Vec<usize>,
    /// LM heartbeat period of both runs, in ms (with --validate).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub check_heartbeat_ms: u64,
    /// Least time between two change-triggered LM state publications, ms, in the
    /// embedded run and the simulations (with --validate; the services' default).
    #[arg(long, default_value_t = 5, value_name = "MS")]
    pub check_publish_min_interval_ms: u64,
    /// Where the runs write their reports (with --validate).
    #[arg(long, default_value = "out/calibrate", value_name = "DIR")]
    pub check_out: PathBuf,
    /// Runs of each kind, pooled (with --validate): N embedded runs, N more
    /// (`embedded-again`), and each simulation under N seeds from --seed on, each in
    /// `<kind>/run-<i>`; the distances are between the pooled samples, so that the
    /// floor is less a matter of one draw (two samples of n tasks each differ by
    /// a KS distance above 1.36 x sqrt(2/n) only 5% of the time; printed).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub check_runs: u64,
}

/// The check's cluster (GMs, LMs, nodes per partition), refused unless three
/// positive numbers, and its speed-up, refused unless positive.
pub fn check_cluster(args: &ValidateArgs) -> Result<[usize; 3]> {
    let [g, l, p] = args.check_cluster[..] else {
        bail!("--check-cluster: expected G,L,P (three numbers)");
    };
    if g == 0 || l == 0 || p == 0 || args.check_speedup.is_nan() || args.check_speedup <= 0.0 {
        bail!("--check-cluster and --check-speedup must be positive");
    }
    Ok([g, l, p])
}

/// The arguments every run of the check takes: its trace and cluster, `seed`, and
/// `out` for its reports.
fn common_args(args: &ValidateArgs, [g, l, p]: [usize; 3], out: &Path, seed: u64) -> Vec<String> {
    vec![
        "--trace".into(),
        args.check_trace.display().to_string(),
        "--gms".into(),
        g.to_string(),
        "--lms".into(),
        l.to_string(),
        "--partition-size".into(),
        p.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--quiet".into(),
        "--out".into(),
        out.display().to_string(),
    ]
}

/// One live run of the check's workload (`loadgen embedded`: its trace, cluster,
/// speed-up, heartbeat and publication interval) under `seed`, its reports in
/// `out`: the check's own live runs, and `loadgen calibrate --embedded-workload
/// check`'s.
pub fn embedded_run(args: &ValidateArgs, out: &Path, seed: u64) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    let mut a = common_args(args, check_cluster(args)?, out, seed);
    a.extend([
        "--speedup".into(),
        args.check_speedup.to_string(),
        "--heartbeat-ms".into(),
        args.check_heartbeat_ms.to_string(),
        "--publish-min-interval-ms".into(),
        args.check_publish_min_interval_ms.to_string(),
    ]);
    child(&exe, "embedded", a)
}

pub fn run(costs: &Path, args: &ValidateArgs, seed: u64) -> Result<()> {
    crate::sim::CostModel::load(costs)?;
    let [g, l, p] = check_cluster(args)?;
    if args.check_runs == 0 || seed.checked_add(args.check_runs - 1).is_none() {
        bail!(
            "--check-runs must be at least 1, and --seed {seed} plus --check-runs {} must not pass {}",
            args.check_runs,
            u64::MAX
        );
    }
    let runs_n = args.check_runs;
    // One run's directory: `<kind>` alone, or `<kind>/run-<i>` when pooling.
    let run_dir = |name: &str, i: u64| match runs_n {
        1 => args.check_out.join(name),
        _ => args.check_out.join(name).join(format!("run-{i}")),
    };
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    let speedup = args.check_speedup.to_string();
    let common_args = |out: &Path, seed: u64| common_args(args, [g, l, p], out, seed);
    match runs_n {
        1 => println!("seed: {seed}"),
        n => println!(
            "seeds: {seed} to {} ({n} runs of each kind, pooled)",
            seed + n - 1
        ),
    }
    let mut runs = Vec::new();
    // The live system twice: the KS distance of the second run to the first is how
    // far two runs of the same system are apart on this machine (the floor for the
    // simulations' distances). Pooled, the two kinds alternate.
    let mut live = [Spans::default(), Spans::default()];
    for i in 0..runs_n {
        for (k, name) in ["embedded", "embedded-again"].iter().enumerate() {
            let dir = run_dir(name, i);
            embedded_run(args, &dir, seed)?;
            live[k].extend(Spans::read(&dir)?);
        }
    }
    let [first, again] = live;
    runs.push(("embedded".to_owned(), first));
    runs.push(("embedded-again".to_owned(), again));
    let heartbeat_s = (args.check_heartbeat_ms as f64 / 1000.0).to_string();
    let min_interval = args.check_publish_min_interval_ms.to_string();
    // The calibrated model with its start distribution replaced by its median: what
    // the distribution adds.
    let median_model = args.check_out.join("costs-median-start.toml");
    let mut median = crate::sim::CostModel::load(costs)?;
    median.worker_start_quantiles_ns.clear();
    std::fs::create_dir_all(&args.check_out)
        .with_context(|| format!("cannot create {}", args.check_out.display()))?;
    std::fs::write(
        &median_model,
        toml::to_string(&median).context("cannot serialise the cost model")?,
    )
    .with_context(|| format!("cannot write {}", median_model.display()))?;
    for (name, model, publish) in [
        ("sim-default", None, "heartbeat"),
        ("sim-costs", Some(costs), "heartbeat"),
        ("sim-costs-publish", Some(costs), "changes"),
        ("sim-median-start", Some(median_model.as_path()), "changes"),
    ] {
        let mut pooled = Spans::default();
        for i in 0..runs_n {
            let dir = run_dir(name, i);
            let mut a = common_args(&dir, seed + i);
            a.extend([
                "--lm-publish".into(),
                publish.into(),
                "--publish-min-interval-ms".into(),
                min_interval.clone(),
            ]);
            a.extend(
                [
                    "--speedup",
                    &speedup,
                    "--speedup-durations",
                    "--heartbeat-s",
                    &heartbeat_s,
                    "--constraints",
                    "none",
                ]
                .map(String::from),
            );
            if let Some(m) = model {
                a.extend(["--cost-model".into(), m.display().to_string()]);
            }
            child(&exe, "simulate", a)?;
            pooled.extend(Spans::read(&dir)?);
        }
        runs.push((name.to_owned(), pooled));
    }
    println!(
        "{:<18} {:>6} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>10} {:>10}",
        "run",
        "tasks",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "KS",
        "KS2",
        "a->l p50",
        "l->s p50"
    );
    let reference = runs[0].1.allocation.clone();
    let again = runs[1].1.allocation.clone();
    for (name, spans) in &runs {
        let xs = &spans.allocation;
        let mean = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        println!(
            "{:<18} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>7.3} {:>7.3} {:>10.3} {:>10.3}",
            name,
            xs.len(),
            mean * 1e3,
            quantile(xs, 0.5) * 1e3,
            quantile(xs, 0.9) * 1e3,
            quantile(xs, 0.99) * 1e3,
            ks_distance(&reference, xs),
            ks_distance(&again, xs),
            quantile(&spans.arrival_to_launch, 0.5) * 1e3,
            quantile(&spans.launch_to_start, 0.5) * 1e3,
        );
    }
    println!(
        "(KS: to embedded, KS2: to embedded-again; a->l: arrival to the LM's launch, l->s: \
         launch to the worker's start, medians in ms)"
    );
    let (n, m) = (reference.len() as f64, again.len() as f64);
    let noise = 1.36 * ((n + m) / (n * m).max(1.0)).sqrt();
    let floor = ks_distance(&reference, &again);
    if let Some((_, model)) = runs.iter().find(|(name, _)| name == "sim-costs-publish") {
        let worst =
            ks_distance(&reference, &model.allocation).max(ks_distance(&again, &model.allocation));
        println!(
            "floor (embedded to embedded-again) {floor:.3}; 5% critical distance of two samples of \
             one distribution this size {noise:.3}; sim-costs-publish worst {worst:.3}, {:.1}x the floor, \
             {:.1}x the critical distance",
            worst / floor.max(1e-9),
            worst / noise
        );
    }
    Ok(())
}

/// The spans of one run's started tasks (seconds, each sorted).
#[derive(Default)]
struct Spans {
    allocation: Vec<f64>,
    arrival_to_launch: Vec<f64>,
    launch_to_start: Vec<f64>,
}

impl Spans {
    /// Pools another run's spans into these.
    fn extend(&mut self, other: Spans) {
        for (mine, theirs) in [
            (&mut self.allocation, other.allocation),
            (&mut self.arrival_to_launch, other.arrival_to_launch),
            (&mut self.launch_to_start, other.launch_to_start),
        ] {
            mine.extend(theirs);
            mine.sort_by(f64::total_cmp);
        }
    }

    fn read(dir: &Path) -> Result<Spans> {
        Ok(Spans {
            allocation: allocations(dir)?,
            arrival_to_launch: arrival_to_launch(dir)?,
            launch_to_start: launch_to_start(dir)?,
        })
    }
}

pub fn child(exe: &Path, command: &str, args: Vec<String>) -> Result<()> {
    let status = Command::new(exe)
        .arg(command)
        .args(&args)
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot start `loadgen {command}`"))?;
    if !status.success() {
        bail!("`loadgen {command} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// The allocation times (seconds) of the started tasks in DIR/tasks.csv, sorted.
pub fn allocations(dir: &Path) -> Result<Vec<f64>> {
    let mut xs: Vec<f64> = columns(dir, ["allocation_s"])?
        .into_iter()
        .map(|[a]| a)
        .collect();
    xs.sort_by(f64::total_cmp);
    Ok(xs)
}

/// Launch to start (seconds: the LM's launch to the worker's start) of the started
/// tasks in DIR/tasks.csv, sorted.
pub fn launch_to_start(dir: &Path) -> Result<Vec<f64>> {
    let mut xs: Vec<f64> = columns(dir, ["launch_s", "start_s"])?
        .into_iter()
        .map(|[launch, start]| start - launch)
        .collect();
    xs.sort_by(f64::total_cmp);
    Ok(xs)
}

/// Arrival to launch (seconds: submission to the LM's launch) of the launched tasks
/// in DIR/tasks.csv, sorted.
pub fn arrival_to_launch(dir: &Path) -> Result<Vec<f64>> {
    let mut xs: Vec<f64> = columns(dir, ["arrival_s", "launch_s"])?
        .into_iter()
        .map(|[arrival, launch]| launch - arrival)
        .collect();
    xs.sort_by(f64::total_cmp);
    Ok(xs)
}

/// The rows of DIR/tasks.csv whose columns `names` all hold numbers.
pub fn columns<const N: usize>(dir: &Path, names: [&str; N]) -> Result<Vec<[f64; N]>> {
    let path = dir.join("tasks.csv");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let mut index = [0usize; N];
    for (slot, name) in index.iter_mut().zip(names) {
        let Some(col) = header.iter().position(|c| *c == name) else {
            bail!("{}: no {name} column", path.display());
        };
        *slot = col;
    }
    Ok(lines
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            let mut row = [0f64; N];
            for (x, &col) in row.iter_mut().zip(&index) {
                *x = fields.get(col)?.parse().ok()?;
            }
            Some(row)
        })
        .collect())
}

/// The q-quantile of sorted values (nearest rank); NaN when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Two-sample Kolmogorov-Smirnov distance of two sorted samples: the largest gap
/// between their empirical distribution functions (0 = same, 1 = disjoint).
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

#[cfg(test)]
mod tests {
    use super::{ks_distance, quantile, Spans};

    #[test]
    fn pooled_spans_hold_every_run_sorted() {
        let mut pooled = Spans::default();
        for (a, b) in [([0.3, 0.5], [0.2]), ([0.1, 0.4], [0.6])] {
            pooled.extend(Spans {
                allocation: a.to_vec(),
                arrival_to_launch: b.to_vec(),
                launch_to_start: vec![],
            });
        }
        assert_eq!(pooled.allocation, vec![0.1, 0.3, 0.4, 0.5]);
        assert_eq!(pooled.arrival_to_launch, vec![0.2, 0.6]);
    }

    #[test]
    fn no_runs_or_runs_past_the_last_seed_are_refused_before_any_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let costs = dir.path().join("costs.toml");
        let model = toml::to_string(&crate::sim::CostModel::default()).expect("toml");
        std::fs::write(&costs, model).expect("write");
        for (runs, seed) in [(0, 1), (2, u64::MAX)] {
            let args = super::ValidateArgs {
                check_trace: "data/traces/YH_small.tr".into(),
                check_speedup: 50.0,
                check_cluster: vec![2, 2, 2],
                check_heartbeat_ms: 1000,
                check_publish_min_interval_ms: 5,
                check_out: dir.path().join("out"),
                check_runs: runs,
            };
            let e = super::run(&costs, &args, seed).expect_err("refused");
            assert!(e.to_string().contains("--check-runs"), "{e}");
            assert!(!dir.path().join("out").exists(), "nothing ran");
        }
    }

    #[test]
    fn ks_distance_of_equal_samples_is_zero_and_of_disjoint_ones_is_one() {
        let a = [1.0, 2.0, 3.0];
        assert_eq!(ks_distance(&a, &a), 0.0);
        assert_eq!(ks_distance(&a, &[4.0, 5.0]), 1.0);
        // Half of b lies below all of a.
        assert!((ks_distance(&a, &[0.5, 2.5]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn quantile_is_nearest_rank() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&xs, 0.5), 2.0);
        assert_eq!(quantile(&xs, 0.99), 4.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
