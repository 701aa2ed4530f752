//! The driver of a fault run: the roles' cores, the event queue and the modelled
//! transport (see the module documentation of [`super`] for what it mirrors). The
//! roles' handlers, crashes and restarts are in `roles`.

use super::check::{self, Broken, Checker, Known, Violation};
use super::plan::{self, Fault, LinkRates, Role, Schedule};
use super::{FaultConfig, RunReport};
use crate::sim::events::EventQueue;
use common::cluster::{ClusterSpec, LmSpec, NodeSpec};
use common::messages::{HeldTask, LaunchOutcome, TaskFailure, WorkerReport};
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::rng::{seeded, Rng, SeededRng};
use common::{ConstraintSet, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use global_master::core::{GlobalMaster, GmInput, Undelivered};
use local_master::{LmInput, LocalMaster};
use std::collections::{HashMap, VecDeque};

use worker::Worker;

mod liveness;
mod roles;

/// Stream of the per-message faults and the workload (the schedule has its own).
const NET_STREAM: u64 = 0xFA18;
const WORKLOAD_STREAM: u64 = 0xFA19;
/// Every role's clock reads this plus simulated time plus its skew, so that a clock
/// behind by seconds stays positive.
const EPOCH: u64 = 1_000_000_000_000;
/// A GM -> LM call to a peer that is down or cut off fails after this (connection
/// refused or connect timeout, with the link's connect retries).
const UNREACHABLE_AFTER: Micros = Micros(100_000);
/// A stream that could not deliver tries again after this.
const STREAM_RETRY: Micros = Micros(50_000);

/// What travels on an ordered stream.
#[derive(Clone, Debug)]
enum Item {
    ToGm(LmToGm),
    /// An order, and the call whose answer waits for it, if any.
    ToWorker(LmToWorker, Option<u64>),
    ToLm(WorkerToLm),
    /// A worker registers with its LM (after either restarted).
    Register {
        holding: Vec<HeldTask>,
        finished: Vec<TaskId>,
    },
}

#[derive(Debug, Default)]
struct Stream {
    items: VecDeque<Item>,
    pumping: bool,
}

/// A GM -> LM call in progress.
#[derive(Debug)]
struct Call {
    gm: u16,
    /// The GM's life that made it.
    life: u32,
    message: GmToLm,
    started: Micros,
    attempt: u32,
    /// An attempt may have been acted on.
    ambiguous: bool,
    backoff: Micros,
    /// The life of the LM that first acted on it.
    reached: Option<u32>,
}

/// An answer waiting for the orders its request caused to reach the workers.
#[derive(Debug)]
struct Held {
    lm: u16,
    remaining: usize,
    answer: Option<LmToGm>,
}

#[derive(Debug)]
enum Ev {
    Arrival(usize),
    Fault(Fault),
    Pass(u16, u32),
    Tick(u16, u32),
    Wake(u32, u32),
    Attempt(u64),
    Timeout(u64, u32),
    Request(u64, u32, GmToLm),
    Answer(u64, u32, LmToGm),
    Pump(Role, Role),
    State(u16, LmToGm),
    Settle(u64),
}

pub(super) struct World<'a> {
    seed: u64,
    config: &'a FaultConfig,
    schedule: Schedule,
    net: SeededRng,
    queue: EventQueue<Ev>,
    cluster: ClusterSpec,
    jobs: Vec<(Micros, Vec<TaskSpec>)>,
    specs: HashMap<TaskId, TaskSpec>,
    gms: Vec<Option<GlobalMaster>>,
    gm_life: Vec<u32>,
    pass_pending: Vec<bool>,
    lms: Vec<Option<LocalMaster>>,
    lm_life: Vec<u32>,
    /// Per LM: its start clock (snapshot versions count from it), and whether a
    /// life started with a clock behind an earlier one's.
    lm_started: Vec<Micros>,
    clock_behind: Vec<bool>,
    /// The same for the GMs (their first batch number is their start clock).
    gm_started: Vec<Micros>,
    gm_clock_behind: Vec<bool>,
    /// Per worker: registered with the current life of its LM; declared lost
    /// (down) by it; when its LM last heard from it.
    registered: Vec<bool>,
    slot_down: Vec<bool>,
    last_seen: Vec<Micros>,
    workers: Vec<Option<Worker>>,
    worker_life: Vec<u32>,
    /// Per worker: (LM, node).
    placement: Vec<(u16, NodeId)>,
    /// Per worker: tasks it finished in this life (sent on registration).
    finished: Vec<Vec<TaskId>>,
    wake_at: Vec<Option<Micros>>,
    refusing: Vec<bool>,
    skew: HashMap<Role, i64>,
    pending_skew: HashMap<Role, i64>,
    broker_down: bool,
    partitions: Vec<(Vec<Role>, Vec<Role>)>,
    rates: LinkRates,
    streams: HashMap<(Role, Role), Stream>,
    calls: HashMap<u64, Call>,
    next_call: u64,
    held: HashMap<u64, Held>,
    checker: Checker,
    history: VecDeque<String>,
    event: u64,
    now: Micros,
    violation: Option<Violation>,
    /// Keep every history line (drained by [`World::run_history`]).
    history_all: bool,
}

