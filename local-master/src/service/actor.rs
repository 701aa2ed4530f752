//! The LM actor: hosts the pure [`LocalMaster`] core and carries out what each step
//! returns ([`LmActor::apply`]). Requests from GMs arrive through
//! [`super::gm::FromGm`]; this file holds the actor's state, worker reports and
//! registration.
//!
//! Requests from GMs are validated by the core and answered at
//! once; start and kill orders go to the workers through one ordered, retrying sender
//! per worker slot (a kill leaves before the start that reuses its room); preempted
//! tasks go back to the GM serving their queue through one ordered, retrying sender
//! per GM; the state goes to every GM each heartbeat and, rate-limited, after every
//! change. Nothing is published until every expected worker has registered.

pub mod drain;
pub mod gm;
pub mod metrics;
pub mod nodes;
pub mod preempt;
pub mod workers;

use super::orders::{GmLink, WorkerOrder};
use crate::core::{LmConfig, LocalMaster};
use crate::queueable::QueueableConfig;
use actix::prelude::*;
use common::cluster::LmSpec;
use common::events::TaskEvent;
use common::fairness::FairnessConfig;
use common::messages::LmSnapshot;
use common::protocol::facts::{KindCounts, TaskFact};
use common::protocol::{GmAddress, LmRoute, LmToGm};
use common::{Micros, NodeId};
use lm_core::{LmInput, LmOutput};
use service_kit::clock;
use service_kit::links::{OrderedSender, Sink};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Default)]
pub struct LmCounters {
    /// Requests received from GMs, by kind ([`GmToLm::kind`](common::protocol::GmToLm::kind)).
    pub received: KindCounts,
    /// Launch requests in the launch batches received.
    pub requests: u64,
    pub launched: u64,
    pub rejections: u64,
    pub repartitions: u64,
    pub reports: u64,
    pub bad_reports: u64,
    pub snapshots_published: u64,
    /// Tasks taken over from re-registering workers after a restart.
    pub adopted: u64,
    /// Reports of tasks that ended while this LM was away (published, no state).
    pub orphan_reports: u64,
    pub preemptions: u64,
    /// Preemption refusals by reason.
    pub preempt_refused: BTreeMap<&'static str, u64>,
    pub kills_sent: u64,
    /// QUEUEABLE tasks promoted to GUARANTEED (orders sent to their workers).
    pub promotions: u64,
    /// Tasks handed back to their GM after a kill, and the work they lost.
    pub requeued: u64,
    pub wasted: Micros,
    /// Task ends reported to the GMs that launched them.
    pub ends_reported: u64,
    /// LM -> GM messages dropped because no link to their GM was configured.
    pub gm_undeliverable: u64,
    /// Workers declared lost (silent for --worker-timeout-ms, or never registered
    /// within it, or registered again after a restart).
    pub workers_lost: u64,
    /// Registrations of the worker process already registered for the slot (the
    /// answer to its first one was lost and it asked again): nothing of it lost.
    pub registration_repeats: u64,
    /// Ends (finished or failed) that workers listed on registering again and this
    /// LM life had not heard of: announced again at their real end times, marked
    /// `reannounced`, and sent to their GMs.
    pub reannounced: u64,
    /// Tasks that ended `lost` because their worker was.
    pub tasks_lost: u64,
    /// Orders to a lost worker that were never delivered (dropped with it).
    pub orders_dropped: u64,
    /// Tasks cancel requests stopped, and tasks they named that another GM
    /// launched (left running).
    pub tasks_cancelled: u64,
    pub cancel_not_yours: u64,
    /// Task starts reported to the GMs that launched them.
    pub starts_reported: u64,
    /// Late first copies of launch batches answered busy before (not applied).
    pub late_copies_refused: u64,
    /// Nodes drained or undrained by an operator (calls that changed something).
    pub drain_changes: u64,
}

