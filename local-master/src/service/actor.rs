//! The LM actor: hosts the pure [`LocalMaster`] core, one `Handler` per message.
//!
//! Launch batches and preemption requests are validated by the core and answered at
//! once; start and kill orders go to the workers through one ordered, retrying sender
//! per worker slot (a kill leaves before the start that reuses its room); preempted
//! tasks go back to the GM serving their queue through one ordered, retrying sender
//! per GM; the state goes to every GM each heartbeat and, rate-limited, after every
//! change. Nothing is published until every expected worker has registered.

use super::orders::{requeue_batches, worker_link, RequeueLink, WorkerLinks, WorkerOrder};
use crate::core::{LmConfig, LmEffects, LmError, LocalMaster};
use crate::queueable::QueueableConfig;
use actix::prelude::*;
use common::cluster::LmSpec;
use common::events::TaskEvent;
use common::fairness::FairnessConfig;
use common::messages::{
    HeldTask, LaunchBatch, LaunchOutcome, LaunchResponse, LmSnapshot, Placement, PreemptResponse,
    PreemptedTasks, WorkerAssignment, WorkerReport,
};
use common::protocol::{GmToLm, LmToGm, WorkerToLm};
use common::{Micros, NodeId};
use lm_core::{LmInput, LmOutput};
use service_kit::clock;
use service_kit::links::{OrderedSender, Sink};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// Tasks taken over from re-registering workers after a restart.
    pub adopted: u64,
    /// Reports of tasks that ended while this LM was away (published, no state).
    pub orphan_reports: u64,
    pub preempt_requests: u64,
    pub preemptions: u64,
    /// Preemption refusals by reason.
    pub preempt_refused: BTreeMap<&'static str, u64>,
    pub kills_sent: u64,
    /// QUEUEABLE tasks promoted to GUARANTEED (orders sent to their workers).
    pub promotions: u64,
    /// Tasks handed back to their GM after a kill, and the work they lost.
    pub requeued: u64,
    pub wasted: Micros,
}

pub struct LmActor {
    pub(super) core: LocalMaster,
    workers: Vec<Option<OrderedSender<WorkerOrder>>>,
    /// The URL each slot's worker registered with (to give a re-registering
    /// `AUTO_SLOT` worker its slot back).
    worker_urls: Vec<Option<String>>,
    held_orders: Vec<Vec<WorkerOrder>>,
    /// Per GM: preempted, reclaimed or shed tasks on their way back to it.
    requeues: Vec<Option<OrderedSender<PreemptedTasks>>>,
    snapshots: Sink<LmSnapshot>,
    events: Sink<Vec<TaskEvent>>,
    heartbeat: Duration,
    min_interval: Duration,
    last_publish: Micros,
    publish_scheduled: bool,
    pub(super) counters: LmCounters,
    /// This life of the LM (start time, µs): workers register again when it changes.
    incarnation: u64,
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
        let now = clock::now();
        LmActor {
            core: LocalMaster::new(spec, gms, config, now),
            workers: (0..slots).map(|_| None).collect(),
            worker_urls: vec![None; slots],
            held_orders: vec![Vec::new(); slots],
            requeues: Vec::new(),
            snapshots,
            events,
            heartbeat: Duration::from_micros(heartbeat.0),
            min_interval,
            last_publish: Micros::ZERO,
            publish_scheduled: false,
            counters: LmCounters::default(),
            incarnation: now.0,
        }
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Verifies preemptions against `fairness` and hands preempted tasks back to
    /// their GMs through `requeue_links` (index = GM id). Call inside a tokio runtime.
    pub fn with_fairness(
        mut self,
        fairness: Arc<FairnessConfig>,
        requeue_links: Vec<RequeueLink>,
    ) -> Self {
        self.core = self.core.with_fairness(fairness);
        self.with_requeues(requeue_links)
    }

    /// Accepts QUEUEABLE work (Mercury): worker queues, reclaim, shedding, quotas and
    /// promotion as `config` says. Killed and shed tasks go back to their GMs through
    /// `requeue_links` (index = GM id). Call inside a tokio runtime.
    pub fn with_queueable(
        mut self,
        config: QueueableConfig,
        requeue_links: Vec<RequeueLink>,
    ) -> Self {
        self.core = self.core.with_queueable(config);
        self.with_requeues(requeue_links)
    }

