//! Drives the real GM, LM and worker cores over the modelled network.
//!
//! Every role is a single server: an input arriving while it is busy waits (framework
//! queuing), handling it costs time per the [`CostModel`](super::CostModel), and its
//! outputs leave when it is done. Messages take the configured one-way delay.
//! [`gm`] holds the GM side, [`lm`] the LM side, [`workers`] the worker side,
//! [`publish`] the LMs' change-triggered state publication (off by default),
//! [`mail`] the events and the inputs they carry.

mod barrier;
mod publish;
mod workers;

use super::events::EventQueue;
use super::ledger::TaskRecord;
use super::probe::Probe;
use super::workload::{is_lra, Job};
use super::{CostModel, Progress, Run, SimConfig, SimCounters, SimOutcome};
use common::cluster::ClusterSpec;
use common::protocol::{ClientToGm, GmAddress, GmToLm};
use common::{GmId, Micros, TaskId, TaskKind};
use gm_core::{GlobalMaster, GmConfig, GmInput};
use lm_core::{LmConfig, LmInput, LmOutput, LocalMaster};
use rustc_hash::FxHashMap as HashMap;
use worker_core::Worker;
use worker_core::{WorkerInput, WorkerOutput};

#[cfg(test)]
mod barrier_tests;
#[cfg(test)]
mod bulk_tests;
mod gm;
mod lm;
mod lra;
mod mail;
mod post;

use mail::{Ev, Mailboxes};

struct Sim<'a> {
    config: &'a SimConfig,
    costs: &'a CostModel,
    queue: EventQueue<Ev>,
    /// The inputs the queued events carry.
    mail: Mailboxes,
    gms: Vec<GlobalMaster>,
    gm_busy: Vec<Micros>,
    gm_pass_pending: Vec<bool>,
    lms: Vec<LocalMaster>,
    lm_busy: Vec<Micros>,
    /// Per LM: when it last sent its state to every GM (heartbeat or change).
    last_publish: Vec<Micros>,
    /// Per LM: an [`Ev::LmPublish`] is queued.
    publish_scheduled: Vec<bool>,
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
    /// Events in the queue other than arrivals and LM ticks: messages in flight and
    /// timers of the roles (see [`Sim::push`]).
    in_flight: u64,
    /// Arrival times of the jobs, sorted (the next one is `arrivals[arrived]`).
    arrivals: Vec<Micros>,
    /// Per LM: its last tick found the whole system quiet (see [`Sim::skip_idle`]).
    lm_quiet: Vec<bool>,
    /// Wall-clock timings of the core steps (`SimConfig::probe`).
    probe: Option<Box<Probe>>,
    /// Per worker: its node's attributes, when some job's run time depends on its
    /// placement ([`SimConfig::soft_jobs`]); empty otherwise.
    node_attrs: Vec<common::ConstraintSet>,
    /// Jobs whose members wait at a start barrier ([`SimConfig::start_barrier`]).
    barriers: barrier::Barriers,
}