pub struct LmActor {
    core: LocalMaster,
    workers: Vec<Option<OrderedSender<WorkerOrder>>>,
    /// The URL each slot's worker registered with (to give a re-registering
    /// `AUTO_SLOT` worker its slot back).
    worker_urls: Vec<Option<String>>,
    /// Per slot: the SHA-256 of the order key of the worker process registered for
    /// it (a process keeps one key for its life): a registration with the same key
    /// is a repeat of that process's, not a restart.
    worker_processes: Vec<Option<[u8; 32]>>,
    /// Per slot: the SHA-256 of the session issued to its worker at its last
    /// registration over HTTP (see [`service_kit::auth::WorkerSession`]); reports on
    /// the slot's nodes must carry it. `None`: none bound yet (refused over HTTP).
    worker_sessions: Vec<Option<[u8; 32]>>,
    held_orders: Vec<Vec<WorkerOrder>>,
    /// Per slot: the first start order of its current registration
    /// ([`common::messages::WorkerAssignment::orders_from`]).
    orders_from: Vec<u64>,
    /// Per GM: preempted, reclaimed or shed tasks on their way back to it.
    /// Per GM: the LM's own messages to it (requeues, task ends), in order, retried
    /// until delivered.
    to_gm: Vec<Option<OrderedSender<LmToGm>>>,
    snapshots: Sink<LmSnapshot>,
    events: Sink<Vec<TaskEvent>>,
    heartbeat: Duration,
    min_interval: Duration,
    last_publish: Micros,
    publish_scheduled: bool,
    counters: LmCounters,
    /// This life of the LM (start time, µs): workers register again when it changes.
    incarnation: u64,
    /// Worker liveness: a registered worker silent this long is lost; `None` (the
    /// embedded mode, whose workers live in the same process): never.
    worker_timeout: Option<Duration>,
    /// Workers get the worker timeout as their lease (`--worker-fence`).
    worker_fence: bool,
    /// Per slot: when its worker last said anything (registration, report, check).
    last_seen: Vec<Micros>,
    /// Per slot: declared lost in this life (its nodes are down) and not back yet.
    slot_down: Vec<bool>,
    /// Lost runs the core had forgotten (its memory is bounded) when last logged.
    lost_forgotten_logged: u64,
    /// The count of forgotten void preemption requests last logged.
    voids_forgotten_logged: u64,
    /// Launch batches (GM, sequence number) this life answered busy, not applied:
    /// a late first copy is answered busy again (see `GmRequestError::AnsweredBusy`).
    /// Readiness and late copies of batches answered busy (lm-core's rule).
    gate: lm_core::gate::Gate,
    /// Where drained nodes are kept (the data dir); `None`: for this life only.
    drain_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for LmActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmActor")
            .field("lm", &self.core.id())
            .finish_non_exhaustive()
    }
}

impl LmActor {
    /// Takes `life` as this LM's life (kept above the previous one in its data dir:
    /// see `super::life`), instead of its start time.
    pub fn with_life(mut self, life: u64) -> Self {
        self.core.set_life(life);
        self.incarnation = life.max(1);
        self
    }

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
        let now = clock::now();
        LmActor {
            core: LocalMaster::new(spec, gms, config, now),
            workers: (0..slots).map(|_| None).collect(),
            worker_urls: vec![None; slots],
            worker_processes: vec![None; slots],
            worker_sessions: vec![None; slots],
            held_orders: vec![Vec::new(); slots],
            orders_from: vec![0; slots],
            to_gm: Vec::new(),
            gate: lm_core::gate::Gate::default(),
            snapshots,
            events,
            heartbeat: Duration::from_micros(heartbeat.0),
            min_interval,
            last_publish: Micros::ZERO,
            publish_scheduled: false,
            counters: LmCounters::default(),
            incarnation: now.0,
            worker_timeout: None,
            worker_fence: false,
            last_seen: vec![now; slots],
            slot_down: vec![false; slots],
            lost_forgotten_logged: 0,
            voids_forgotten_logged: 0,
            drain_dir: None,
        }
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Verifies preemptions against `fairness`; preempted tasks go back to their GMs
    /// (see [`LmActor::with_gms`]).
    pub fn with_fairness(mut self, fairness: Arc<FairnessConfig>) -> Self {
        self.core = self.core.with_fairness(fairness);
        self
    }

