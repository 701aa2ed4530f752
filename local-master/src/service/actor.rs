//! The LM actor: hosts the pure [`LocalMaster`] core, one `Handler` per message.
//!
//! Launch batches are validated by the core and answered at once; start orders go to
//! the workers through one ordered, retrying sender per worker slot; the state goes to
//! every GM each heartbeat and, rate-limited, after every change. Nothing is published
//! until every expected worker has registered.

use crate::core::{LmConfig, LmEffects, LocalMaster};
use actix::prelude::*;
use common::cluster::LmSpec;
use common::events::TaskEvent;
use common::messages::{
    LaunchBatch, LaunchOutcome, LaunchResponse, LmSnapshot, Placement, StartTask, WorkerAssignment,
    WorkerReport,
};
use common::{Micros, NodeId};
use service_kit::clock;
use service_kit::links::{Link, OrderedSender, Sink};
use std::time::Duration;

pub type StartLink = Link<Vec<StartTask>, ()>;

#[derive(Debug, Default)]
pub struct LmCounters {
    pub batches: u64,
    pub requests: u64,
    pub launched: u64,
    pub rejections: u64,
    pub repartitions: u64,
    pub reports: u64,
    pub bad_reports: u64,
    pub snapshots_published: u64,
}

pub struct LmActor {
    pub(super) core: LocalMaster,
    workers: Vec<Option<OrderedSender<StartTask>>>,
    /// The URL each slot's worker registered with (to give a re-registering
    /// `AUTO_SLOT` worker its slot back).
    worker_urls: Vec<Option<String>>,
    held_starts: Vec<Vec<StartTask>>,
    snapshots: Sink<LmSnapshot>,
    events: Sink<Vec<TaskEvent>>,
    heartbeat: Duration,
    min_interval: Duration,
    last_publish: Micros,
    publish_scheduled: bool,
    pub(super) counters: LmCounters,
}

impl std::fmt::Debug for LmActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmActor")
            .field("lm", &self.core.id())
            .finish_non_exhaustive()
    }
}

impl LmActor {
    pub fn new(
        spec: &LmSpec,
        gms: u16,
        heartbeat: Micros,
        worker_slots: u32,
        snapshots: Sink<LmSnapshot>,
        events: Sink<Vec<TaskEvent>>,
        min_interval: Duration,
    ) -> Self {
        let config = LmConfig {
            heartbeat_period: heartbeat,
        };
        let slots = worker_slots.max(1) as usize;
        LmActor {
            core: LocalMaster::new(spec, gms, config, clock::now()),
            workers: (0..slots).map(|_| None).collect(),
            worker_urls: vec![None; slots],
            held_starts: vec![Vec::new(); slots],
            snapshots,
            events,
            heartbeat: Duration::from_micros(heartbeat.0),
            min_interval,
            last_publish: Micros::ZERO,
            publish_scheduled: false,
            counters: LmCounters::default(),
        }
    }

    /// Every expected worker has registered.
    pub fn ready(&self) -> bool {
        self.workers.iter().all(Option::is_some)
    }

    fn slot_of(&self, node: NodeId) -> usize {
        node.index() % self.workers.len()
    }

    fn publish(&mut self) {
        if !self.ready() {
            return;
        }
        let now = clock::now();
        let snapshot = self.core.snapshot(now);
        self.last_publish = now;
        self.counters.snapshots_published += 1;
        (self.snapshots)(snapshot);
    }

    /// Publishes the state soon: now if the last publication is old enough, else at
    /// the end of the minimum interval (changes in between ride along).
    fn state_changed(&mut self, ctx: &mut Context<Self>) {
        if self.publish_scheduled || !self.ready() {
            return;
        }
        let next = self.last_publish + Micros(self.min_interval.as_micros() as u64);
        let wait = clock::until(next);
        if wait.is_zero() {
            self.publish();
        } else {
            self.publish_scheduled = true;
            ctx.run_later(wait, |act, _| {
                act.publish_scheduled = false;
                act.publish();
            });
        }
    }

    fn apply(&mut self, fx: LmEffects, ctx: &mut Context<Self>) -> Option<LaunchResponse> {
        if fx.heartbeat.is_some() {
            self.publish();
        }
        for start in fx.starts {
            let slot = self.slot_of(start.node);
            match &self.workers[slot] {
                Some(sender) => sender.send(start),
                None => self.held_starts[slot].push(start),
            }
        }
        if !fx.events.is_empty() {
            (self.events)(fx.events);
        }
        if fx.response.is_some() {
            self.state_changed(ctx);
        }
        fx.response
    }

    /// Start orders not yet delivered to workers, and tasks running.
    pub fn load(&self) -> (usize, usize) {
        let pending = self
            .workers
            .iter()
            .flatten()
            .map(OrderedSender::pending)
            .sum::<usize>()
            + self.held_starts.iter().map(Vec::len).sum::<usize>();
        (pending, self.core.running().len())
    }
}

impl Actor for LmActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1 << 20);
        ctx.run_interval(self.heartbeat, |act, ctx| {
            let fx = act.core.tick(clock::now());
            act.apply(fx, ctx);
        });
    }
}