    /// Where tasks taken back from workers go (set once: fairness and QUEUEABLE work
    /// share the same links).
    fn with_requeues(mut self, requeue_links: Vec<RequeueLink>) -> Self {
        if self.requeues.is_empty() {
            self.requeues = requeue_links
                .into_iter()
                .map(|l| Some(OrderedSender::start(requeue_batches(l))))
                .collect();
        }
        self
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
    /// every GM; the answers to the GM's request (launch, preemption) are returned for
    /// the caller.
    pub(super) fn apply(
        &mut self,
        out: LmOutput,
        ctx: &mut Context<Self>,
    ) -> (Option<LaunchResponse>, Option<PreemptResponse>) {
        let (mut launch, mut preempt) = (None, None);
        for order in out.to_workers {
            match &order {
                WorkerOrder::Kill(kill) => {
                    self.counters.kills_sent += 1;
                    tracing::info!(task = %kill.task, job = kill.task.job.0, node = %kill.node, "killing a preempted task");
                }
                WorkerOrder::Promote(promote) => {
                    self.counters.promotions += 1;
                    tracing::info!(task = %promote.task, job = promote.task.job.0, node = %promote.node, "promoting a QUEUEABLE task to GUARANTEED");
                }
                WorkerOrder::Start(_) => {}
            }
            self.order(order.node(), order);
        }
        for (_, message) in out.to_gms {
            match message {
                LmToGm::State(_) => self.publish(),
                LmToGm::Requeue(preempted) => self.requeue(preempted),
                LmToGm::LaunchAnswer(r) => launch = Some(r),
                LmToGm::PreemptAnswer(r) => preempt = Some(r),
            }
        }
        if !out.events.is_empty() {
            (self.events)(out.events);
        }
        if launch.is_some() || preempt.is_some() {
            self.state_changed(ctx);
        }
        (launch, preempt)
    }

    /// Hands preempted tasks back to the GM that serves their queue (retried until
    /// delivered).
    fn requeue(&mut self, preempted: PreemptedTasks) {
        self.counters.requeued += preempted.tasks.len() as u64;
        for (task, lost) in &preempted.tasks {
            self.counters.wasted += *lost;
            tracing::info!(task = %task.id, job = task.id.job.0, gm = %preempted.gm, lost_ms = lost.0 / 1000, "handing a preempted task back to its GM");
        }
        match self
            .requeues
            .get(preempted.gm.index())
            .and_then(Option::as_ref)
        {
            Some(sender) => sender.send(preempted),
            None => {
                tracing::error!(gm = %preempted.gm, tasks = preempted.tasks.len(), "no link to this GM: preempted tasks cannot be queued again (configure --gm-url)")
            }
        }
    }

    /// Takes the tasks a re-registering worker holds into the state.
    fn adopt(&mut self, slot: usize, holding: Vec<HeldTask>) {
        if holding.is_empty() {
            return;
        }
        let now = clock::now();
        let n = holding.len();
        let mut fx = LmEffects::default();
        for held in holding {
            let (task, node) = (held.task.id, held.node);
            if self.slot_of(node) != slot {
                tracing::warn!(task = %task, job = task.job.0, %node, slot, "worker holds a task on a node of another slot; ignored");
                continue;
            }
            match self.core.adopt(now, held, &mut fx) {
                Ok(true) => self.counters.adopted += 1,
                Ok(false) => {
                    self.counters.adopted += 1;
                    tracing::warn!(task = %task, job = task.job.0, %node, "adopted task exceeds the node's free resources");
                }
                Err(e) => {
                    tracing::warn!(task = %task, job = task.job.0, error = %e, "cannot adopt task")
                }
            }
        }
        if !fx.events.is_empty() {
            (self.events)(fx.events);
        }
        tracing::info!(lm = %self.core.id(), slot, tasks = n, "worker registered again holding tasks; taken into the state");
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
                .requeues
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
        });
    }
}

/// A GM's launch batch; answered with the outcomes and the LM's state.
#[derive(Message, Debug)]
#[rtype(result = "Result<LaunchResponse, LaunchError>")]
pub struct Launch(pub LaunchBatch);

/// Why a launch batch was not handled at all (nothing of it was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// Malformed for this LM (addressed to another one).
    #[error("{0}")]
    Invalid(String),
    /// Some workers have not registered yet (start-up, or after a restart, when the
    /// tasks they hold are not yet in the state): send again shortly.
    #[error("not ready: {missing} of {slots} workers have not registered with this LM yet")]
    NotReady { missing: usize, slots: usize },
}

/// How long an LM's answer to a launch waits for its start orders to reach the
/// workers (the GM's own timeout and resend take over beyond).
const START_DELIVERY_WAIT: Duration = Duration::from_secs(3);

impl Handler<Launch> for LmActor {
    type Result = ResponseFuture<Result<LaunchResponse, LaunchError>>;

