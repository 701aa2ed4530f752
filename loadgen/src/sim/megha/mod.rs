//! Drives the real GM, LM and worker cores over the modelled network.
//!
//! Every role is a single server: an input arriving while it is busy waits (framework
//! queuing), handling it costs time per the [`CostModel`](super::CostModel), and its
//! outputs leave when it is done. Messages take the configured one-way delay.
//! [`workers`] holds the worker side.

mod workers;

use super::events::EventQueue;
use super::ledger::{Decision, TaskRecord};
use super::workload::Job;
use super::{CostModel, Progress, Run, SimConfig, SimCounters, SimOutcome};
use common::cluster::ClusterSpec;
use common::messages::{
    KillTask, LaunchBatch, LaunchResponse, LmSnapshot, PreemptOutcome, PreemptRequest,
    PreemptResponse, PreemptedTasks, PromoteTask, StartTask, WorkerReport,
};
use common::{GmId, Micros, TaskId, TaskKind};
use global_master::core::{GlobalMaster, GmConfig};
use local_master::{LmConfig, LocalMaster};
use std::collections::HashMap;
use worker::Worker;

mod gm;
mod lra;

enum Ev {
    JobArrival(usize),
    GmPass(usize),
    GmResponse(LaunchResponse),
    GmSnapshot(usize, LmSnapshot),
    LmBatch(LaunchBatch),
    LmTick(usize),
    LmReport(usize, WorkerReport),
    WorkerStart(usize, StartTask),
    WorkerWake(usize),
    LmPreempt(PreemptRequest),
    GmPreemptResponse(PreemptResponse),
    GmRequeue(PreemptedTasks),
    WorkerKill(usize, KillTask),
    /// The designated GM's LRA placer may run.
    GmLraPass,
    /// The designated GM learns that a task ended (from the LM's events).
    GmLraEnded(TaskId),
    WorkerPromote(usize, PromoteTask),
}

struct Sim<'a> {
    config: &'a SimConfig,
    costs: &'a CostModel,
    queue: EventQueue<Ev>,
    gms: Vec<GlobalMaster>,
    gm_busy: Vec<Micros>,
    gm_pass_pending: Vec<bool>,
    lms: Vec<LocalMaster>,
    lm_busy: Vec<Micros>,
    workers: Vec<Worker>,
    worker_base: Vec<usize>,
    wake_at: Vec<Option<Micros>>,
    records: Vec<TaskRecord>,
    job_offset: Vec<usize>,
    counters: SimCounters,
    done: u64,
    running: u64,
    idle_ticks: u64,
    arrived: usize,
    jobs: usize,
    /// The GM that receives GUARANTEED tasks.
    designated: usize,
    runs: Vec<Run>,
    active_run: HashMap<TaskId, usize>,
    /// Some job is an LRA.
    has_lras: bool,
    /// A `GmLraPass` event is queued.
    lra_pass_pending: bool,
    /// LRA placer runs in a row that placed nothing.
    lra_fruitless: u32,
}