/// A GM's launch batch; answered with the outcomes and the LM's state.
#[derive(Message, Debug)]
#[rtype(result = "Result<LaunchResponse, String>")]
pub struct Launch(pub LaunchBatch);

impl Handler<Launch> for LmActor {
    type Result = Result<LaunchResponse, String>;

    fn handle(&mut self, msg: Launch, ctx: &mut Context<Self>) -> Self::Result {
        self.counters.batches += 1;
        self.counters.requests += msg.0.requests.len() as u64;
        let (gm, seq) = (msg.0.gm, msg.0.seq);
        let fx = self
            .core
            .handle_launch_batch(clock::now(), msg.0)
            .map_err(|e| e.to_string())?;
        if let Some(r) = &fx.response {
            for (task, outcome) in &r.outcomes {
                match outcome {
                    LaunchOutcome::Launched { placement } => {
                        self.counters.launched += 1;
                        if *placement == Placement::Repartition {
                            self.counters.repartitions += 1;
                        }
                    }
                    LaunchOutcome::Rejected(reason) => {
                        self.counters.rejections += 1;
                        tracing::debug!(task = %task, job = task.job.0, %gm, seq, %reason, "launch refused");
                    }
                }
            }
        }
        self.apply(fx, ctx)
            .ok_or_else(|| "the core produced no response".to_owned())
    }
}

/// Reports from one worker, in order.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Reports(pub Vec<WorkerReport>);

impl Handler<Reports> for LmActor {
    type Result = ();

    fn handle(&mut self, msg: Reports, ctx: &mut Context<Self>) {
        let mut changed = false;
        for report in msg.0 {
            self.counters.reports += 1;
            changed |= matches!(report, WorkerReport::Finished { .. });
            match self.core.handle_worker_report(clock::now(), report) {
                Ok(fx) => {
                    self.apply(fx, ctx);
                }
                Err(e) => {
                    self.counters.bad_reports += 1;
                    tracing::warn!(error = %e, "worker report refused");
                }
            }
        }
        if changed {
            self.state_changed(ctx);
        }
    }
}

/// A worker announces itself for a slot; it gets its nodes back.
#[derive(Message)]
#[rtype(result = "Result<WorkerAssignment, String>")]
pub struct Register {
    /// A slot, or [`common::messages::AUTO_SLOT`]: the slot this URL registered
    /// before, else the first slot no worker has registered for.
    pub slot: u32,
    /// Where the worker listens (only used to recognise a re-registration).
    pub url: String,
    pub link: StartLink,
}

impl std::fmt::Debug for Register {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Register(slot {})", self.slot)
    }
}

impl Handler<Register> for LmActor {
    type Result = Result<WorkerAssignment, String>;

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) -> Self::Result {
        let slot = if msg.slot == common::messages::AUTO_SLOT {
            let again = self
                .worker_urls
                .iter()
                .position(|u| u.as_deref() == Some(msg.url.as_str()));
            match again.or_else(|| self.workers.iter().position(Option::is_none)) {
                Some(slot) => slot,
                None => {
                    return Err(format!(
                        "every slot of this LM is taken ({} workers expected); raise its --workers",
                        self.workers.len()
                    ))
                }
            }
        } else {
            msg.slot as usize
        };
        if slot >= self.workers.len() {
            return Err(format!(
                "slot {slot} does not exist: this LM expects {} workers (slots 0..{})",
                self.workers.len(),
                self.workers.len()
            ));
        }
        let was_ready = self.ready();
        let sender = OrderedSender::start(msg.link);
        for start in std::mem::take(&mut self.held_starts[slot]) {
            sender.send(start);
        }
        self.workers[slot] = Some(sender);
        self.worker_urls[slot] = Some(msg.url);
        let topology = self.core.topology().clone();
        let nodes = (0..topology.node_count())
            .filter(|n| n % self.workers.len() == slot)
            .map(|n| (NodeId(n as u32), topology.capacity[n]))
            .collect::<Vec<_>>();
        tracing::info!(lm = %self.core.id(), slot, nodes = nodes.len(), "worker registered");
        if !was_ready && self.ready() {
            tracing::info!(lm = %self.core.id(), "every worker registered; publishing state");
            self.publish();
        }
        Ok(WorkerAssignment {
            lm: topology.lm,
            slot: slot as u32,
            nodes,
        })
    }
}

/// (undelivered start orders, running tasks, ready).
#[derive(Message, Debug)]
#[rtype(result = "(usize, usize, bool)")]
pub struct GetLoad;

impl Handler<GetLoad> for LmActor {
    type Result = MessageResult<GetLoad>;
    fn handle(&mut self, _: GetLoad, _: &mut Context<Self>) -> Self::Result {
        let (p, r) = self.load();
        MessageResult((p, r, self.ready()))
    }
}

/// Publish the state now (embedded mode, once every GM is listening).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PublishNow;

impl Handler<PublishNow> for LmActor {
    type Result = ();
    fn handle(&mut self, _: PublishNow, _: &mut Context<Self>) {
        self.publish();
    }
}