impl<'a> World<'a> {
    pub(super) fn new(seed: u64, config: &'a FaultConfig, script: Option<&Schedule>) -> Self {
        let node = NodeSpec {
            capacity: Resources::cores(config.cores, 4096),
            constraints: ConstraintSet::EMPTY,
        };
        let cluster = ClusterSpec {
            gms: config.gms,
            lms: (0..config.lms)
                .map(|l| LmSpec {
                    id: LmId(l),
                    partitions: vec![
                        vec![node.clone(); config.nodes_per_partition as usize];
                        config.gms as usize
                    ],
                })
                .collect(),
        };
        let mut placement = Vec::new();
        for spec in &cluster.lms {
            for (id, _, _) in spec.nodes() {
                placement.push((spec.id.0, id));
            }
        }
        let roles = plan::Roles {
            gms: config.gms,
            lms: config.lms,
            workers: placement.len() as u32,
        };
        let schedule = match script {
            Some(s) => s.clone(),
            None => plan::random(seed, roles, &config.rates, config.horizon),
        };
        let jobs = workload(seed, config);
        let specs = jobs
            .iter()
            .flat_map(|(_, tasks)| tasks)
            .map(|t| (t.id, t.clone()))
            .collect();
        let n = placement.len();
        let mut world = World {
            seed,
            config,
            schedule,
            net: seeded(seed, NET_STREAM),
            queue: EventQueue::default(),
            cluster,
            jobs,
            specs,
            gms: (0..config.gms).map(|_| None).collect(),
            gm_life: vec![0; config.gms as usize],
            pass_pending: vec![false; config.gms as usize],
            lms: (0..config.lms).map(|_| None).collect(),
            lm_life: vec![0; config.lms as usize],
            registered: vec![true; n],
            slot_down: vec![false; n],
            last_seen: vec![Micros::ZERO; n],
            lm_started: vec![Micros::ZERO; config.lms as usize],
            clock_behind: vec![false; config.lms as usize],
            gm_started: vec![Micros::ZERO; config.gms as usize],
            gm_clock_behind: vec![false; config.gms as usize],
            workers: (0..n).map(|_| None).collect(),
            worker_life: vec![0; n],
            placement,
            finished: vec![Vec::new(); n],
            wake_at: vec![None; n],
            refusing: vec![false; n],
            skew: HashMap::new(),
            pending_skew: HashMap::new(),
            broker_down: false,
            partitions: Vec::new(),
            rates: LinkRates::default(),
            streams: HashMap::new(),
            calls: HashMap::new(),
            next_call: 0,
            held: HashMap::new(),
            checker: Checker::default(),
            history: VecDeque::new(),
            event: 0,
            now: Micros::ZERO,
            violation: None,
            history_all: false,
        };
        world.checker.strict = config.strict;
        // Skews scheduled at time zero act on the first start.
        let (initial, rest): (Vec<_>, Vec<_>) = world
            .schedule
            .faults
            .iter()
            .cloned()
            .partition(|(at, f)| *at == Micros::ZERO && matches!(f, Fault::Skew(..)));
        for (_, fault) in initial {
            if let Fault::Skew(role, ms) = fault {
                world.skew.insert(role, ms);
            }
        }
        for w in 0..n as u32 {
            world.start_worker(w);
        }
        for l in 0..config.lms {
            world.start_lm(l, false);
        }
        for g in 0..config.gms {
            world.start_gm(g);
        }
        for (at, fault) in rest {
            world.queue.push(at, Ev::Fault(fault));
        }
        for (k, (at, _)) in world.jobs.iter().enumerate() {
            world.queue.push(*at, Ev::Arrival(k));
        }
        world
    }

