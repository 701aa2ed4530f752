//! The part of `loadgen calibrate` measured on the live system: a short embedded run
//! (`loadgen embedded`: every role in one process, actix mailboxes, real clocks) and
//! the costs read from its tasks' timestamps, which the probe's tight loops cannot
//! see: an actor's wake-up on a busy machine, the events every step publishes, the
//! worker actor's path to a started task.
//!
//! From `tasks.csv` (arrival, the GM's dispatch, the LM's launch, the worker's start):
//! - `submit_ns`: the median over jobs of arrival to dispatch (loadgen's message to
//!   the GM actor, its wake-up, the start of its pass: a core stamps its events with
//!   the time its step began);
//! - `gm_decision_ns` and `network_delay_ns`: dispatch to launch is the GM's whole
//!   pass, the batch's hop to the LM actor with its wake-up, and the LM's queuing. A
//!   line through its median per job size (1, 4, 16, 48 tasks): the slope is the GM
//!   actor's cost per task dispatched, and what it has beyond the probe's decision
//!   (the task's event, its request in a batch) is `gm_dispatch_ns` (a decision that
//!   places nothing costs only the probe's); the intercept less one LM batch is the
//!   hop;
//! - `worker_link_ns` and the worker's start: the LM -> worker link is charged one
//!   tight-loop mailbox hop, the rest of launch to start is the start, written as its
//!   median (`worker_start_ns`) and its distribution (`worker_start_quantiles_ns`,
//!   p0 to p100 by 5).

use anyhow::{bail, Context, Result};
use megha_sim::cli::validate;
use megha_sim::sim::CostModel;
use std::collections::BTreeMap;
use std::path::Path;

/// Quantiles of the launch to start written to the cost model: p0, p5, ..., p100.
const START_QUANTILES: u32 = 20;

/// Jobs of the calibration run (100 of each size).
const JOBS: u32 = 400;

/// Task sizes of the calibration jobs, in turn: passes of one to 48 decisions.
const JOB_SIZES: [u32; 4] = [1, 4, 16, 48];

/// Trace seconds between two calibration jobs. The run measures each job alone: the
/// previous one has ended (0.1 s tasks) and the roles are idle when it arrives. At
/// 0.1 s (a job every 2 ms at the speed-up of 50, 8,500 tasks/s) the roles of a busy
/// 2-core machine fell behind and arrival to dispatch measured their backlog: 5.4 ms
/// as `submit_ns` against 0.2-0.3 ms of arrival to launch in the validation runs
/// with room, which the model then predicted 20x too slow (KS 0.70 on 80 nodes).
const JOB_GAP_S: f64 = 1.0;

/// The seed of an embedded calibration run on the check's workload is `--seed` plus
/// this, so that it is none of the check's own runs (`--seed` up).
pub const CHECK_WORKLOAD_SEED_OFFSET: u64 = 1_000_000;

/// Runs the embedded calibration (reports under DIR/embedded-calibration) and sets
/// the costs it measures in `model`; `mailbox_ns` is the tight-loop actix hop.
/// `check`: replay the check's workload instead of the spaced jobs.
pub fn calibrate(
    dir: &Path,
    seed: u64,
    check: Option<&validate::ValidateArgs>,
    mailbox_ns: u64,
    model: &mut CostModel,
) -> Result<()> {
    let out = run(dir, seed)?;
    let tasks = read(&out)?;
    if tasks.is_empty() {
        bail!("the embedded run in {} started no task", out.display());
    }
    println!("{}", fit(&tasks, mailbox_ns, model));
    if let Some(check) = check {
        let out = run_check(dir, seed, check)?;
        let tasks = read(&out)?;
        if tasks.is_empty() {
            bail!("the embedded run in {} started no task", out.display());
        }
        println!("{}", refit_at_load(&tasks, mailbox_ns, model));
    }
    Ok(())
}