    /// Accepts QUEUEABLE work (Mercury): worker queues, reclaim, shedding, quotas and
    /// promotion as `config` says. Killed and shed tasks go back to their GMs (see
    /// [`LmActor::with_gms`]).
    pub fn with_queueable(mut self, config: QueueableConfig) -> Self {
        self.core = self.core.with_queueable(config);
        self
    }

    /// How the LM's own messages reach each GM (index = GM id): tasks taken back
    /// from workers, task ends. Call inside a tokio runtime.
    pub fn with_gms(mut self, links: Vec<GmLink>) -> Self {
        self.to_gm = links
            .into_iter()
            .map(|l| Some(OrderedSender::start(l)))
            .collect();
        self
    }

    /// Declares a worker lost when it is silent for `timeout` (see
    /// `--worker-timeout-ms`), and a slot down when no worker registered for it
    /// within `timeout` of the start.
    pub fn with_worker_timeout(mut self, timeout: Duration) -> Self {
        self.worker_timeout = Some(timeout);
        self
    }

    /// Gives workers the worker timeout as their lease (see `--worker-fence`).
    pub fn with_worker_fence(mut self, fence: bool) -> Self {
        self.worker_fence = fence;
        self
    }

    /// Every slot has a worker registered, or is down (lost, or never registered
    /// within the worker timeout): the LM runs with the workers it has (lm-core's
    /// readiness rule, [`lm_core::gate`]).
    pub fn ready(&self) -> bool {
        self.readiness().is_ready()
    }

    /// Its worker slots: how many are neither registered nor down.
    pub(super) fn readiness(&self) -> lm_core::gate::Readiness {
        lm_core::gate::Readiness::of(
            (self.workers.iter().zip(&self.slot_down)).map(|(w, down)| (w.is_some(), *down)),
        )
    }

    /// The ordered sender to the worker of `slot`, once it registered.
    pub(super) fn worker_sender(&self, slot: usize) -> Option<&OrderedSender<WorkerOrder>> {
        self.workers.get(slot).and_then(Option::as_ref)
    }

    pub(super) fn slot_of(&self, node: NodeId) -> usize {
        node.index() % self.workers.len()
    }