    pub(super) fn run(mut self) -> RunReport {
        let end = self.config.horizon + self.config.quiet;
        while let Some((now, ev)) = self.queue.pop() {
            if now > end {
                break;
            }
            self.now = now;
            self.note(|| describe(&ev));
            self.handle(ev);
            if self.violation.is_none() {
                let broken = match self.check_states() {
                    Err(broken) => {
                        match check::task_of(&broken.1).and_then(|t| self.checker.rerun_cause(&t)) {
                            Some(why) => self.checker.excuse(why, broken),
                            None => Err(broken),
                        }
                    }
                    ok => ok,
                };
                self.broke(broken);
            }
            self.event += 1;
            if self.violation.is_some() {
                break;
            }
        }
        if self.violation.is_none() {
            self.now = end;
            let views = self.views_converged();
            self.broke(views);
            if self.violation.is_none() {
                let (broken, known) = self.checker.liveness(self.config.strict);
                self.broke(broken.map_or(Ok(()), Err));
                return self.report(known);
            }
        }
        self.report(Default::default())
    }

    /// Runs and returns every line of the history (for [`super::run`]).
    pub(super) fn run_history(mut self) -> Vec<String> {
        self.history_all = true;
        let mut lines = Vec::new();
        let end = self.config.horizon + self.config.quiet;
        while let Some((now, ev)) = self.queue.pop() {
            if now > end {
                break;
            }
            self.now = now;
            self.note(|| describe(&ev));
            self.handle(ev);
            lines.extend(self.history.drain(..));
            self.event += 1;
        }
        lines
    }

    fn report(self, known: std::collections::BTreeMap<Known, u32>) -> RunReport {
        let (finished, failed) = self.checker.outcomes();
        RunReport {
            seed: self.seed,
            events: self.event,
            accepted: self.checker.accepted_tasks(),
            finished,
            failed,
            known,
            violation: self.violation,
            schedule: self.schedule,
        }
    }

    /// Keeps (and, tracing, prints) a line of the history.
    fn note(&mut self, line: impl FnOnce() -> String) {
        if self.config.history == 0 && !self.config.trace {
            return;
        }
        let line = format!(
            "#{} {:>9.3}s {}",
            self.event,
            self.now.as_secs_f64(),
            line()
        );
        if self.config.trace {
            println!("{line}");
        }
        if self.history.len() == self.config.history && !self.history_all {
            self.history.pop_front();
        }
        self.history.push_back(line);
    }

    fn broke(&mut self, result: Result<(), Broken>) {
        if let (Err((invariant, detail)), None) = (result, &self.violation) {
            self.violation = Some(Violation {
                seed: self.seed,
                event: self.event,
                at: self.now,
                task: check::task_of(&detail),
                invariant,
                detail,
                history: self.history.iter().cloned().collect(),
            });
        }
    }

    /// The "after every event" invariants over the roles' states.
    fn check_states(&self) -> Result<(), Broken> {
        for lm in self.lms.iter().flatten() {
            check::not_over_committed(lm)?;
        }
        check::running_once(
            self.workers
                .iter()
                .enumerate()
                .filter_map(|(w, x)| x.as_ref().map(|x| (w as u32, x.running()))),
        )
    }

