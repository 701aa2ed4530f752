//! The numbers behind each figure, computed from runs (pure; the drawing is in
//! [`super::figures`]).

use super::runs::{Run, ShareRow};
use common::fairness::jain_index;
use std::collections::BTreeMap;

/// The four allocation-time components of Megha section III, in `tasks.csv` order.
pub const COMPONENTS: [&str; 4] = [
    "framework queuing",
    "processing",
    "worker queuing",
    "communication",
];

/// The empirical CDF of `values`: (value, fraction of values <= it), one point per
/// value, sorted.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    v.iter()
        .enumerate()
        .map(|(i, x)| (*x, (i + 1) as f64 / n))
        .collect()
}

/// Allocation times (ms) of the run's started tasks.
pub fn allocation_ms(run: &Run) -> Vec<f64> {
    run.tasks
        .iter()
        .filter_map(|t| t.allocation_s)
        .map(|s| s * 1000.0)
        .collect()
}

/// Mean of each component (ms) over the started tasks, `None` when no task has them.
pub fn component_means_ms(run: &Run) -> Option<[f64; 4]> {
    let rows: Vec<[f64; 4]> = run.tasks.iter().filter_map(|t| t.components_s).collect();
    if rows.is_empty() {
        return None;
    }
    let mut sum = [0.0; 4];
    for r in &rows {
        for (s, v) in sum.iter_mut().zip(r) {
            *s += v;
        }
    }
    Some(sum.map(|s| 1000.0 * s / rows.len() as f64))
}

/// Per time step over the run: (time s, tasks running, tasks arrived and not
/// finished: demand), `steps` evenly spaced samples from the first arrival to the
/// last finish.
pub fn load_over_time(run: &Run, steps: usize) -> Vec<(f64, f64, f64)> {
    let t0 = run
        .tasks
        .iter()
        .map(|t| t.arrival_s)
        .fold(f64::INFINITY, f64::min);
    let t1 = run
        .tasks
        .iter()
        .map(|t| t.finish_s.or(t.start_s).unwrap_or(t.arrival_s))
        .fold(f64::NEG_INFINITY, f64::max);
    if !t0.is_finite() || !t1.is_finite() || steps == 0 {
        return Vec::new();
    }
    // +1 at a start or arrival, -1 at a finish: a sweep over sorted changes.
    let mut running: Vec<(f64, f64)> = Vec::new();
    let mut demand: Vec<(f64, f64)> = Vec::new();
    for t in &run.tasks {
        demand.push((t.arrival_s, 1.0));
        if let Some(f) = t.finish_s {
            demand.push((f, -1.0));
        }
        if let Some(s) = t.start_s {
            running.push((s, 1.0));
            if let Some(f) = t.finish_s {
                running.push((f, -1.0));
            }
        }
    }
    let sweep = |mut changes: Vec<(f64, f64)>| -> Vec<f64> {
        changes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut level = 0.0;
        let mut next = 0;
        (0..=steps)
            .map(|i| {
                let at = t0 + (t1 - t0) * i as f64 / steps as f64;
                while next < changes.len() && changes[next].0 <= at {
                    level += changes[next].1;
                    next += 1;
                }
                level
            })
            .collect()
    };
    let (r, d) = (sweep(running), sweep(demand));
    (0..=steps)
        .map(|i| (t0 + (t1 - t0) * i as f64 / steps as f64, r[i], d[i]))
        .collect()
}

/// Per queue, its (window start s, used share) points and its entitled share.
pub fn shares_by_queue(rows: &[ShareRow]) -> BTreeMap<String, (f64, Vec<(f64, f64)>)> {
    let mut out: BTreeMap<String, (f64, Vec<(f64, f64)>)> = BTreeMap::new();
    for r in rows {
        let e = out
            .entry(r.queue.clone())
            .or_insert_with(|| (r.entitled, Vec::new()));
        e.1.push((r.window_start_s, r.used));
    }
    out
}

/// Jain's index of the queues' normalised shares (used / entitled) per window, over
/// the queues with some use in that window (1 when none has any).
pub fn jain_over_time(rows: &[ShareRow]) -> Vec<(f64, f64)> {
    let mut windows: BTreeMap<u64, (f64, Vec<f64>)> = BTreeMap::new();
    for r in rows {
        let w = windows
            .entry(r.window_start_s.to_bits())
            .or_insert_with(|| (r.window_start_s, Vec::new()));
        if r.used > 0.0 {
            w.1.push(r.normalised);
        }
    }
    let mut out: Vec<(f64, f64)> = windows
        .into_values()
        .map(|(t, xs)| (t, jain_index(&xs)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::super::runs::TaskRow;
    use super::*;

    fn task(arrival: f64, start: Option<f64>, finish: Option<f64>) -> TaskRow {
        TaskRow {
            arrival_s: arrival,
            start_s: start,
            finish_s: finish,
            allocation_s: start.map(|s| s - arrival),
            components_s: start.map(|_| [0.001, 0.002, 0.0, 0.004]),
        }
    }

    fn run(tasks: Vec<TaskRow>) -> Run {
        Run {
            label: "r".into(),
            dir: ".".into(),
            tasks,
            summary: None,
            shares: Vec::new(),
            lra: Vec::new(),
            jct_s: Vec::new(),
        }
    }

    #[test]
    fn the_cdf_reaches_one_at_the_largest_value() {
        assert_eq!(
            cdf(&[3.0, 1.0, 2.0, 2.0]),
            [(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]
        );
        assert!(cdf(&[]).is_empty());
    }

    #[test]
    fn load_counts_running_and_waiting_tasks() {
        let r = run(vec![
            task(0.0, Some(0.0), Some(10.0)),
            task(0.0, Some(5.0), Some(10.0)),
            task(0.0, None, None),
        ]);
        let load = load_over_time(&r, 10);
        assert_eq!(load.first(), Some(&(0.0, 1.0, 3.0)));
        assert_eq!(load[6], (6.0, 2.0, 3.0));
        assert_eq!(
            load.last(),
            Some(&(10.0, 0.0, 1.0)),
            "the unstarted task waits"
        );
        let means = component_means_ms(&r).expect("components");
        assert!((means[3] - 4.0).abs() < 1e-9);
    }

    #[test]
    fn jain_is_one_when_queues_get_their_shares_and_lower_otherwise() {
        let row = |t: f64, q: &str, used: f64| ShareRow {
            window_start_s: t,
            queue: q.into(),
            entitled: 0.5,
            used,
            normalised: used / 0.5,
        };
        let rows = [
            row(0.0, "a", 0.5),
            row(0.0, "b", 0.5),
            row(10.0, "a", 1.0),
            row(10.0, "b", 0.0),
            row(20.0, "a", 0.9),
            row(20.0, "b", 0.1),
        ];
        let j = jain_over_time(&rows);
        assert_eq!(j[0], (0.0, 1.0));
        assert_eq!(j[1], (10.0, 1.0), "one queue alone is not unfair");
        assert!(j[2].1 < 0.7, "{j:?}");
        assert_eq!(shares_by_queue(&rows)["b"].1.len(), 3);
    }
}