    pub(super) fn publish(&mut self) {
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
    pub(super) fn state_changed(&mut self, ctx: &mut Context<Self>) {
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

    fn order(&mut self, node: NodeId, order: WorkerOrder) {
        let slot = self.slot_of(node);
        match &self.workers[slot] {
            Some(sender) => sender.send(order),
            None => self.held_orders[slot].push(order),
        }
    }

    /// Carries out one step's output, whatever its messages: orders go to the
    /// workers of their nodes (in the core's order: a kill leaves before the start
    /// that reuses its room), requeues to the GM of their queue, the heartbeat to
    /// every GM; the answer to the GM's request (launch, preemption, ...) is returned
    /// for the caller.
    pub(super) fn apply(&mut self, out: LmOutput, ctx: &mut Context<Self>) -> Option<LmToGm> {
        let mut answer = None;
        for order in out.to_workers {
            match &order {
                WorkerOrder::Kill(kill) => {
                    self.counters.kills_sent += 1;
                    tracing::info!(task = %kill.task, job = kill.task.job.0, node = %kill.node, "killing a task (preempted, reclaimed or cancelled)");
                }
                WorkerOrder::Promote(promote) => {
                    self.counters.promotions += 1;
                    tracing::info!(task = %promote.task, job = promote.task.job.0, node = %promote.node, "promoting a QUEUEABLE task to GUARANTEED");
                }
                WorkerOrder::Start(_) => {}
            }
            self.order(order.node(), order);
        }
        for (to, message) in out.to_gms {
            match message.route() {
                LmRoute::State => self.publish(),
                LmRoute::Answer => answer = Some(message),
                LmRoute::Stream => self.send_to_gm(to, message),
            }
        }
        if !out.events.is_empty() {
            (self.events)(out.events);
        }
        if answer.is_some() {
            self.state_changed(ctx);
        }
        answer
    }

    /// Sends one of the LM's own messages (not an answer, not the state) to its GM
    /// on that GM's ordered stream, retried until delivered.
    pub(super) fn send_to_gm(&mut self, to: GmAddress, message: LmToGm) {
        self.count_sent(&message);
        let gms: Vec<usize> = match to {
            GmAddress::One(gm) => vec![gm.index()],
            GmAddress::All => (0..self.to_gm.len()).collect(),
        };
        for g in gms {
            match self.to_gm.get(g).and_then(Option::as_ref) {
                Some(sender) => sender.send(message.clone()),
                None => {
                    // Without a link the GM learns ends from the event stream: the
                    // ends left for it to publish are published here.
                    if let Some(e) = message.ends_gm_publishes() {
                        let events = (e.ends.iter())
                            .map(|end| TaskEvent::of_end(e.lm, end, e.publish))
                            .collect();
                        (self.events)(events);
                        continue;
                    }
                    self.counters.gm_undeliverable += 1;
                    // Dropping tasks handed back loses them: always said.
                    let mut hands_back = false;
                    message.for_each_task(|_, fact| {
                        hands_back |= matches!(fact, TaskFact::Requeued { .. })
                    });
                    if hands_back || self.counters.gm_undeliverable == 1 {
                        tracing::error!(
                            gm = g,
                            kind = message.kind(),
                            "no link to this GM: its message is dropped (configure --gm-url)"
                        );
                    }
                }
            }
        }
    }

    /// Start orders not yet delivered to workers, and tasks running.
    pub fn load(&self) -> (usize, usize) {
        let pending = self
            .workers
            .iter()
            .flatten()
            .map(OrderedSender::pending)
            .sum::<usize>()
            + self.held_orders.iter().map(Vec::len).sum::<usize>()
            + self
                .to_gm
                .iter()
                .flatten()
                .map(OrderedSender::pending)
                .sum::<usize>();
        (pending, self.core.running().len())
    }
}

impl Actor for LmActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1 << 20);
        ctx.run_interval(self.heartbeat, |act, ctx| {
            if let Ok(out) = act.core.step(clock::now(), LmInput::Tick) {
                act.apply(out, ctx);
            }
            let forgotten = act.core.lost_runs_forgotten();
            if forgotten > act.lost_forgotten_logged {
                tracing::warn!(
                    forgotten,
                    since_last = forgotten - act.lost_forgotten_logged,
                    limit = lm_core::core::LOST_MEMORY,
                    "the oldest lost runs were forgotten (memory full): a late report of one is taken as one of a task this LM does not hold"
                );
                act.lost_forgotten_logged = forgotten;
            }
            let voids = act.core.void_preempts_forgotten();
            if voids > act.voids_forgotten_logged {
                tracing::warn!(
                    forgotten = voids,
                    since_last = voids - act.voids_forgotten_logged,
                    limit = lm_core::preempt_holds::VOID_MEMORY,
                    "the oldest void preemption requests were forgotten (memory full): a late copy of one would be served as a new request"
                );
                act.voids_forgotten_logged = voids;
            }
        });
        if let Some(timeout) = self.worker_timeout {
            let every = (timeout / 4).max(Duration::from_millis(25));
            ctx.run_interval(every, |act, ctx| act.check_workers(ctx));
        }
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
