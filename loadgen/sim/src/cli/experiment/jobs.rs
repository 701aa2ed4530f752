//! Job-level metrics of a simulated run: completion times (JCT), makespan, Jain's
//! fairness index over windows, and slowdowns against a baseline run.

use crate::sim::workload::Job;
use crate::sim::SimOutcome;
use common::Micros;
use std::collections::BTreeMap;

/// What one policy gave.
#[derive(Clone, Debug, Default)]
pub struct JobMetrics {
    /// Jobs whose every task finished (the others are counted, not timed).
    pub jobs_finished: usize,
    pub jobs_unfinished: usize,
    pub avg_jct_s: f64,
    pub p95_jct_s: f64,
    /// Last task end less first job arrival.
    pub makespan_s: f64,
    /// Jain's index of the jobs' mean CPU allocation while active, per window.
    pub jain_mean: f64,
    pub jain_min: f64,
    /// Share of jobs (finished under both) whose JCT is more than 1/0.8 of the
    /// baseline's (DRF's): JCT_drf / JCT < 0.8, the paper's "slowed by more than 0.8x".
    pub slowed_vs_drf: f64,
    pub wall_s: f64,
}

impl JobMetrics {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "jobs_finished": self.jobs_finished,
            "jobs_unfinished": self.jobs_unfinished,
            "avg_jct_s": self.avg_jct_s,
            "p95_jct_s": self.p95_jct_s,
            "makespan_s": self.makespan_s,
            "jain_mean": self.jain_mean,
            "jain_min": self.jain_min,
            "slowed_vs_drf": self.slowed_vs_drf,
            "wall_s": self.wall_s,
        })
    }
}

/// Per job: its completion time, if every task finished.
pub fn completion_times(jobs: &[Job], outcome: &SimOutcome) -> BTreeMap<u64, Option<f64>> {
    let mut last: BTreeMap<u64, Option<Micros>> =
        jobs.iter().map(|j| (j.id, Some(Micros::ZERO))).collect();
    for r in &outcome.records {
        if let Some(end) = last.get_mut(&r.job) {
            *end = match (*end, r.finish) {
                (Some(e), Some(f)) => Some(e.max(f)),
                _ => None,
            };
        }
    }
    jobs.iter()
        .map(|j| {
            let jct = last
                .get(&j.id)
                .copied()
                .flatten()
                .map(|end| end.0.saturating_sub(j.arrival.0) as f64 / 1e6);
            (j.id, jct)
        })
        .collect()
}

/// The completion times of one run's jobs, and what every experiment reads off them.
#[derive(Clone, Debug)]
pub struct Completions {
    /// Per job, its completion time in seconds (`None`: unfinished).
    pub jct: BTreeMap<u64, Option<f64>>,
    /// The finished jobs' completion times, sorted.
    pub done: Vec<f64>,
    /// Their mean and p95 (nearest rank); 0 when no job finished.
    pub mean: f64,
    pub p95: f64,
    /// The first arrival and the last task's end (the first arrival if none ended).
    pub first: Micros,
    pub last: Micros,
}

impl Completions {
    pub fn of(jobs: &[Job], outcome: &SimOutcome) -> Completions {
        let jct = completion_times(jobs, outcome);
        let mut done: Vec<f64> = jct.values().flatten().copied().collect();
        done.sort_by(f64::total_cmp);
        let mean = done.iter().sum::<f64>() / done.len().max(1) as f64;
        let p95 = done
            .get(((done.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0);
        let first = jobs.iter().map(|j| j.arrival).min().unwrap_or(Micros::ZERO);
        let last = (outcome.records.iter())
            .filter_map(|r| r.finish)
            .max()
            .unwrap_or(first);
        Completions {
            jct,
            done,
            mean,
            p95,
            first,
            last,
        }
    }
}

/// The metrics of `outcome`; `window` for Jain's index.
pub fn metrics(jobs: &[Job], outcome: &SimOutcome, window: Micros, cpu_total: f64) -> JobMetrics {
    let Completions {
        jct,
        done,
        mean,
        p95,
        first,
        last,
    } = Completions::of(jobs, outcome);
    let (jain_mean, jain_min) = jain(jobs, outcome, &jct, window, cpu_total);
    JobMetrics {
        jobs_finished: done.len(),
        jobs_unfinished: jct.len() - done.len(),
        avg_jct_s: mean,
        p95_jct_s: p95,
        makespan_s: last.0.saturating_sub(first.0) as f64 / 1e6,
        jain_mean,
        jain_min,
        ..JobMetrics::default()
    }
}

/// Jain's index per window over the jobs active in it (arrived, not finished): x_j =
/// the CPU job j held on average while active in the window, as a share of the
/// cluster. Windows with fewer than two active jobs are skipped. (mean, min).
fn jain(
    jobs: &[Job],
    outcome: &SimOutcome,
    jct: &BTreeMap<u64, Option<f64>>,
    window: Micros,
    cpu_total: f64,
) -> (f64, f64) {
    let w = window.0.max(1);
    let end_of = |j: &Job| {
        jct.get(&j.id)
            .copied()
            .flatten()
            .map_or(u64::MAX, |s| j.arrival.0 + (s * 1e6) as u64)
    };
    let span_end = outcome.span.0;
    let windows = span_end / w + 1;
    // Per window, per job: CPU-microseconds held.
    let mut held: Vec<BTreeMap<u64, f64>> = vec![BTreeMap::new(); windows as usize];
    for run in &outcome.runs {
        let (start, end) = (run.start.0, run.end.map_or(span_end, |e| e.0));
        let cpu = run.resources.cpu_millis as f64 / 1000.0;
        let mut t = start;
        while t < end {
            let k = t / w;
            let to = end.min((k + 1) * w);
            if let Some(m) = held.get_mut(k as usize) {
                *m.entry(run.task.job.0).or_default() += cpu * (to - t) as f64;
            }
            t = to;
        }
    }
    let mut indices = Vec::new();
    for (k, m) in held.iter().enumerate() {
        let (from, to) = (k as u64 * w, (k as u64 + 1) * w);
        let xs: Vec<f64> = jobs
            .iter()
            .filter_map(|j| {
                let (a, e) = (j.arrival.0.max(from), end_of(j).min(to));
                (a < e).then(|| m.get(&j.id).copied().unwrap_or(0.0) / (e - a) as f64 / cpu_total)
            })
            .collect();
        let (sum, sq) = xs.iter().fold((0.0, 0.0), |(s, q), x| (s + x, q + x * x));
        if xs.len() >= 2 && sq > 0.0 {
            indices.push(sum * sum / (xs.len() as f64 * sq));
        }
    }
    if indices.is_empty() {
        return (1.0, 1.0);
    }
    let mean = indices.iter().sum::<f64>() / indices.len() as f64;
    let min = indices.iter().copied().fold(f64::INFINITY, f64::min);
    (mean, min)
}

/// Share of jobs finished under both runs that `run` slowed by more than 0.8x
/// against `base` (JCT_base / JCT_run < 0.8).
pub fn slowed(base: &BTreeMap<u64, Option<f64>>, run: &BTreeMap<u64, Option<f64>>) -> f64 {
    let pairs: Vec<(f64, f64)> = base
        .iter()
        .filter_map(|(j, b)| Some(((*b)?, (*run.get(j)?)?)))
        .collect();
    let slow = pairs
        .iter()
        .filter(|(b, r)| *r > 0.0 && b / r < 0.8)
        .count();
    slow as f64 / pairs.len().max(1) as f64
}