/// Sets the load-dependent costs (the submission, the hop, the worker's start) from
/// a run of the check's workload, keeping the per-task cost of the spaced run's fit
/// (a handful of jobs of mixed sizes does not pin a line): per task, the submission
/// is its arrival to dispatch, and the hop its dispatch to launch less its job's
/// pass (`gm_decision_ns + gm_dispatch_ns` per task of the job) and one LM batch;
/// medians over the tasks; the start's quantiles as [`fit`] takes them.
fn refit_at_load(tasks: &[Spans], mailbox_ns: u64, model: &mut CostModel) -> String {
    let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
    let mut sizes: BTreeMap<u64, f64> = BTreeMap::new();
    for t in tasks {
        *sizes.entry(t.job).or_default() += 1.0;
    }
    let per_task = (model.gm_decision_ns + model.gm_dispatch_ns) as f64 / 1e9;
    let batch = model.lm_batch_ns as f64 / 1e9;
    let mut submit: Vec<f64> = tasks.iter().map(|t| t.dispatch - t.arrival).collect();
    let mut hop: Vec<f64> = tasks
        .iter()
        .map(|t| t.launch - t.dispatch - per_task * sizes[&t.job] - batch)
        .collect();
    model.submit_ns = ns(median(&mut submit));
    let hop = ns(median(&mut hop)).max(mailbox_ns);
    model.network_delay_ns = Some(hop);
    set_starts(tasks, mailbox_ns, model);
    format!(
        "embedded run at the check's load: {} jobs, {} tasks; arrival to dispatch median {} ns \
         -> submit_ns; dispatch to launch less the pass and a batch, median -> network_delay_ns \
         {hop}; launch to start median -> worker_start_ns {}",
        sizes.len(),
        tasks.len(),
        model.submit_ns,
        model.worker_start_ns,
    )
}

/// The worker's start from `tasks`' launch to start: its median and quantiles less
/// the tight-loop hop (`worker_link_ns`); returns the launches to starts, sorted.
fn set_starts(tasks: &[Spans], mailbox_ns: u64, model: &mut CostModel) -> Vec<f64> {
    let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
    let mut starts: Vec<f64> = tasks.iter().map(|t| t.start - t.launch).collect();
    starts.sort_by(f64::total_cmp);
    model.worker_link_ns = Some(mailbox_ns);
    model.worker_start_ns = ns(validate::quantile(&starts, 0.5)).saturating_sub(mailbox_ns);
    model.worker_start_quantiles_ns = (0..=START_QUANTILES)
        .map(|k| {
            let s = match k {
                0 => starts[0],
                k => validate::quantile(&starts, f64::from(k) / f64::from(START_QUANTILES)),
            };
            ns(s).saturating_sub(mailbox_ns)
        })
        .collect();
    starts
}

/// Sets the costs the started `tasks` measure in `model` (see the module's text) and
/// says what it found.
fn fit(tasks: &[Spans], mailbox_ns: u64, model: &mut CostModel) -> String {
    let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
    // Per job: its tasks' arrival to dispatch and dispatch to launch.
    let mut jobs: BTreeMap<u64, Vec<&Spans>> = BTreeMap::new();
    for t in tasks {
        jobs.entry(t.job).or_default().push(t);
    }
    // The cores stamp an event with the time their step began: every task of a pass
    // is dispatched at the pass's start, every task of a batch launched at the
    // batch's. Dispatch to launch is the GM's whole pass, its batch's hop to the LM
    // and the LM's queuing: per job size, the median over jobs of their median, and
    // a line through those (slope: per decision; intercept: the hop).
    let mut by_size: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut submit = Vec::new();
    for spans in jobs.values() {
        let mut processing: Vec<f64> = spans.iter().map(|t| t.launch - t.dispatch).collect();
        by_size
            .entry(spans.len())
            .or_default()
            .push(median(&mut processing));
        let mut queuing: Vec<f64> = spans.iter().map(|t| t.dispatch - t.arrival).collect();
        submit.push(median(&mut queuing));
    }
    let points: Vec<(f64, f64)> = by_size
        .iter_mut()
        .map(|(n, ys)| (*n as f64, median(ys)))
        .collect();
    let (intercept, slope) = line(&points);
    let decision = ns(slope);
    model.gm_dispatch_ns = decision.saturating_sub(model.gm_decision_ns);
    model.submit_ns = ns(median(&mut submit));
    let hop = ns(intercept)
        .saturating_sub(model.lm_batch_ns)
        .max(mailbox_ns);
    model.network_delay_ns = Some(hop);
    let starts = set_starts(tasks, mailbox_ns, model);
    let sizes: Vec<String> = points
        .iter()
        .map(|(n, y)| format!("{n}: {} ns", ns(*y)))
        .collect();
    format!(
        "embedded run: {} jobs, {} tasks; arrival to dispatch median {} ns -> submit_ns; \
         dispatch to launch by job size ({}) -> per task dispatched {decision} ns \
         (gm_dispatch_ns {} more than the probe's decision), intercept {} ns -> \
         network_delay_ns {hop}; launch to start median {} ns, p90 {} ns -> \
         worker_start_ns {} (worker_link_ns {mailbox_ns})",
        jobs.len(),
        tasks.len(),
        model.submit_ns,
        sizes.join(", "),
        model.gm_dispatch_ns,
        ns(intercept),
        ns(validate::quantile(&starts, 0.5)),
        ns(validate::quantile(&starts, 0.9)),
        model.worker_start_ns,
    )
}

