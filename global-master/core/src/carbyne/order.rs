//! The policies: the order in which the GM should try its runnable tasks.
//!
//! - DRF: progressive filling, the job with the least dominant share (running plus
//!   already ordered) gets its next task.
//! - Tetris: greedy packing against the free resources, largest alignment score
//!   (demand . free, both as fractions of the capacity) first.
//! - SJF: jobs by remaining critical path, shortest first.
//! - Carbyne (Pseudocode 1): INTERJOBSCHEDULER gives each job its DRF share A_k
//!   (closed form, water-filling over the jobs' wants); INTRAJOBSCHEDULER keeps in
//!   the share only the tasks that must start now ([`super::intra`]); the other
//!   runnable tasks, and whatever does not fit in a share, are leftover for
//!   LEFTOVERSCHEDULER: jobs with the least remaining work first (SRTF) as long as
//!   the free resources hold them, then the rest packed (Tetris).

use super::config::{JobOrder, OrderConfig};
use super::intra::reverse_pack;
use super::model::JobWork;
use common::{Resources, TaskId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The order in which to try the runnable tasks of `jobs` on a cluster of capacity
/// `total` with `free` unused (both as the GM's view has them). Every runnable task
/// appears once. [`JobOrder::Fifo`]: as given.
pub fn plan(
    jobs: &[JobWork],
    total: &Resources,
    free: &Resources,
    config: &OrderConfig,
) -> Vec<TaskId> {
    let all = |j: &JobWork| (0..j.runnable.len()).collect::<Vec<_>>();
    match config.order {
        JobOrder::Fifo => jobs
            .iter()
            .flat_map(|j| j.runnable.iter().map(|r| r.task))
            .collect(),
        JobOrder::Drf => drf(jobs, total, jobs.iter().map(all).collect()),
        JobOrder::Tetris => pack(jobs, total, *free, jobs.iter().map(all).collect()),
        JobOrder::Sjf => {
            let mut by_path: Vec<&JobWork> = jobs.iter().collect();
            by_path.sort_by_key(|j| (j.critical_path(), j.job));
            by_path
                .iter()
                .flat_map(|j| j.runnable.iter().map(|r| r.task))
                .collect()
        }
        JobOrder::Carbyne => carbyne(jobs, total, *free, config),
    }
}

/// DRF progressive filling over the tasks `pick[j]` of each job `j` (in that
/// order); ties by job id.
pub fn drf(jobs: &[JobWork], total: &Resources, pick: Vec<Vec<usize>>) -> Vec<TaskId> {
    let mut used: Vec<Resources> = jobs.iter().map(|j| j.used).collect();
    let mut next = vec![0usize; jobs.len()];
    let key = |r: &Resources| (r.dominant_share(total) * 1e12) as u64;
    let mut heap: BinaryHeap<Reverse<(u64, common::JobId, usize)>> = jobs
        .iter()
        .enumerate()
        .filter(|(j, _)| !pick[*j].is_empty())
        .map(|(j, job)| Reverse((key(&used[j]), job.job, j)))
        .collect();
    let mut out = Vec::with_capacity(pick.iter().map(Vec::len).sum());
    while let Some(Reverse((_, id, j))) = heap.pop() {
        let r = &jobs[j].runnable[pick[j][next[j]]];
        out.push(r.task);
        used[j] = used[j].add(&r.resources);
        next[j] += 1;
        if next[j] < pick[j].len() {
            heap.push(Reverse((key(&used[j]), id, j)));
        }
    }
    out
}

/// Tetris: greedy packing of the tasks `pick[j]` into `free`, by alignment score,
/// over the distinct demands (a stage's tasks share one); what no longer fits
/// follows, by score against the capacity.
pub fn pack(
    jobs: &[JobWork],
    total: &Resources,
    mut free: Resources,
    pick: Vec<Vec<usize>>,
) -> Vec<TaskId> {
    let frac = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let score = |d: &Resources, f: &Resources| {
        frac(d.cpu_millis, total.cpu_millis) * frac(f.cpu_millis, total.cpu_millis)
            + frac(d.memory_mb, total.memory_mb) * frac(f.memory_mb, total.memory_mb)
    };
    // Groups of tasks with one demand, each in job order.
    let mut groups: std::collections::BTreeMap<(u64, u64), std::collections::VecDeque<TaskId>> =
        Default::default();
    for (j, picked) in pick.iter().enumerate() {
        for &i in picked {
            let r = &jobs[j].runnable[i];
            groups
                .entry((r.resources.cpu_millis, r.resources.memory_mb))
                .or_default()
                .push_back(r.task);
        }
    }
    let mut out = Vec::new();
    loop {
        let best = groups
            .iter()
            .filter(|(_, tasks)| !tasks.is_empty())
            .map(|(&(c, m), _)| Resources::new(c, m))
            .filter(|d| free.fits(d))
            .max_by(|a, b| score(a, &free).total_cmp(&score(b, &free)));
        let Some(d) = best else { break };
        if let Some(t) = groups
            .get_mut(&(d.cpu_millis, d.memory_mb))
            .and_then(|g| g.pop_front())
        {
            out.push(t);
        }
        free = free.saturating_sub(&d);
    }
    let mut rest: Vec<(Resources, std::collections::VecDeque<TaskId>)> = groups
        .into_iter()
        .map(|((c, m), tasks)| (Resources::new(c, m), tasks))
        .collect();
    rest.sort_by(|a, b| score(&b.0, total).total_cmp(&score(&a.0, total)));
    out.extend(rest.into_iter().flat_map(|(_, tasks)| tasks));
    out
}

/// DRF shares in closed form: each job's want (what it runs plus its runnable
/// tasks' demands, as a dominant share) is met up to an equal level, the rest of
/// the capacity going on to the others (water-filling). Per job, the dominant share
/// it may hold.
pub fn drf_levels(jobs: &[JobWork], total: &Resources) -> Vec<f64> {
    let want: Vec<f64> = jobs
        .iter()
        .map(|j| {
            let runnable = j
                .runnable
                .iter()
                .fold(Resources::ZERO, |a, r| a.add(&r.resources));
            j.used.add(&runnable).dominant_share(total)
        })
        .collect();
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        want[a]
            .total_cmp(&want[b])
            .then(jobs[a].job.cmp(&jobs[b].job))
    });
    let mut left = 1.0f64;
    let mut levels = vec![0.0; jobs.len()];
    for (k, &j) in order.iter().enumerate() {
        let equal = left / (jobs.len() - k) as f64;
        levels[j] = want[j].min(equal);
        left = (left - levels[j]).max(0.0);
    }
    levels
}