    /// The answer goes out once the batch's start orders have reached their workers:
    /// a GM told "launched" can then rely on the task existing somewhere other than
    /// this LM's memory (a worker lists it when it registers with a restarted LM).
    fn handle(&mut self, msg: Launch, ctx: &mut Context<Self>) -> Self::Result {
        let answer = self.launch(msg.0, ctx);
        Box::pin(async move {
            let (response, deliveries) = answer?;
            let all = futures_util::future::join_all(deliveries);
            if tokio::time::timeout(START_DELIVERY_WAIT, all)
                .await
                .is_err()
            {
                tracing::warn!(
                    "start orders not yet delivered to their workers; answering the launch anyway"
                );
            }
            Ok(response)
        })
    }
}

/// A future that resolves when a worker has received its orders.
type Delivery = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl LmActor {
    fn launch(
        &mut self,
        batch: LaunchBatch,
        ctx: &mut Context<Self>,
    ) -> Result<(LaunchResponse, Vec<Delivery>), LaunchError> {
        if !self.ready() {
            return Err(LaunchError::NotReady {
                missing: self.workers.iter().filter(|w| w.is_none()).count(),
                slots: self.workers.len(),
            });
        }
        self.counters.batches += 1;
        self.counters.requests += batch.requests.len() as u64;
        let (gm, seq) = (batch.gm, batch.seq);
        let out = self
            .core
            .step(clock::now(), LmInput::Gm(GmToLm::Launch(batch)))
            .map_err(|e| LaunchError::Invalid(e.to_string()))?;
        let mut slots: Vec<usize> = out
            .to_workers
            .iter()
            .filter(|o| matches!(o, WorkerOrder::Start(_)))
            .map(|o| self.slot_of(o.node()))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let answer = out.launch_answer();
        if let Some(r) = answer {
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
        let response = self
            .apply(out, ctx)
            .0
            .ok_or_else(|| LaunchError::Invalid("the core produced no response".to_owned()))?;
        let deliveries = slots
            .into_iter()
            .filter_map(|slot| self.workers[slot].as_ref())
            .map(|sender| Box::pin(sender.delivered()) as Delivery)
            .collect();
        Ok((response, deliveries))
    }
}

/// Reports from one worker, in order. Refused (and so retried by the worker) while
/// the worker of a reported node has not registered with this LM: after a restart the
/// worker must first tell which tasks it holds.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), String>")]
pub struct Reports(pub Vec<WorkerReport>);

impl Handler<Reports> for LmActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: Reports, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(node) = msg
            .0
            .iter()
            .map(WorkerReport::node)
            .find(|n| self.workers[self.slot_of(*n)].is_none())
        {
            return Err(format!(
                "the worker of {node} has not registered with this LM (incarnation {}); register first",
                self.incarnation
            ));
        }
        let mut changed = false;
        for report in msg.0 {
            self.counters.reports += 1;
            changed |= matches!(report, WorkerReport::Finished { .. });
            match self
                .core
                .step(clock::now(), LmInput::Worker(WorkerToLm::Report(report)))
            {
                Ok(out) => {
                    self.apply(out, ctx);
                }
                Err(LmError::UnknownTask { task, node }) => {
                    // Ended while this LM was away (or a report sent again after its
                    // answer was lost): nothing to release, but observers still learn
                    // how the task ended; they drop duplicates.
                    self.counters.orphan_reports += 1;
                    tracing::info!(task = %task, job = task.job.0, %node, "report of a task this LM does not hold (it ended while the LM was away, or the report is a repeat); published");
                    let event = orphan_event(self.core.id(), report);
                    (self.events)(vec![event]);
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
        Ok(())
    }
}

/// The event for a report of a task this LM does not know.
fn orphan_event(lm: common::LmId, report: WorkerReport) -> TaskEvent {
    use common::events::TaskEventKind;
    let (task, at, kind) = match report {
        WorkerReport::Started { node, task, at } => (task, at, TaskEventKind::Started { lm, node }),
        WorkerReport::Finished { node, task, at } => {
            (task, at, TaskEventKind::Finished { lm, node })
        }
        WorkerReport::Killed { node, task, at } => (
            task,
            at,
            TaskEventKind::Preempted {
                lm,
                node,
                lost: Micros::ZERO,
            },
        ),
    };
    TaskEvent { task, at, kind }
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
    /// Its start, kill and promote endpoints.
    pub links: WorkerLinks,
    /// Tasks the worker holds (it registers again after this LM restarted).
    pub holding: Vec<HeldTask>,
    /// Tasks the worker finished recently (see `WorkerRegistration::finished`).
    pub finished: Vec<common::TaskId>,
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
        for task in msg.finished {
            self.core.finished_before_restart(task);
        }
        self.adopt(slot, msg.holding);
        let sender = OrderedSender::start(worker_link(msg.links));
        for order in std::mem::take(&mut self.held_orders[slot]) {
            sender.send(order);
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
            incarnation: self.incarnation,
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