/// One started task's timestamps, seconds.
struct Spans {
    job: u64,
    arrival: f64,
    dispatch: f64,
    launch: f64,
    start: f64,
}

/// Least-squares line through `points`: (intercept, slope); a flat line through
/// their mean when the x are all the same.
fn line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len().max(1) as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return (my, 0.0);
    }
    let slope = sxy / sxx;
    (my - slope * mx, slope)
}

/// The median of `xs` (sorts them; 0 when empty).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

/// The embedded run: 400 jobs of 1, 4, 16, 48 tasks in turn (17 on average) of 0.1 s,
/// one every [`JOB_GAP_S`], on 2 GMs x 2 LMs x 20 one-core nodes (80: every job fits
/// at once), at the embedded mode's default speed-up (50: a job every 20 ms, 8 s).
fn run(dir: &Path, seed: u64) -> Result<std::path::PathBuf> {
    let dir = dir.join("embedded-calibration");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let trace = dir.join("trace.tr");
    let text: String = (0..JOBS)
        .map(|k| {
            let n = JOB_SIZES[k as usize % JOB_SIZES.len()];
            let durations = vec!["0.1"; n as usize].join(" ");
            format!("{:.3} {n} 0.1 {durations}\n", f64::from(k) * JOB_GAP_S)
        })
        .collect();
    std::fs::write(&trace, text).with_context(|| format!("cannot write {}", trace.display()))?;
    let exe = std::env::current_exe().context("cannot find the loadgen executable")?;
    let out = dir.join("embedded");
    let args = [
        "--trace",
        &trace.display().to_string(),
        "--gms",
        "2",
        "--lms",
        "2",
        "--partition-size",
        "20",
        "--seed",
        &seed.to_string(),
        "--quiet",
        "--out",
        &out.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    validate::child(&exe, "embedded", args)?;
    Ok(out)
}

/// The embedded run on the check's workload (its trace, speed-up, cluster,
/// heartbeat and publication interval), under its own seed; its reports go to
/// DIR/embedded-calibration/at-check-load, beside the spaced run's.
fn run_check(dir: &Path, seed: u64, check: &validate::ValidateArgs) -> Result<std::path::PathBuf> {
    let seed = seed
        .checked_add(CHECK_WORKLOAD_SEED_OFFSET)
        .context("--seed is too large for the check workload's own seed")?;
    println!("embedded calibration on the check's workload: seed {seed}");
    let out = dir.join("embedded-calibration").join("at-check-load");
    validate::embedded_run(check, &out, seed)?;
    Ok(out)
}

/// The started tasks of DIR/tasks.csv (dispatch = arrival + framework queuing).
fn read(dir: &Path) -> Result<Vec<Spans>> {
    Ok(validate::columns(
        dir,
        [
            "job",
            "arrival_s",
            "framework_queuing_s",
            "launch_s",
            "start_s",
        ],
    )?
    .into_iter()
    .map(|[job, arrival, queuing, launch, start]| Spans {
        job: job as u64,
        arrival,
        dispatch: arrival + queuing,
        launch,
        start,
    })
    .collect())
}

#[cfg(test)]
mod tests {
    use super::{fit, line, median, refit_at_load, Spans};
    use megha_sim::sim::CostModel;

    /// Jobs of 1, 4, 16, 48 tasks: submission 80 us, a hop of 60 us plus 1.5 us per
    /// task of the job (the GM's pass), starts of 100 + (0..10) x 10 us.
    fn tasks() -> Vec<Spans> {
        let mut out = Vec::new();
        for job in 0..40u64 {
            let n = [1, 4, 16, 48][job as usize % 4];
            let arrival = job as f64 * 0.01;
            let dispatch = arrival + 80e-6;
            let launch = dispatch + 60e-6 + 1.5e-6 * n as f64;
            for k in 0..n {
                out.push(Spans {
                    job,
                    arrival,
                    dispatch,
                    launch,
                    start: launch + 100e-6 + 10e-6 * ((job as usize + k) % 10) as f64,
                });
            }
        }
        out
    }

    #[test]
    fn the_fit_recovers_submission_hop_dispatch_and_starts() {
        let mut model = CostModel {
            gm_decision_ns: 300,
            lm_batch_ns: 1_000,
            ..CostModel::default()
        };
        let said = fit(&tasks(), 200, &mut model);
        assert_eq!(model.submit_ns, 80_000);
        // 1.5 us per task dispatched, 0.3 of it the probe's decision.
        assert_eq!(model.gm_dispatch_ns, 1_200);
        // The intercept (60 us) less one LM batch (1 us).
        assert_eq!(model.network_delay_ns, Some(59_000));
        assert_eq!(model.worker_link_ns, Some(200));
        let q = &model.worker_start_quantiles_ns;
        assert_eq!(q.len(), 21);
        assert_eq!((q[0], q[20]), (99_800, 189_800));
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(model.worker_start_ns, q[10]);
        assert!(said.contains("network_delay_ns 59000"), "{said}");
    }

    #[test]
    fn at_the_checks_load_the_hop_submission_and_starts_are_taken_again() {
        let mut model = CostModel {
            gm_decision_ns: 300,
            lm_batch_ns: 1_000,
            ..CostModel::default()
        };
        fit(&tasks(), 200, &mut model);
        // The same jobs at a load where every submission takes 150 us and every hop
        // 110 us more, and every start 50 us more.
        let busier: Vec<Spans> = tasks()
            .into_iter()
            .map(|t| Spans {
                dispatch: t.dispatch + 70e-6,
                launch: t.launch + 120e-6,
                start: t.start + 170e-6,
                ..t
            })
            .collect();
        let said = refit_at_load(&busier, 200, &mut model);
        assert_eq!(model.submit_ns, 150_000);
        // The pass (1.5 us per task of the job) and a batch (1 us) are taken out.
        assert_eq!(model.network_delay_ns, Some(109_000));
        assert_eq!(
            model.gm_dispatch_ns, 1_200,
            "the per-task cost stays the spaced run's"
        );
        let q = &model.worker_start_quantiles_ns;
        assert_eq!((q[0], q[20]), (149_800, 239_800));
        assert_eq!(model.worker_start_ns, q[10]);
        assert!(said.contains("network_delay_ns 109000"), "{said}");
    }

    #[test]
    fn the_line_recovers_intercept_and_slope() {
        let points: Vec<(f64, f64)> = [1.0, 4.0, 16.0, 48.0]
            .iter()
            .map(|&n| (n, 60e-6 + 0.5e-6 * n))
            .collect();
        let (a, b) = line(&points);
        assert!((a - 60e-6).abs() < 1e-12 && (b - 0.5e-6).abs() < 1e-12);
        assert_eq!(line(&[(4.0, 1.0), (4.0, 3.0)]), (2.0, 0.0));
    }

    #[test]
    fn median_is_the_upper_middle() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&mut []), 0.0);
    }
}