    /// After the quiet period every GM's view of every LM matches the LM's free
    /// resources node by node.
    fn views_converged(&mut self) -> Result<(), Broken> {
        let mut excused = Vec::new();
        for gm in self.gms.iter().flatten() {
            for (l, lm) in self.lms.iter().enumerate() {
                let Some(lm) = lm else { continue };
                let Some(view) = gm.view(lm.id()) else {
                    return Err((
                        check::Invariant::ViewDiverged,
                        format!("{} has no view of {}", gm.id(), lm.id()),
                    ));
                };
                for (n, free) in lm.free().iter().enumerate() {
                    let (p, slot) = view.slot_of[n];
                    let seen = view.partitions[p as usize].free[slot as usize];
                    if seen != *free {
                        let broken = (
                            check::Invariant::ViewDiverged,
                            format!(
                                "{}'s view of {} node {n}: free {seen:?}, the LM has {free:?} \
                                 (view version {}, {} quiet heartbeats)",
                                gm.id(),
                                lm.id(),
                                view.version,
                                self.config.quiet.0 / self.config.heartbeat.0.max(1)
                            ),
                        );
                        if self.clock_behind[l] {
                            excused.push((Known::LmClockBehind, broken));
                        } else if free.fits(&seen) {
                            excused.push((Known::StaleViewRejectedBatch, broken));
                        } else {
                            return Err(broken);
                        }
                        break;
                    }
                }
            }
        }
        for (why, broken) in excused {
            self.checker.excuse(why, broken)?;
        }
        Ok(())
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival(k) => self.arrival(k),
            Ev::Fault(f) => self.fault(f),
            Ev::Pass(g, life) => {
                if self.gm_life[g as usize] == life && self.gms[g as usize].is_some() {
                    self.pass_pending[g as usize] = false;
                    self.gm_step(g, GmInput::Schedule);
                }
            }
            Ev::Tick(l, life) => self.tick(l, life),
            Ev::Wake(w, life) => self.wake(w, life),
            Ev::Attempt(call) => self.attempt(call),
            Ev::Timeout(call, attempt) => self.timeout(call, attempt),
            Ev::Request(call, _life, message) => self.request(call, message),
            Ev::Answer(call, attempt, message) => self.answer(call, attempt, message),
            Ev::Pump(from, to) => self.pump(from, to),
            Ev::State(g, message) => {
                if self.gms[g as usize].is_some() {
                    self.gm_step(g, GmInput::Lm(message));
                }
            }
            Ev::Settle(call) => self.give_up(call),
        }
    }

    /// A role's clock (see [`EPOCH`]).
    fn clock(&self, role: Role) -> Micros {
        let skew = self.skew.get(&role).copied().unwrap_or(0) * 1000;
        Micros((EPOCH + self.now.0).saturating_add_signed(skew))
    }

    fn to_sim(&self, role: Role, t: Micros) -> Micros {
        let skew = self.skew.get(&role).copied().unwrap_or(0) * 1000;
        Micros(t.0.saturating_add_signed(-skew).saturating_sub(EPOCH))
    }

    fn blocked(&self, a: Role, b: Role) -> bool {
        self.partitions
            .iter()
            .any(|(x, y)| (x.contains(&a) && y.contains(&b)) || (x.contains(&b) && y.contains(&a)))
    }

    fn up(&self, role: Role) -> bool {
        match role {
            Role::Gm(g) => self.gms[g as usize].is_some(),
            Role::Lm(l) => self.lms[l as usize].is_some(),
            Role::Worker(w) => self.workers[w as usize].is_some(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.net.random_bool(p.min(1.0))
    }

    /// The one-way time of a message: the network delay, plus an extra delay or (for
    /// links without order) a reordering delay when drawn.
    fn transit(&mut self, ordered: bool) -> Micros {
        let mut t = self.config.network_delay + self.extra_delay();
        if !ordered && self.chance(self.rates.reorder) {
            t += Micros(self.net.random_range(0..=self.config.network_delay.0 * 10));
        }
        t
    }

    /// An extra delay, when drawn.
    fn extra_delay(&mut self) -> Micros {
        if self.chance(self.rates.delay) {
            Micros(self.net.random_range(0..=self.config.max_extra_delay.0))
        } else {
            Micros::ZERO
        }
    }

    // ----- ordered streams -----

    fn send(&mut self, from: Role, to: Role, item: Item, front: bool) {
        let stream = self.streams.entry((from, to)).or_default();
        if front {
            stream.items.push_front(item);
        } else {
            stream.items.push_back(item);
        }
        if !stream.pumping {
            stream.pumping = true;
            let at = self.now + self.transit(true);
            self.queue.push(at, Ev::Pump(from, to));
        }
    }

    fn pump(&mut self, from: Role, to: Role) {
        let Some(stream) = self.streams.get(&(from, to)) else {
            return;
        };
        if stream.items.is_empty() {
            if let Some(s) = self.streams.get_mut(&(from, to)) {
                s.pumping = false;
            }
            return;
        }
        if !self.up(to) || self.blocked(from, to) || self.chance(self.rates.loss) {
            self.queue.push(self.now + STREAM_RETRY, Ev::Pump(from, to));
            return;
        }
        let Some(item) = self
            .streams
            .get_mut(&(from, to))
            .and_then(|s| s.items.pop_front())
        else {
            return;
        };
        let twice = self.chance(self.rates.dup);
        if twice {
            self.deliver(from, to, item.clone());
        }
        self.deliver(from, to, item);
        let at = self.now + self.extra_delay();
        self.queue.push(at, Ev::Pump(from, to));
    }

    fn deliver(&mut self, from: Role, to: Role, item: Item) {
        self.note(|| format!("  deliver {from}->{to} {}", describe_item(&item)));
        match (to, item) {
            (Role::Gm(g), Item::ToGm(message)) => self.gm_step(g, GmInput::Lm(message)),
            (Role::Worker(w), Item::ToWorker(order, call)) => {
                self.worker_order(w, order);
                if let Some(call) = call {
                    self.order_delivered(call);
                }
            }
            (Role::Lm(l), Item::ToLm(report)) => {
                if let Role::Worker(w) = from {
                    self.last_seen[w as usize] = self.now;
                }
                self.lm_step(l, LmInput::Worker(report), None);
            }
            (Role::Lm(l), Item::Register { holding, finished }) => {
                let Role::Worker(w) = from else { return };
                self.register(l, w, holding, finished);
            }
            _ => {}
        }
    }

    // ----- GM -> LM calls -----

    fn call(&mut self, g: u16, message: GmToLm) {
        let id = self.next_call;
        self.next_call += 1;
        self.calls.insert(
            id,
            Call {
                gm: g,
                life: self.gm_life[g as usize],
                message,
                started: self.now,
                attempt: 0,
                ambiguous: false,
                backoff: Micros::from_millis(50),
                reached: None,
            },
        );
        self.queue.push(self.now, Ev::Attempt(id));
    }

    fn attempt(&mut self, id: u64) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        c.attempt += 1;
        let (g, attempt, life, message) = (c.gm, c.attempt, c.life, c.message.clone());
        let l = message.lm().0;
        if !self.up(Role::Lm(l)) || self.blocked(Role::Gm(g), Role::Lm(l)) {
            if self.calls[&id].ambiguous {
                self.retry(id);
            } else {
                self.queue
                    .push(self.now + UNREACHABLE_AFTER, Ev::Settle(id));
            }
            return;
        }
        self.queue.push(
            self.now + self.config.call_timeout,
            Ev::Timeout(id, attempt),
        );
        if self.chance(self.rates.loss) {
            return;
        }
        let copies = if self.chance(self.rates.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + self.transit(false);
            self.queue.push(at, Ev::Request(id, life, message.clone()));
        }
    }

    /// The attempt got no answer in time: in doubt, sent again after the backoff
    /// until the doubt timeout.
    fn timeout(&mut self, id: u64, attempt: u32) {
        match self.calls.get_mut(&id) {
            Some(c) if c.attempt == attempt => c.ambiguous = true,
            _ => return,
        }
        self.retry(id);
    }

    fn retry(&mut self, id: u64) {
        let Some(c) = self.calls.get_mut(&id) else {
            return;
        };
        let delay = c.backoff;
        c.backoff = Micros((c.backoff.0 * 2).min(2_000_000));
        if self.now + delay > c.started + self.config.doubt_timeout {
            self.give_up(id);
        } else {
            self.queue.push(self.now + delay, Ev::Attempt(id));
        }
    }

    /// The transport gives up: the GM takes the request back.
    fn give_up(&mut self, id: u64) {
        let Some(c) = self.calls.remove(&id) else {
            return;
        };
        if self.gm_life[c.gm as usize] == c.life && self.gms[c.gm as usize].is_some() {
            self.gm_step(c.gm, GmInput::Undelivered(Undelivered::of(&c.message)));
        }
    }

    /// A request reaches its LM.
    fn request(&mut self, id: u64, message: GmToLm) {
        let l = message.lm().0;
        if !self.up(Role::Lm(l)) || !self.ready(l) {
            return; // refused or not ready (503): the call times out and retries
        }
        let asked: Vec<TaskId> = match &message {
            GmToLm::Launch(b) => b.requests.iter().map(|r| r.task.id).collect(),
            GmToLm::Preempt(p) => vec![p.task.id],
        };
        let lm_life = self.lm_life[l as usize];
        let attempt = match self.calls.get_mut(&id) {
            Some(c) => {
                if c.reached.is_some_and(|first| first != lm_life) {
                    for task in &asked {
                        self.checker.resent(*task);
                    }
                }
                c.reached.get_or_insert(lm_life);
                c.attempt
            }
            None => 0,
        };
        self.lm_step(l, LmInput::Gm(message), Some((id, attempt, asked)));
    }

    fn answer(&mut self, id: u64, attempt: u32, message: LmToGm) {
        match self.calls.get(&id) {
            Some(c) if c.attempt == attempt => {}
            _ => return, // a late or repeated answer: the call has moved on
        }
        let Some(c) = self.calls.remove(&id) else {
            return;
        };
        if self.gm_life[c.gm as usize] == c.life && self.gms[c.gm as usize].is_some() {
            self.gm_step(c.gm, GmInput::Lm(message));
        }
    }

    fn order_delivered(&mut self, call: u64) {
        let Some(h) = self.held.get_mut(&call) else {
            return;
        };
        h.remaining = h.remaining.saturating_sub(1);
        if h.remaining == 0 {
            if let Some(h) = self.held.remove(&call) {
                if let Some(answer) = h.answer {
                    self.send_answer(h.lm, call, answer);
                }
            }
        }
    }

    fn send_answer(&mut self, l: u16, call: u64, answer: LmToGm) {
        let Some(c) = self.calls.get(&call) else {
            return;
        };
        let (g, attempt) = (c.gm, c.attempt);
        if self.blocked(Role::Lm(l), Role::Gm(g)) || self.chance(self.rates.loss) {
            return;
        }
        let at = self.now + self.transit(false);
        self.queue.push(at, Ev::Answer(call, attempt, answer));
    }
}

