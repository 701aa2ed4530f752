//! The Sparrow baseline on the same inputs: distributed schedulers (one per GM of the
//! cluster), batch sampling of `probe_ratio x n` workers per job (among the workers
//! that satisfy the tasks' constraints), reservations queued at workers, and late
//! binding: a worker with room for the head reservation asks the scheduler for a task,
//! which hands out the next unlaunched one (or nothing when all have launched).

use super::events::EventQueue;
use super::ledger::{Decision, TaskRecord};
use super::workload::Job;
use super::{CostModel, Progress, SimConfig, SimOutcome};
use common::cluster::ClusterSpec;
use common::rng::{seeded, streams, Rng, SeededRng};
use common::{ConstraintSet, Micros, NodeId, Resources};
use std::collections::{HashMap, HashSet, VecDeque};

/// When the probe of a reservation left the scheduler and reached the worker.
#[derive(Clone, Copy)]
struct Reservation {
    job: usize,
    group: usize,
    need: Resources,
    /// When the scheduler started handling the job, sent the probes, and the probe
    /// reached the worker.
    handled: Micros,
    sent: Micros,
    arrived: Micros,
}

enum Ev {
    JobArrival(usize),
    Probe(usize, Reservation),
    /// Worker -> scheduler: (worker, reservation, time the worker asked).
    GetTask(usize, Reservation, Micros),
    /// Scheduler -> worker: the record index of the task to run, if any.
    Reply(usize, Reservation, Option<usize>),
    Finish(usize, usize),
}

struct SparrowWorker {
    constraints: ConstraintSet,
    capacity: Resources,
    free: Resources,
    reservations: VecDeque<Reservation>,
}

/// One job's tasks grouped by (constraints, resources): each group is probed apart.
struct Group {
    constraints: ConstraintSet,
    need: Resources,
    unlaunched: VecDeque<usize>,
}