/// Whether an event counts as in flight: everything but trace arrivals and LM ticks.
fn counted(ev: &Ev) -> bool {
    !matches!(ev, Ev::JobArrival(_) | Ev::LmTick(_))
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
                wake: config.wake,
                // The ledger books them per task (see `gm.rs`): same schedules.
                bulk_known_misses: config.bulk_known_misses,
                order: config.order,
                priorities: config.priorities.clone(),
                soft_ilp_ms: config.soft_ilp_ms,
                ..GmConfig::new(GmId(g as u16), cluster.gms, lm_count as u16)
            }))
        })
        .collect();
    let max_job = jobs.iter().map(|j| j.id as usize + 1).max().unwrap_or(0);
    let mut job_offset = vec![usize::MAX; max_job];
    let mut records = Vec::with_capacity(jobs.iter().map(|j| j.tasks.len()).sum());
    for job in jobs {
        job_offset[job.id as usize] = records.len();
        for t in &job.tasks {
            records.push(TaskRecord::new(job.id, t.id.index, job.arrival));
        }
    }
    let total = records.len() as u64;
    let submit = CostModel::micros(config.costs.submit_ns);
    let mut sim = Sim {
        config,
        costs: &config.costs,
        queue: EventQueue::default(),
        mail: Mailboxes::default(),
        gms,
        gm_busy: vec![Micros::ZERO; gm_count],
        gm_pass_pending: vec![false; gm_count],
        lm_busy: vec![Micros::ZERO; lm_count],
        last_publish: vec![Micros::ZERO; lm_count],
        publish_scheduled: vec![false; lm_count],
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
        runs: Vec::with_capacity(total as usize),
        active_run: HashMap::default(),
        has_lras: jobs.iter().any(is_lra),
        lra_pass_pending: false,
        lra_fruitless: 0,
        in_flight: 0,
        arrivals: {
            let mut a: Vec<Micros> = jobs.iter().map(|j| j.arrival + submit).collect();
            a.sort_unstable();
            a
        },
        lm_quiet: vec![false; lm_count],
        probe: config.probe.then(Box::default),
        node_attrs: match config.soft_jobs {
            Some(_) => cluster
                .lms
                .iter()
                .flat_map(|spec| spec.nodes().map(|(_, _, n)| n.constraints))
                .collect(),
            None => Vec::new(),
        },
        barriers: barrier::Barriers::new(match &config.start_barrier {
            Some(set) => (jobs.iter())
                .filter(|j| set.contains(&j.id))
                .map(|j| (j.id, j.tasks.len()))
                .collect(),
            None => Vec::new(),
        }),
    };
    sim.install_operator_constraints();
    for (k, job) in jobs.iter().enumerate() {
        // The tasks reach their GM after the client's submission path (zero by
        // default); the job's arrival stays the trace's.
        sim.queue.push(job.arrival + submit, Ev::JobArrival(k));
    }
    for l in 0..lm_count {
        sim.push_lm(Micros::ZERO, l, LmInput::Tick);
    }
    let mut last_report = 0;
    while sim.done < total {
        let Some((now, ev)) = sim.queue.pop() else {
            break;
        };
        sim.counters.events += 1;
        if counted(&ev) {
            sim.in_flight -= 1;
        }
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
        if matches!(ev, Ev::Lm(_, slot) if matches!(sim.mail.lm.get(slot), LmInput::Worker(_))) {
            sim.handle(now, ev, jobs);
        }
    }
    let drained = sim.lms.iter().all(LocalMaster::is_idle)
        && sim.workers.iter().all(|w| w.free() == w.capacity());
    // Attempts still owed by tasks that never left their queue.
    for g in 0..sim.gms.len() {
        let owed = sim.gms[g].settle_known_misses();
        sim.settle_misses(&owed);
    }
    for gm in &sim.gms {
        sim.counters.retries += gm.stats().retries;
        sim.counters.woken += gm.stats().woken;
        sim.counters.soft_ilp_solves += gm.stats().soft_ilp_solves;
        sim.counters.soft_ilp_fallbacks += gm.stats().soft_ilp_fallbacks;
    }
    sim.counters.barrier_stuck = sim.barriers.waiting();
    let branches = super::soft::branches_taken(&sim.gms, &sim.records);
    SimOutcome {
        drained,
        span,
        runs: sim.runs,
        records: sim.records,
        counters: sim.counters,
        probe: sim.probe,
        branches,
    }
}