/// Carbyne's three steps (Pseudocode 1, SCHEDULE).
fn carbyne(
    jobs: &[JobWork],
    total: &Resources,
    mut free: Resources,
    config: &OrderConfig,
) -> Vec<TaskId> {
    let all = |j: &JobWork| (0..j.runnable.len()).collect::<Vec<_>>();
    if !jobs.iter().any(|j| config.altruistic(j.job)) {
        // P(altruism) = 0: no job gives anything away, which is DRF.
        return drf(jobs, total, jobs.iter().map(all).collect());
    }
    let levels = drf_levels(jobs, total);
    let mut in_share: Vec<Vec<usize>> = Vec::with_capacity(jobs.len());
    let mut leftover: Vec<Vec<usize>> = Vec::with_capacity(jobs.len());
    for (job, level) in jobs.iter().zip(&levels) {
        // A_k: the job's share, in the shape of its demand.
        let share = total.scaled(*level);
        let must = match config.altruistic(job.job) {
            true => reverse_pack(job, &share).must_start,
            false => vec![true; job.runnable.len()],
        };
        let (mut keep, mut give) = (Vec::new(), Vec::new());
        let mut held = job.used;
        for (i, r) in job.runnable.iter().enumerate() {
            let after = held.add(&r.resources);
            if must[i] && (held.is_zero() || after.dominant_share(total) <= *level + 1e-9) {
                held = after;
                keep.push(i);
            } else {
                give.push(i);
            }
        }
        in_share.push(keep);
        leftover.push(give);
    }
    // INTERJOBSCHEDULER + INTRAJOBSCHEDULER: the tasks that must start, in DRF order.
    for (job, keep) in jobs.iter().zip(&in_share) {
        for &i in keep {
            free = free.saturating_sub(&job.runnable[i].resources);
        }
    }
    let mut out = drf(jobs, total, in_share);
    // LEFTOVERSCHEDULER, first SRTF while the free resources hold the tasks.
    let mut by_work: Vec<usize> = (0..jobs.len()).collect();
    let work: Vec<f64> = jobs.iter().map(|j| j.remaining_work(total)).collect();
    by_work.sort_by(|&a, &b| {
        work[a]
            .total_cmp(&work[b])
            .then(jobs[a].job.cmp(&jobs[b].job))
    });
    let mut rest: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    for j in by_work {
        for &i in &leftover[j] {
            let r = &jobs[j].runnable[i];
            if free.fits(&r.resources) {
                free = free.saturating_sub(&r.resources);
                out.push(r.task);
            } else {
                rest[j].push(i);
            }
        }
    }
    // ... then packing for what is left.
    out.extend(pack(jobs, total, free, rest));
    out
}