pub fn simulate(
    cluster: &ClusterSpec,
    jobs: &[Job],
    config: &SimConfig,
    progress: Progress<'_>,
) -> SimOutcome {
    let mut workers: Vec<SparrowWorker> = cluster
        .lms
        .iter()
        .flat_map(|lm| lm.nodes().map(|(_, _, n)| *n))
        .map(|n| SparrowWorker {
            constraints: n.constraints,
            capacity: n.capacity,
            free: n.capacity,
            reservations: VecDeque::new(),
        })
        .collect();
    let schedulers = (cluster.gms as usize).max(1);
    let mut sched_busy = vec![Micros::ZERO; schedulers];
    let mut rng = seeded(config.seed, streams::SPARROW);
    let mut eligible_cache: HashMap<(ConstraintSet, Resources), Vec<u32>> = HashMap::new();
    let mut records = Vec::new();
    let mut job_groups: Vec<Vec<Group>> = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut groups: Vec<Group> = Vec::new();
        for t in &job.tasks {
            let idx = records.len();
            records.push(TaskRecord::new(job.id, t.id.index, job.arrival));
            match groups
                .iter_mut()
                .find(|g| g.constraints == t.constraints && g.need == t.resources)
            {
                Some(g) => g.unlaunched.push_back(idx),
                None => groups.push(Group {
                    constraints: t.constraints,
                    need: t.resources,
                    unlaunched: VecDeque::from([idx]),
                }),
            }
        }
        job_groups.push(groups);
    }
    let durations: Vec<Micros> = jobs
        .iter()
        .flat_map(|j| j.tasks.iter().map(|t| t.duration))
        .collect();
    let needs: Vec<Resources> = jobs
        .iter()
        .flat_map(|j| j.tasks.iter().map(|t| t.resources))
        .collect();
    let total = records.len() as u64;
    let delay = config.network_delay;
    let cost = CostModel::micros(config.costs.sparrow_probe_ns);
    let mut queue = EventQueue::default();
    for (k, job) in jobs.iter().enumerate() {
        queue.push(job.arrival, Ev::JobArrival(k));
    }
    let mut done = 0u64;
    let mut counters = super::SimCounters::default();
    let mut last_report = 0;
    // Sparrow has no periodic events: the queue empties once every task has finished
    // and every leftover reservation was cancelled by late binding.
    let mut span = Micros::ZERO;
    while let Some((now, ev)) = queue.pop() {
        if done < total {
            span = now;
        }
        counters.events += 1;
        match ev {
            Ev::JobArrival(k) => {
                let s = k % schedulers;
                let start = now.max(sched_busy[s]);
                for (gi, group) in job_groups[k].iter().enumerate() {
                    let eligible = eligible_cache
                        .entry((group.constraints, group.need))
                        .or_insert_with(|| {
                            eligible_workers(&workers, group.constraints, group.need)
                        });
                    if eligible.is_empty() {
                        for &idx in &group.unlaunched {
                            records[idx].decision = Decision::Unplaceable;
                            done += 1;
                        }
                        continue;
                    }
                    let probes = config.probe_ratio.max(1) * group.unlaunched.len();
                    let targets = sample(&mut rng, eligible, probes);
                    let sent = start + Micros(cost.0 * probes as u64);
                    counters.probes += probes as u64;
                    for w in targets {
                        let r = Reservation {
                            job: k,
                            group: gi,
                            need: group.need,
                            handled: start,
                            sent,
                            arrived: sent + delay,
                        };
                        queue.push(sent + delay, Ev::Probe(w as usize, r));
                    }
                    sched_busy[s] = sent;
                }
                // Groups with no eligible worker are dropped above; drop them from the job.
                for group in &mut job_groups[k] {
                    if eligible_cache
                        .get(&(group.constraints, group.need))
                        .is_some_and(|e| e.is_empty())
                    {
                        group.unlaunched.clear();
                    }
                }
            }
            Ev::Probe(w, r) => {
                workers[w].reservations.push_back(r);
                serve(&mut workers[w], w, now, delay, &mut queue);
            }
            Ev::GetTask(w, r, asked) => {
                let s = r.job % schedulers;
                let start = now.max(sched_busy[s]);
                let end = start + cost;
                sched_busy[s] = end;
                let group = &mut job_groups[r.job][r.group];
                let task = group.unlaunched.pop_front();
                if let Some(idx) = task {
                    // Retrace the task's life so far, in order.
                    let rec = &mut records[idx];
                    rec.queued_until(r.handled);
                    rec.processed_until(r.sent);
                    rec.in_flight_until(r.arrived);
                    rec.worker_queued_until(asked);
                    rec.in_flight_until(now);
                    rec.queued_until(start);
                    rec.processed_until(end);
                    rec.node = Some(NodeId(w as u32));
                    rec.decision = Decision::LateBinding;
                    rec.attempts = 1;
                }
                queue.push(end + delay, Ev::Reply(w, r, task));
            }
            Ev::Reply(w, r, task) => {
                let worker = &mut workers[w];
                worker.free = worker.free.add(&r.need);
                if let Some(idx) = task {
                    let rec = &mut records[idx];
                    rec.in_flight_until(now);
                    rec.launch = Some(now);
                    rec.start = Some(now);
                    rec.starts += 1;
                    match worker.free.checked_sub(&needs[idx]) {
                        Some(free) => worker.free = free,
                        None => counters.over_commits += 1,
                    }
                    queue.push(now + durations[idx], Ev::Finish(w, idx));
                }
                serve(&mut workers[w], w, now, delay, &mut queue);
            }
            Ev::Finish(w, idx) => {
                let rec = &mut records[idx];
                rec.finish = Some(now);
                done += 1;
                let worker = &mut workers[w];
                worker.free = worker.free.add(&needs[idx]);
                serve(&mut workers[w], w, now, delay, &mut queue);
            }
        }
        if done >= last_report + 1024 {
            last_report = done;
            progress(done, total);
        }
    }
    progress(done, total);
    let drained = workers
        .iter()
        .all(|w| w.free == w.capacity && w.reservations.is_empty());
    SimOutcome {
        probe: None,
        branches: Default::default(),
        drained,
        runs: Vec::new(),
        span,
        records,
        counters,
    }
}

/// Hands the head reservation(s) a slot while resources allow, asking the scheduler.
fn serve(
    worker: &mut SparrowWorker,
    w: usize,
    now: Micros,
    delay: Micros,
    queue: &mut EventQueue<Ev>,
) {
    while let Some(head) = worker.reservations.front() {
        let Some(free) = worker.free.checked_sub(&head.need) else {
            break;
        };
        worker.free = free;
        let Some(r) = worker.reservations.pop_front() else {
            break;
        };
        queue.push(now + delay, Ev::GetTask(w, r, now));
    }
}

fn eligible_workers(
    workers: &[SparrowWorker],
    constraints: ConstraintSet,
    need: Resources,
) -> Vec<u32> {
    workers
        .iter()
        .enumerate()
        .filter(|(_, w)| constraints.satisfied_by(w.constraints) && w.capacity.fits(&need))
        .map(|(i, _)| i as u32)
        .collect()
}

/// `n` workers from `eligible`: distinct while possible, then round-robin repeats.
fn sample(rng: &mut SeededRng, eligible: &[u32], n: usize) -> Vec<u32> {
    let e = eligible.len();
    if n >= e {
        return (0..n).map(|i| eligible[i % e]).collect();
    }
    if n * 2 <= e {
        let mut seen = HashSet::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let w = eligible[rng.random_range(0..e)];
            if seen.insert(w) {
                out.push(w);
            }
        }
        return out;
    }
    let mut all = eligible.to_vec();
    for i in 0..n {
        let j = rng.random_range(i..e);
        all.swap(i, j);
    }
    all.truncate(n);
    all
}
