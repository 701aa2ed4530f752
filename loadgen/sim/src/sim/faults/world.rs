//! The driver of a fault run: the roles' cores, the event queue and the modelled
//! transport (see the module documentation of [`super`] for what it mirrors). The
//! roles' handlers, crashes and restarts are in `roles`.

use super::check::{self, Broken, Checker, Known, Violation};
use super::plan::{self, Fault, Link, LinkRates, Role, Schedule};
use super::{FaultConfig, RunReport};
use crate::sim::events::EventQueue;
use common::cluster::{ClusterSpec, LmSpec, NodeSpec};
use common::protocol::{GmToLm, LmToGm};
use common::rng::{seeded, Rng, SeededRng};
use common::{ConstraintSet, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use gm_core::{GlobalMaster, GmInput};
use lm_core::LocalMaster;
use std::collections::{HashMap, VecDeque};
use workload::workload;

use worker_core::Worker;

mod event;
mod fence;
mod gangs;
mod in_doubt;
mod journal;
mod liveness;
mod lm_restart;
mod net;
mod roles;
mod trace;
mod workers;
mod workload;

use event::{Ev, Item};
use in_doubt::InDoubt;
use trace::{describe, describe_item, describe_request, tasks};

/// Stream of the per-message faults (the workload's is in `workload.rs`; the
/// schedule has its own).
const NET_STREAM: u64 = 0xFA18;
/// Its own stream, so that late orders leave every other draw of a seed as it was.
const LATE_STREAM: u64 = 0xFA1A7E;
/// Every role's clock reads this plus simulated time plus its skew, so that a clock
/// behind by seconds stays positive.
const EPOCH: u64 = 1_000_000_000_000;
/// A GM -> LM call to a peer that is down or cut off fails after this (connection
/// refused or connect timeout, with the link's connect retries).
const UNREACHABLE_AFTER: Micros = Micros(100_000);
/// The `Retry-After` of a not-ready LM's "busy" answer (the service's 1 s).
const BUSY_RETRY_AFTER: Micros = Micros(1_000_000);
/// A stream that could not deliver tries again after this.
const STREAM_RETRY: Micros = Micros(50_000);

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

/// Where a GM believes one of its tasks runs.
#[derive(Clone, Copy, Debug)]
struct Launched {
    gm: u16,
    lm: u16,
    run: u32,
    at: Micros,
}

/// An answer waiting for the orders its request caused to reach the workers.
#[derive(Debug)]
struct Held {
    lm: u16,
    remaining: usize,
    answer: Option<LmToGm>,
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
    /// Per task retried or resumed: the run it goes out as next and its runs failed
    /// so far, as the GMs' journals record them.
    journal_runs: HashMap<TaskId, (u32, u32)>,
    /// Per task launched (the GM service's tracker): its GM, its LM, its run, and
    /// when the GM heard it launched.
    launched_at: HashMap<TaskId, Launched>,
    /// Ends the GM takes from a restarted LM's answer (not compared with the
    /// event stream, which may not have them yet).
    reconcile_ends: bool,
    /// Per (GM, restarted LM): questions that went unanswered.
    reconcile_asks: HashMap<(u16, u16), u32>,
    /// Per restarted GM: its tasks waiting for silent LMs' answers.
    resume_doubt: HashMap<u16, InDoubt>,
    gms: Vec<Option<GlobalMaster>>,
    gm_life: Vec<u32>,
    pass_pending: Vec<bool>,
    /// Per GM: when its own wake-up is due.
    gm_wake_at: Vec<Option<Micros>>,
    lms: Vec<Option<LocalMaster>>,
    lm_life: Vec<u32>,
    /// Gangs a commit launched partially (a part died with its LM, or a member's
    /// node went down, after the GM heard every part held): each must be
    /// restarted whole by its GM (see `world/gangs.rs`).
    gang_partial: std::collections::BTreeMap<common::JobId, String>,
    /// Members of gangs restarted whole: their next run (a report of an earlier
    /// run is that of a void run, stopped or finished without its gang).
    gang_next_run: HashMap<TaskId, u32>,
    /// Gangs that left their GM's gang coordinator (started whole, failed or
    /// given up to `run_partial`), as the GM's journal records it.
    gangs_left: std::collections::HashSet<common::JobId>,
    /// Per (GM, LM): the version of the last heartbeat of the LM the GM got.
    heartbeat_version: HashMap<(u16, u16), u64>,
    /// Gangs restarted whole so far.
    gang_restarts: u64,
    /// Per GM: its latest start clock (its first batch number), and whether a life
    /// started with a clock behind an earlier one's.
    gm_started: Vec<Micros>,
    gm_clock_behind: Vec<bool>,
    /// Per GM: the last life written in its journal (as the service's
    /// `Journal::begin_life`), when the GMs keep one.
    gm_journal_life: Vec<u64>,
    /// Per worker: registered with the current life of its LM; declared lost
    /// (down) by it; when its LM last heard from it.
    registered: Vec<bool>,
    /// Per worker: the process life whose registration its LM last took (and with
    /// it the order key the LM signs its orders with). A process of another life
    /// refuses the orders it is sent (the worker service checks each order's MAC
    /// under its own per-process key).
    keyed: Vec<u32>,
    slot_down: Vec<bool>,
    last_seen: Vec<Micros>,
    workers: Vec<Option<Worker>>,
    worker_life: Vec<u32>,
    /// Per worker: (LM, node).
    placement: Vec<(u16, NodeId)>,
    /// Per worker: runs it ended, finished or failed (sent on registration; kept
    /// across its restarts, as the worker's `ended-runs` file).
    ended: Vec<Vec<common::messages::TaskEnd>>,
    wake_at: Vec<Option<Micros>>,
    refusing: Vec<bool>,
    /// Per worker: when its LM last confirmed it (its lease's start), whether it is
    /// fenced, and whether its fence timer is set (see `fence`).
    confirmed: Vec<Micros>,
    fenced: Vec<bool>,
    /// Runs of dead workers still running until their helpers kill them:
    /// (worker, task, attempt, until).
    orphans: Vec<(u32, TaskId, u32, Micros)>,
    fence_pending: Vec<bool>,
    /// Per worker: the start orders its process may run (worker-core's
    /// `OrderFilter`, as the worker service keeps it; a new process starts empty).
    filters: Vec<worker_core::orders::OrderFilter>,
    /// Late deliveries of abandoned start orders (`FaultConfig::late_orders`).
    late: SeededRng,
    skew: HashMap<Role, i64>,
    pending_skew: HashMap<Role, i64>,
    broker_down: bool,
    partitions: Vec<(Vec<Role>, Vec<Role>)>,
    /// Per kind of link ([`Link`] as index).
    rates: [LinkRates; 3],
    streams: HashMap<(Role, Role), Stream>,
    calls: HashMap<u64, Call>,
    next_call: u64,
    held: HashMap<u64, Held>,
    /// Per LM, its life's gate (lm-core's readiness and late-copy rules, as the LM
    /// service asks them); a restarted LM starts with a new one.
    gates: Vec<lm_core::gate::Gate>,
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
                        vec![node; config.nodes_per_partition as usize];
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
            late: seeded(seed, LATE_STREAM),
            queue: EventQueue::default(),
            cluster,
            jobs,
            specs,
            journal_runs: HashMap::new(),
            launched_at: HashMap::new(),
            reconcile_ends: false,
            reconcile_asks: HashMap::new(),
            resume_doubt: HashMap::new(),
            gms: (0..config.gms).map(|_| None).collect(),
            gm_life: vec![0; config.gms as usize],
            pass_pending: vec![false; config.gms as usize],
            gm_wake_at: vec![None; config.gms as usize],
            lms: (0..config.lms).map(|_| None).collect(),
            lm_life: vec![0; config.lms as usize],
            gang_partial: Default::default(),
            gang_next_run: Default::default(),
            gangs_left: Default::default(),
            heartbeat_version: HashMap::new(),
            gang_restarts: 0,
            registered: vec![true; n],
            keyed: vec![0; n],
            slot_down: vec![false; n],
            last_seen: vec![Micros::ZERO; n],
            gm_started: vec![Micros::ZERO; config.gms as usize],
            gm_clock_behind: vec![false; config.gms as usize],
            gm_journal_life: vec![0; config.gms as usize],
            workers: (0..n).map(|_| None).collect(),
            worker_life: vec![0; n],
            placement,
            ended: vec![Vec::new(); n],
            wake_at: vec![None; n],
            refusing: vec![false; n],
            confirmed: vec![Micros::ZERO; n],
            fenced: vec![false; n],
            orphans: Vec::new(),
            fence_pending: vec![false; n],
            filters: (0..n).map(|_| Default::default()).collect(),
            skew: HashMap::new(),
            pending_skew: HashMap::new(),
            broker_down: false,
            partitions: Vec::new(),
            rates: [LinkRates::default(); 3],
            streams: HashMap::new(),
            calls: HashMap::new(),
            next_call: 0,
            held: HashMap::new(),
            gates: (0..config.lms).map(|_| Default::default()).collect(),
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
            let gangs = self.gangs_repaired();
            self.broke(gangs);
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
            gang_restarts: self.gang_restarts,
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
    /// resources node by node; an LM whose state changed since the last heartbeat
    /// of it a GM got (a gang hold orphaned by a fault expiring near the end:
    /// holds last 30 s, as long as the quiet period; seed 7467) is left out for
    /// that GM: it cannot know it yet.
    fn views_converged(&mut self) -> Result<(), Broken> {
        let mut excused = Vec::new();
        for gm in self.gms.iter().flatten() {
            for lm in self.lms.iter().flatten() {
                let got = self.heartbeat_version.get(&(gm.id().0, lm.id().0));
                if got.is_some_and(|v| *v != lm.version()) {
                    continue;
                }
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
                        // An LM restarted with its clock behind used to freeze
                        // the views of it: fixed in main (21124e3, LM lives in
                        // snapshots), so no longer excused.
                        if free.fits(&seen) {
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
            Ev::Fence(w, life) => self.fence_due(w, life),
            Ev::Late(l, w, order, life) => self.late_order(l, w, order, life),
            Ev::Attempt(call) => self.attempt(call),
            Ev::Timeout(call, attempt) => self.timeout(call, attempt),
            Ev::Request(call, _life, message) => self.request(call, message),
            Ev::Answer(call, attempt, message) => self.answer(call, attempt, message),
            Ev::Busy(call, attempt) => self.busy(call, attempt),
            Ev::Pump(from, to) => self.pump(from, to),
            Ev::State(g, message) => {
                if self.gms[g as usize].is_some() {
                    if let LmToGm::State(s) = &message {
                        self.heartbeat_version.insert((g, s.lm.0), s.version);
                    }
                    self.gm_step(g, GmInput::Lm(message));
                }
            }
            Ev::Settle(call) => self.give_up(call),
            Ev::LmReconcile(g, life, l, seen_at) => self.ask_restarted_lm(g, life, l, seen_at),
            Ev::ResumeAsk(g, life) => self.ask_again_to_resume(g, life),
            Ev::GmTick(g, life) => {
                let i = g as usize;
                if self.gm_life[i] == life && self.gm_wake_at[i] == Some(self.now) {
                    self.gm_wake_at[i] = None;
                    self.gm_step(g, GmInput::Tick);
                }
            }
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
    fn transit(&mut self, link: Link, ordered: bool) -> Micros {
        let mut t = self.config.network_delay + self.extra_delay(link);
        if !ordered && self.chance(self.rates[link as usize].reorder) {
            t += Micros(self.net.random_range(0..=self.config.network_delay.0 * 10));
        }
        t
    }

    /// An extra delay, when drawn.
    fn extra_delay(&mut self, link: Link) -> Micros {
        if self.chance(self.rates[link as usize].delay) {
            Micros(self.net.random_range(0..=self.config.max_extra_delay.0))
        } else {
            Micros::ZERO
        }
    }
}