/// The trace of a run: jobs of 1 to `max_tasks` one-core tasks of 0.2 to 3 s,
/// arriving over the fault horizon, round-robin over the GMs.
fn workload(seed: u64, config: &FaultConfig) -> Vec<(Micros, Vec<TaskSpec>)> {
    let mut rng = seeded(seed, WORKLOAD_STREAM);
    (0..config.jobs)
        .map(|j| {
            let arrival = Micros(rng.random_range(0..config.horizon.0.max(1)));
            let n = rng.random_range(1..=config.max_tasks.max(1));
            let tasks = (0..n)
                .map(|i| {
                    let duration = Micros(rng.random_range(200_000..3_000_000));
                    let id = TaskId::new(u64::from(j), i);
                    TaskSpec::short(id, Resources::cores(1, 256), duration)
                })
                .collect();
            (arrival, tasks)
        })
        .collect()
}

fn describe(ev: &Ev) -> String {
    match ev {
        Ev::Arrival(k) => format!("job {k} arrives"),
        Ev::Fault(f) => format!("FAULT {f}"),
        Ev::Pass(g, _) => format!("gm{g} pass"),
        Ev::Tick(l, _) => format!("lm{l} tick"),
        Ev::Wake(w, _) => format!("w{w} wake"),
        Ev::Attempt(c) => format!("call {c} attempt"),
        Ev::Timeout(c, a) => format!("call {c} attempt {a} timeout?"),
        Ev::Request(c, life, m) => {
            format!("call {c} (life {life}) reaches lm: {}", describe_request(m))
        }
        Ev::Answer(c, a, m) => format!("call {c} attempt {a} answered: {}", describe_lm_to_gm(m)),
        Ev::Pump(a, b) => format!("stream {a}->{b}"),
        Ev::State(g, m) => format!("gm{g} gets {}", describe_lm_to_gm(m)),
        Ev::Settle(c) => format!("call {c} unreachable"),
    }
}