/// Simulates Megha (or, given a one-GM one-LM cluster, the centralized baseline).
pub fn simulate(
    cluster: &ClusterSpec,
    jobs: &[Job],
    config: &SimConfig,
    progress: Progress<'_>,
) -> SimOutcome {
    let gm_count = cluster.gms as usize;
    let lm_count = cluster.lms.len();
    let lm_config = LmConfig {
        heartbeat_period: config.heartbeat,
    };
    let mercury = &config.mercury;
    let queueable = jobs
        .iter()
        .any(|j| j.tasks.iter().any(|t| t.kind == TaskKind::Queueable));
    let mut workers = Vec::new();
    let mut worker_base = Vec::new();
    let mut lms = Vec::new();
    for spec in &cluster.lms {
        worker_base.push(workers.len());
        workers.extend(spec.nodes().map(|(id, _, n)| {
            let w = Worker::new(id, n.capacity).with_queue_order(mercury.queue_order);
            if mercury.cap < 1.0 {
                w.with_queueable_limit(n.capacity.scaled(mercury.cap))
            } else {
                w
            }
        }));
        let mut lm = LocalMaster::new(spec, cluster.gms, lm_config.clone(), Micros::ZERO);
        if queueable {
            lm = lm.with_queueable(mercury.lm_config());
        }
        lms.push(match &config.fairness {
            Some(f) => lm.with_fairness(f.clone()),
            None => lm,
        });
    }
    let designated = if config.designated_gm.index() < gm_count {
        config.designated_gm
    } else {
        GmId(0)
    };
    let gms = (0..gm_count)
        .map(|g| {
            GlobalMaster::new(mercury.gm_config(GmConfig {
                batch_size: config.batch_size,
                fairness: config.fairness.clone().filter(|_| config.preemption),
                designated_gm: designated,
                lra: config.lra.clone(),
                ..GmConfig::new(GmId(g as u16), cluster.gms, lm_count as u16)
            }))
        })
        .collect();
    let max_job = jobs.iter().map(|j| j.id as usize + 1).max().unwrap_or(0);
    let mut job_offset = vec![usize::MAX; max_job];
    let mut records = Vec::new();
    for job in jobs {
        job_offset[job.id as usize] = records.len();
        for t in &job.tasks {
            records.push(TaskRecord::new(job.id, t.id.index, job.arrival));
        }
    }
    let total = records.len() as u64;
    let mut sim = Sim {
        config,
        costs: &config.costs,
        queue: EventQueue::default(),
        gms,
        gm_busy: vec![Micros::ZERO; gm_count],
        gm_pass_pending: vec![false; gm_count],
        lm_busy: vec![Micros::ZERO; lm_count],
        lms,
        wake_at: vec![None; workers.len()],
        workers,
        worker_base,
        records,
        job_offset,
        counters: SimCounters::default(),
        done: 0,
        running: 0,
        idle_ticks: 0,
        arrived: 0,
        jobs: jobs.len(),
        designated: designated.index(),
        runs: Vec::new(),
        active_run: HashMap::new(),
        has_lras: jobs.iter().any(lra::is_lra),
        lra_pass_pending: false,
        lra_fruitless: 0,
    };
    sim.install_operator_constraints();
    for (k, job) in jobs.iter().enumerate() {
        sim.queue.push(job.arrival, Ev::JobArrival(k));
    }
    for l in 0..lm_count {
        sim.queue.push(Micros::ZERO, Ev::LmTick(l));
    }
    let mut last_report = 0;
    while sim.done < total {
        let Some((now, ev)) = sim.queue.pop() else {
            break;
        };
        sim.counters.events += 1;
        sim.handle(now, ev, jobs);
        if sim.done >= last_report + 1024 {
            last_report = sim.done;
            progress(sim.done, total);
        }
        // Nothing running, nothing in flight but heartbeats, for two rounds: no task
        // can ever make progress again. Stop and report the rest as never finished.
        if sim.idle_ticks > 2 * lm_count as u64 + 2 {
            break;
        }
    }
    progress(sim.done, total);
    let span = sim.queue.now();
    // Let the last worker reports reach their LMs (dropping everything else, which
    // ends the loop), then check that nothing leaked.
    while let Some((now, ev)) = sim.queue.pop() {
        if let Ev::LmReport(..) = ev {
            sim.handle(now, ev, jobs);
        }
    }
    let drained = sim.lms.iter().all(LocalMaster::is_idle)
        && sim.workers.iter().all(|w| w.free() == w.capacity());
    SimOutcome {
        drained,
        span,
        runs: sim.runs,
        records: sim.records,
        counters: sim.counters,
    }
}