impl Sim<'_> {
    /// Queues an event; see [`Sim::in_flight`].
    fn push(&mut self, at: Micros, ev: Ev) {
        if counted(&ev) {
            self.in_flight += 1;
        }
        self.queue.push(at, ev);
    }

    /// Whether the tick of LM `l` at `now`, due again at `next`, can jump ahead: the
    /// whole system is quiet (nothing running, queued, waiting or in flight, every LM
    /// idle) and was at this LM's previous tick too, so the GMs already hold its
    /// current state and every tick until the next arrival would send the same state
    /// again and change nothing. Returns the last tick of the same phase at or before
    /// the next arrival, if that is later than `next`: the tick that precedes the
    /// arrival still runs, so the GMs' views at the arrival are what they would have
    /// been.
    fn skip_idle(&mut self, l: usize, now: Micros, next: Micros) -> Option<Micros> {
        let quiet = self.in_flight == 0
            && self.running == 0
            && self.arrived < self.jobs
            && self.gms.iter().all(|gm| {
                gm.outstanding() == 0 && gm.queues().is_empty() && gm.lras_waiting() == 0
            })
            && self.lms.iter().all(LocalMaster::is_idle);
        let was_quiet = std::mem::replace(&mut self.lm_quiet[l], quiet);
        if !(quiet && was_quiet && self.config.skip_idle) || next <= now {
            return None;
        }
        let arrival = *self.arrivals.get(self.arrived)?;
        let period = next.0 - now.0;
        let jump = arrival.0.checked_sub(next.0)? / period * period;
        (jump > 0).then(|| Micros(next.0 + jump))
    }

    fn delay(&self) -> Micros {
        self.config.network_delay
    }

    /// One-way delay between an LM and its workers (the network delay unless the
    /// cost model says otherwise).
    fn worker_delay(&self) -> Micros {
        self.costs
            .worker_link_ns
            .map_or(self.config.network_delay, CostModel::micros)
    }

    fn record(&mut self, task: TaskId) -> &mut TaskRecord {
        let i = self.job_offset[task.job.index()] + task.index as usize;
        &mut self.records[i]
    }

    fn request_pass(&mut self, g: usize, at: Micros) {
        if !self.gm_pass_pending[g] {
            self.gm_pass_pending[g] = true;
            self.push_gm(at.max(self.gm_busy[g]), g, GmInput::Schedule);
        }
    }

    fn handle(&mut self, now: Micros, ev: Ev, jobs: &[Job]) {
        match ev {
            Ev::JobArrival(k) => self.job_arrival(now, k, jobs),
            Ev::Gm(g, slot) => {
                let input = self.mail.gm.take(slot);
                self.gm_input(now, g, input);
            }
            Ev::GmPass(g) => self.gm_input(now, g, GmInput::Schedule),
            Ev::GmLraPass(g) => self.gm_input(now, g, GmInput::LraPass),
            Ev::Lm(l, slot) => {
                let input = self.mail.lm.take(slot);
                self.lm_input(now, l, input);
            }
            Ev::LmTick(l) => self.lm_input(now, l, LmInput::Tick),
            Ev::LmPublish(l) => self.lm_publish_due(now, l),
            Ev::Worker(w, slot) => {
                let input = self.mail.worker.take(slot);
                self.worker_input(now, w, input);
            }
            Ev::WorkerWake(w) => self.worker_input(now, w, WorkerInput::Wake),
        }
    }

    /// The trace's client: submits a job's tasks to their GMs (GUARANTEED work to the
    /// designated one, LRAs to its placer) at once.
    fn job_arrival(&mut self, now: Micros, k: usize, jobs: &[Job]) {
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
        if is_lra(&jobs[k]) {
            self.lra_arrival(now, &jobs[k], queue);
            return;
        }
        // A job with a utility tree: its GM places it by the tree (alsched).
        let soft = self
            .config
            .soft_jobs
            .as_ref()
            .and_then(|m| m.get(&jobs[k].id));
        if let Some(utility) = soft.and_then(|s| s.utility.clone()) {
            self.gms[g].set_utility(common::JobId(jobs[k].id), utility);
        }
        // One submission per GM, each in the job's task order: what the GM makes of
        // it is what it made of the same tasks submitted one by one at `now`.
        let mut to_gm = Vec::with_capacity(jobs[k].tasks.len());
        let mut to_designated = Vec::new();
        for task in &jobs[k].tasks {
            let target = if task.kind.needs_designated_gm() {
                self.designated
            } else {
                g
            };
            let rec = self.record(task.id);
            rec.gm = Some(GmId(target as u16));
            rec.queue = queue;
            let task = task.clone().with_queue(queue);
            if target == g {
                to_gm.push(task);
            } else {
                to_designated.push(task);
            }
        }
        let designated = !to_designated.is_empty();
        if !to_gm.is_empty() {
            let gang = (self.config.gangs.as_ref()).and_then(|g| g.get(&jobs[k].id).copied());
            let submit = match &jobs[k].dag {
                // A gang: its members start together or not at all.
                _ if gang.is_some() && !designated => ClientToGm::SubmitGang {
                    tasks: to_gm,
                    retry: common::retry::RetryPolicy::default(),
                    gang: gang.expect("checked"),
                },
                // A DAG job: held stages wait in the GM (tasks of the designated GM
                // are not in stages: only Short and Queueable work has a DAG here).
                Some(dag) if !designated => ClientToGm::SubmitJob {
                    tasks: to_gm,
                    retry: common::retry::RetryPolicy::default(),
                    dag: Some(dag.clone()),
                },
                _ => ClientToGm::Submit(to_gm),
            };
            let out = self.gms[g].step(now, GmInput::Client(submit));
            self.dag_progress(now, &out);
        }
        if designated {
            let submit = ClientToGm::Submit(to_designated);
            self.gms[self.designated].step(now, GmInput::Client(submit));
        }
        self.request_pass(g, now);
        if designated {
            self.request_pass(self.designated, now);
        }
    }

    /// Delivers an LM's messages when it is done at `depart`: orders to the workers of
    /// its nodes, then messages to one GM or all of them.
    fn send_from_lm(&mut self, l: usize, depart: Micros, out: LmOutput) {
        let arrive = depart + self.delay();
        let to_worker = depart + self.worker_delay();
        for order in out.to_workers {
            let w = self.worker_base[l] + order.node().index();
            self.push_worker(to_worker, w, WorkerInput::Lm(order));
        }
        for (to, message) in out.to_gms {
            match to {
                GmAddress::One(g) => self.push_gm(arrive, g.index(), GmInput::Lm(message)),
                GmAddress::All => {
                    for g in 0..self.gms.len() {
                        let at = arrive + self.costs.fanout(g);
                        self.push_gm(at, g, GmInput::Lm(message.clone()));
                    }
                }
            }
        }
    }

    /// Delivers a GM's requests to their LMs when it is done at `depart`.
    fn send_from_gm(&mut self, depart: Micros, to_lms: Vec<GmToLm>) {
        let arrive = depart + self.delay();
        for message in to_lms {
            let l = message.lm().index();
            self.push_lm(arrive, l, LmInput::Gm(message));
        }
    }

    /// Delivers a worker's reports to its LM.
    fn send_from_worker(&mut self, w: usize, depart: Micros, out: WorkerOutput) {
        let l = self.lm_of_worker(w);
        for report in out.to_lm {
            self.push_lm(depart + self.worker_delay(), l, LmInput::Worker(report));
        }
    }

    fn lm_of_worker(&self, w: usize) -> usize {
        self.worker_base.partition_point(|&base| base <= w) - 1
    }

    /// Nothing running, nothing in flight but heartbeats: counts towards the end of
    /// a run that can no longer make progress. Members waiting at a start barrier
    /// count as not running: when they are all that runs, no room can ever free
    /// (one-by-one placement deadlocked, every waiting task's room held by them).
    fn idle_check(&mut self) {
        let quiet = self.running == self.barriers.waiting()
            && self.arrived == self.jobs
            && self
                .gms
                .iter()
                .all(|gm| gm.outstanding() == 0 && gm.ready_len() == 0)
            // Waiting LRAs keep the run going until two placer runs in a row
            // placed nothing.
            && (self.gms[self.designated].lras_waiting() == 0 || self.lra_fruitless >= 2);
        if quiet {
            self.idle_ticks += 1;
        } else {
            self.idle_ticks = 0;
        }
    }
}