fn tasks(ids: impl Iterator<Item = TaskId>) -> String {
    ids.map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

fn describe_request(m: &GmToLm) -> String {
    match m {
        GmToLm::Launch(b) => format!(
            "launch gm{}->lm{} seq {} [{}]",
            b.gm.0,
            b.lm.0,
            b.seq,
            tasks(b.requests.iter().map(|r| r.task.id))
        ),
        GmToLm::Preempt(p) => format!("preempt gm{}->lm{} for {}", p.gm.0, p.lm.0, p.task.id),
    }
}

fn describe_lm_to_gm(m: &LmToGm) -> String {
    match m {
        LmToGm::LaunchAnswer(r) => format!(
            "launch answer lm{} seq {} [{}]",
            r.lm.0,
            r.seq,
            r.outcomes
                .iter()
                .map(|(t, o)| match o {
                    LaunchOutcome::Launched { .. } => format!("{t} ok"),
                    LaunchOutcome::Rejected(r) => format!("{t} rejected {r:?}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        LmToGm::State(s) => format!("state of lm{} v{}", s.lm.0, s.version),
        LmToGm::Ended(e) => format!("ended [{}]", tasks(e.ends.iter().map(|x| x.task))),
        other => other.kind().to_string(),
    }
}

fn describe_item(item: &Item) -> String {
    match item {
        Item::ToGm(m) => describe_lm_to_gm(m),
        Item::ToWorker(o, _) => format!("{} {}", o.kind(), order_task(o)),
        Item::ToLm(WorkerToLm::Report(r)) => {
            let what = match r {
                WorkerReport::Started { .. } => "started",
                WorkerReport::Finished { .. } => "finished",
                WorkerReport::Killed { .. } => "killed",
                WorkerReport::Failed { .. } => "failed",
            };
            format!("report {} {what} on {}", r.task(), r.node())
        }
        Item::Register { holding, finished } => format!(
            "register holding [{}] finished [{}]",
            tasks(holding.iter().map(|h| h.task.id)),
            tasks(finished.iter().copied())
        ),
    }
}

fn order_task(o: &LmToWorker) -> TaskId {
    match o {
        LmToWorker::Start(s) => s.task.id,
        LmToWorker::Kill(k) => k.task,
        LmToWorker::Promote(p) => p.task,
    }
}

/// The report of a start a refusing worker turns down (as the worker service does).
fn refused(node: NodeId, task: TaskId, at: Micros) -> WorkerReport {
    WorkerReport::Failed {
        node,
        task,
        at,
        failure: TaskFailure::StartFailed {
            reason: "refused by the worker: fault injection".into(),
        },
    }
}