impl Sim<'_> {
    fn delay(&self) -> Micros {
        self.config.network_delay
    }

    fn record(&mut self, task: TaskId) -> &mut TaskRecord {
        let i = self.job_offset[task.job.index()] + task.index as usize;
        &mut self.records[i]
    }

    fn request_pass(&mut self, g: usize, at: Micros) {
        if !self.gm_pass_pending[g] {
            self.gm_pass_pending[g] = true;
            self.queue.push(at.max(self.gm_busy[g]), Ev::GmPass(g));
        }
    }

    fn handle(&mut self, now: Micros, ev: Ev, jobs: &[Job]) {
        match ev {
            Ev::JobArrival(k) => {
                self.arrived += 1;
                self.idle_ticks = 0;
                let (g, queue) = match &self.config.fairness {
                    Some(f) if !f.queues.is_empty() => {
                        let q = &f.queues[k % f.queues.len()];
                        // The centralized baseline has one GM: every queue is its own.
                        (q.gm.index() % self.gms.len(), q.id)
                    }
                    _ => (k % self.gms.len(), common::QueueId(0)),
                };
                if lra::is_lra(&jobs[k]) {
                    self.lra_arrival(now, &jobs[k], queue);
                    return;
                }
                let mut to_designated = false;
                for task in &jobs[k].tasks {
                    let target = if task.kind.needs_designated_gm() {
                        to_designated = true;
                        self.designated
                    } else {
                        g
                    };
                    self.gms[target].submit(now, task.clone().with_queue(queue));
                    let rec = self.record(task.id);
                    rec.gm = Some(GmId(target as u16));
                    rec.queue = queue;
                }
                self.request_pass(g, now);
                if to_designated {
                    self.request_pass(self.designated, now);
                }
            }
            Ev::LmPreempt(request) => self.lm_preempt(now, request),
            Ev::GmPreemptResponse(response) => {
                let g = response.gm.index();
                self.charge_snapshot(now, g, &response.snapshot);
                let rec = self.record(response.task);
                match &response.outcome {
                    PreemptOutcome::Launched { .. } => rec.decision = Decision::Preemption,
                    PreemptOutcome::Refused(_) => {
                        rec.in_flight_until(now);
                        self.counters.preempt_refused += 1;
                    }
                }
                self.gms[g].handle_preempt_response(now, &response);
                self.request_pass(g, now);
            }
            Ev::GmRequeue(preempted) => {
                let g = preempted.gm.index();
                self.gms[g].requeue_preempted(now, &preempted);
                self.request_pass(g, now);
            }
            Ev::WorkerKill(w, kill) => self.worker_kill(now, w, kill),
            Ev::WorkerPromote(w, promote) => self.worker_promote(now, w, promote),
            Ev::GmPass(g) => self.gm_pass(now, g),
            Ev::GmLraPass => self.lra_pass(now),
            Ev::GmLraEnded(task) => self.lra_ended(now, task),
            Ev::GmResponse(response) => self.gm_response(now, response),
            Ev::GmSnapshot(g, snapshot) => {
                self.charge_snapshot(now, g, &snapshot);
                self.gms[g].apply_snapshot(now, &snapshot);
                self.request_pass(g, now);
            }
            Ev::LmBatch(batch) => self.lm_batch(now, batch),
            Ev::LmTick(l) => self.lm_tick(now, l),
            Ev::LmReport(l, report) => {
                let start = now.max(self.lm_busy[l]);
                self.lm_busy[l] = start + self.costs.lm_report;
                // A finish racing a preemption is answered "unknown task": harmless.
                if let Ok(effects) = self.lms[l].handle_worker_report(now, report) {
                    let at = self.lm_busy[l] + self.delay();
                    for kill in effects.kills {
                        let w = self.worker_base[l] + kill.node.index();
                        self.queue.push(at, Ev::WorkerKill(w, kill));
                    }
                    for preempted in effects.requeues {
                        for (task, lost) in &preempted.tasks {
                            if task.kind == TaskKind::Queueable {
                                self.counters.queueable_kills += 1;
                            }
                            self.counters.preemptions += 1;
                            self.counters.wasted += *lost;
                            let rec = self.record(task.id);
                            rec.preemptions += 1;
                            rec.lost_work += *lost;
                        }
                        let at = self.lm_busy[l] + self.delay();
                        self.queue.push(at, Ev::GmRequeue(preempted));
                    }
                }
            }
            Ev::WorkerStart(w, order) => self.worker_start(now, w, order),
            Ev::WorkerWake(w) => {
                if self.wake_at[w] != Some(now) {
                    return;
                }
                self.wake_at[w] = None;
                let reports = self.workers[w].advance(now);
                self.worker_reports(now, w, reports);
                self.schedule_wake(w);
            }
        }
    }

    fn lm_of_worker(&self, w: usize) -> usize {
        self.worker_base.partition_point(|&base| base <= w) - 1
    }

    fn lm_preempt(&mut self, now: Micros, request: PreemptRequest) {
        let l = request.lm.index();
        let (start, done) = self.lm_serve(now, l, std::slice::from_ref(&request.task.id));
        let Ok(mut effects) = self.lms[l].handle_preempt(start, request) else {
            return;
        };
        let response = effects.preempt_response.take();
        self.lm_send(l, done, effects);
        if let Some(response) = response {
            self.queue
                .push(done + self.delay(), Ev::GmPreemptResponse(response));
        }
    }

    /// The LM serves a request for `tasks` from `max(now, busy)`: charges its cost and
    /// the tasks' ledgers. Returns when it started and when it is done.
    fn lm_serve(&mut self, now: Micros, l: usize, tasks: &[TaskId]) -> (Micros, Micros) {
        let start = now.max(self.lm_busy[l]);
        let nodes = self.lms[l].topology().node_count() as u64;
        let done = start
            + self.costs.lm_batch
            + Micros(self.costs.lm_request.0 * tasks.len() as u64)
            + CostModel::per_unit(nodes, self.costs.lm_snapshot_node_ns);
        self.lm_busy[l] = done;
        for task in tasks {
            let rec = self.record(*task);
            rec.in_flight_until(now);
            rec.queued_until(start);
            rec.processed_until(done);
        }
        (start, done)
    }

    /// Sends an LM's kills and start orders to its workers when it is done.
    fn lm_send(&mut self, l: usize, done: Micros, effects: local_master::LmEffects) {
        let arrive = done + self.delay();
        for promote in effects.promoted {
            self.counters.promoted += 1;
            let w = self.worker_base[l] + promote.node.index();
            self.queue.push(arrive, Ev::WorkerPromote(w, promote));
        }
        // Kills leave before the start that reuses their room, so they arrive first.
        for kill in effects.kills {
            let w = self.worker_base[l] + kill.node.index();
            self.queue.push(arrive, Ev::WorkerKill(w, kill));
        }
        for order in effects.starts {
            self.record(order.task.id).launch = Some(done);
            let w = self.worker_base[l] + order.node.index();
            self.queue.push(arrive, Ev::WorkerStart(w, order));
        }
    }

    fn lm_batch(&mut self, now: Micros, batch: LaunchBatch) {
        let l = batch.lm.index();
        let tasks: Vec<TaskId> = batch.requests.iter().map(|r| r.task.id).collect();
        let (start, done) = self.lm_serve(now, l, &tasks);
        let Ok(mut effects) = self.lms[l].handle_launch_batch(start, batch) else {
            return;
        };
        let response = effects.response.take();
        self.lm_send(l, done, effects);
        if let Some(response) = response {
            self.queue
                .push(done + self.delay(), Ev::GmResponse(response));
        }
    }

    fn lm_tick(&mut self, now: Micros, l: usize) {
        let mut effects = self.lms[l].tick(now);
        for promote in std::mem::take(&mut effects.promoted) {
            self.counters.promoted += 1;
            let w = self.worker_base[l] + promote.node.index();
            self.queue
                .push(now + self.delay(), Ev::WorkerPromote(w, promote));
        }
        for kill in effects.kills {
            self.counters.shed += 1;
            let w = self.worker_base[l] + kill.node.index();
            self.queue.push(now + self.delay(), Ev::WorkerKill(w, kill));
        }
        if let Some(snapshot) = effects.heartbeat {
            self.counters.heartbeats += 1;
            let nodes = snapshot.free.len() as u64;
            self.lm_busy[l] = now.max(self.lm_busy[l])
                + CostModel::per_unit(nodes, self.costs.lm_snapshot_node_ns);
            for g in 0..self.gms.len() {
                self.queue
                    .push(now + self.delay(), Ev::GmSnapshot(g, snapshot.clone()));
            }
        }
        let quiet = self.running == 0
            && self.arrived == self.jobs
            && self
                .gms
                .iter()
                .all(|gm| gm.outstanding() == 0 && gm.queues().ready_len() == 0)
            // Waiting LRAs keep the run going until two placer runs in a row
            // placed nothing.
            && (self.gms[self.designated].lras_waiting() == 0 || self.lra_fruitless >= 2);
        if quiet {
            self.idle_ticks += 1;
        } else {
            self.idle_ticks = 0;
        }
        self.queue.push(self.lms[l].next_wakeup(), Ev::LmTick(l));
    }
}
