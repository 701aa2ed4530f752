//! Workers as the LM sees them: registration (a worker announces itself for a slot
//! and gets its nodes back; after an LM restart it lists the tasks it holds, which
//! are adopted), reports (started, finished, killed), each a step of the core, and
//! liveness: a worker that says nothing (no report, no check-in) for the worker
//! timeout is lost: its nodes go down and its tasks end `lost` at their GMs
//! ([`LmInput::WorkerLost`]); when it registers again its nodes come back and the lost
//! tasks it still holds are killed ([`LmInput::WorkerBack`]).

use super::LmActor;
use crate::core::{LmEffects, LmError};
use crate::service::orders::WorkerLink;
use actix::prelude::*;
use common::events::TaskEvent;
use common::messages::{
    HeldTask, TaskFailure, WorkerAlive, WorkerAliveAnswer, WorkerAssignment, WorkerReport,
};
use common::protocol::facts::TaskFact;
use common::protocol::WorkerToLm;
use common::{Micros, NodeId};
use lm_core::LmInput;
use service_kit::clock;
use service_kit::links::OrderedSender;

impl LmActor {
    /// The nodes of a worker slot (node n goes to slot n mod slots).
    pub(crate) fn nodes_of(&self, slot: usize) -> Vec<NodeId> {
        (0..self.core.topology().node_count())
            .filter(|n| n % self.workers.len() == slot)
            .map(|n| NodeId(n as u32))
            .collect()
    }

    /// Declares the worker of `slot` lost (see the module documentation): its
    /// undelivered orders are dropped (counted), its nodes go down, its tasks end
    /// `lost` at the GMs that launched them.
    pub(crate) fn lose_worker(&mut self, slot: usize, reason: &str, ctx: &mut Context<Self>) {
        let was_ready = self.ready();
        // Abandoned, not just dropped: the orders it still holds must never reach
        // the worker (they would start runs reported lost here, on nodes given to
        // other work once the worker is back).
        if let Some(sender) = self.workers[slot].take() {
            self.counters.orders_dropped += sender.abandon() as u64;
        }
        self.counters.orders_dropped += std::mem::take(&mut self.held_orders[slot]).len() as u64;
        self.slot_down[slot] = true;
        self.counters.workers_lost += 1;
        let nodes = self.nodes_of(slot);
        let input = LmInput::WorkerLost {
            nodes,
            reason: reason.to_owned(),
        };
        match self.core.step(clock::now(), input) {
            Ok(out) => {
                let mut lost = 0usize;
                for (_, m) in &out.to_gms {
                    m.for_each_task(|_, fact| {
                        if let TaskFact::Ended(end) = fact {
                            lost += matches!(end.failure, Some(TaskFailure::Lost { .. })) as usize;
                        }
                    });
                }
                self.counters.tasks_lost += lost as u64;
                tracing::warn!(lm = %self.core.id(), slot, url = self.worker_urls[slot].as_deref().unwrap_or("-"), tasks_lost = lost, reason, "worker lost: its nodes are down and its tasks reported lost to their GMs");
                self.apply(out, ctx);
            }
            Err(e) => tracing::error!(slot, error = %e, "cannot declare the worker lost"),
        }
        if !was_ready && self.ready() {
            tracing::info!(lm = %self.core.id(), "every slot has a worker or is down; publishing state");
            self.publish();
        } else {
            self.state_changed(ctx);
        }
    }

    /// The runs a restarted worker lists as ended (finished or failed) that this
    /// LM still counts running there end so, with their real end times, as their
    /// reports would have: not lost.
    fn unheard_ends(
        &mut self,
        slot: usize,
        ended: &[common::messages::TaskEnd],
        ctx: &mut Context<Self>,
    ) {
        let now = clock::now();
        let reports = self.core.unheard_ends(&self.nodes_of(slot), ended);
        for report in reports {
            tracing::info!(slot, task = %report.task(), "a restarted worker lists as ended a task this LM never heard end; ended so, not lost");
            match self
                .core
                .step(now, LmInput::Worker(WorkerToLm::Report(report)))
            {
                Ok(out) => {
                    self.apply(out, ctx);
                }
                Err(e) => {
                    tracing::error!(slot, error = %e, "cannot end a task the restarted worker ended")
                }
            }
        }
    }

    /// Declares lost every worker silent for the worker timeout, and down every slot
    /// no worker registered for within it since the start.
    pub(crate) fn check_workers(&mut self, ctx: &mut Context<Self>) {
        let Some(timeout) = self.worker_timeout else {
            return;
        };
        let now = clock::now();
        let limit = Micros(timeout.as_micros() as u64);
        for slot in 0..self.workers.len() {
            if self.slot_down[slot] || now.since(self.last_seen[slot]) <= limit {
                continue;
            }
            let reason = if self.workers[slot].is_some() {
                format!("no word from its worker for {} ms", timeout.as_millis())
            } else {
                format!(
                    "no worker registered for slot {slot} within {} ms of the LM's start",
                    timeout.as_millis()
                )
            };
            self.lose_worker(slot, &reason, ctx);
        }
    }

    /// The end of a task this LM does not hold (it ended while the LM was away, so
    /// the previous life could not tell its GM) goes to the GM that accepted its job,
    /// named in the job id's top bits: without it that GM would wait for the end
    /// forever (found by `loadgen faults`, seed 9). A repeat is harmless: a GM takes
    /// one end per task.
    /// `publish`: who publishes it (a failure a worker listed on registering again:
    /// its GM, if it takes it).
    fn orphan_end_to_gm(
        &mut self,
        end: common::messages::TaskEnd,
        publish: common::messages::EndsPublished,
    ) {
        let task = end.task;
        let gm = task.job.0 >> common::JobId::SUBMISSION_BITS;
        if gm >= u64::from(self.core.topology().gms) {
            return;
        }
        let gm = common::GmId(gm as u16);
        let ended = common::messages::TasksEnded {
            lm: self.core.id(),
            gm,
            ends: vec![end],
            publish,
        };
        self.send_to_gm(
            common::protocol::GmAddress::One(gm),
            common::protocol::LmToGm::Ended(ended),
        );
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
        for started in fx.started {
            let gm = common::protocol::GmAddress::One(started.gm);
            self.send_to_gm(gm, common::protocol::LmToGm::Started(started));
        }
        tracing::info!(lm = %self.core.id(), slot, tasks = n, "worker registered again holding tasks; taken into the state");
    }
}

/// Reports from one worker, in order. Refused (and so retried by the worker) while
/// the worker of a reported node has not registered with this LM: after a restart the
/// worker must first tell which tasks it holds.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), String>")]
pub struct FromWorker(pub Vec<WorkerToLm>);

impl Handler<FromWorker> for LmActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: FromWorker, ctx: &mut Context<Self>) -> Self::Result {
        self.take_reports(msg, ctx)
    }
}

/// Why reports a worker sent over HTTP were refused (nothing applied).
#[derive(Debug)]
pub enum ReportRefused {
    /// The worker of a reported node has not registered with this life (409: it
    /// registers, then sends again).
    NotRegistered(String),
    /// The session presented is not the one of the worker the LM assigned a
    /// reported node to (403).
    NotItsNode(String),
}

/// Reports from a worker over HTTP, with the SHA-256 of the session it presented:
/// taken only if every reported node belongs to the slot whose worker holds that
/// session (issue 32: the worker credential is shared by every worker).
#[derive(Message, Debug)]
#[rtype(result = "Result<(), ReportRefused>")]
pub struct FromSessionWorker {
    pub messages: Vec<WorkerToLm>,
    pub session: Option<[u8; 32]>,
}

impl Handler<FromSessionWorker> for LmActor {
    type Result = Result<(), ReportRefused>;

    fn handle(&mut self, msg: FromSessionWorker, ctx: &mut Context<Self>) -> Self::Result {
        for message in &msg.messages {
            let node = message.node();
            let slot = self.slot_of(node);
            if self.workers[slot].is_none() {
                break; // answered by `take_reports` (409: register first)
            }
            let bound = self.worker_sessions[slot];
            if bound.is_none() || bound != msg.session {
                let why = match msg.session {
                    None => "missing",
                    Some(_) => "not the session of the worker this LM assigned the node to",
                };
                return Err(ReportRefused::NotItsNode(format!(
                    "{}: {why}: a worker may report only on the nodes of its own slot ({node} is slot {slot}'s)",
                    service_kit::auth::WORKER_SESSION_HEADER
                )));
            }
        }
        self.take_reports(FromWorker(msg.messages), ctx)
            .map_err(ReportRefused::NotRegistered)
    }
}

/// Binds the session issued to the worker that just registered for `slot`.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct BindSession {
    pub slot: u32,
    pub digest: [u8; 32],
}

impl Handler<BindSession> for LmActor {
    type Result = ();

    fn handle(&mut self, msg: BindSession, _: &mut Context<Self>) {
        if let Some(s) = self.worker_sessions.get_mut(msg.slot as usize) {
            *s = Some(msg.digest);
        }
    }
}

impl LmActor {
    /// Applies a worker's reports in order (see [`FromWorker`]).
    fn take_reports(&mut self, msg: FromWorker, ctx: &mut Context<Self>) -> Result<(), String> {
        if let Some(node) = msg
            .0
            .iter()
            .map(WorkerToLm::node)
            .find(|n| self.workers[self.slot_of(*n)].is_none())
        {
            return Err(format!(
                "the worker of {node} has not registered with this LM (incarnation {}); register first",
                self.incarnation
            ));
        }
        let now = clock::now();
        for message in &msg.0 {
            let slot = self.slot_of(message.node());
            self.last_seen[slot] = now;
        }
        let mut changed = false;
        for message in msg.0 {
            self.counters.reports += 1;
            changed |= matches!(
                message,
                WorkerToLm::Report(WorkerReport::Finished { .. } | WorkerReport::Failed { .. })
            );
            match self
                .core
                .step(clock::now(), LmInput::Worker(message.clone()))
            {
                Ok(out) => {
                    if !out.unowned_finished.is_empty() {
                        // Finished while this LM was away: kept for the GM's
                        // reconcile request, and sent to the GM its job id names.
                        self.counters.orphan_reports += 1;
                        let WorkerToLm::Report(report) = &message;
                        tracing::info!(task = %report.task(), job = report.task().job.0, node = %report.node(), "finish of a task this LM does not hold (it ended while the LM was away); remembered for its GM and published");
                        if let Some(end) = common::messages::TaskEnd::of_report(report) {
                            self.orphan_end_to_gm(end, common::messages::EndsPublished::ByLm);
                        }
                    }
                    self.apply(out, ctx);
                }
                Err(LmError::UnknownTask { task, .. })
                    if self.core.is_lost_run(task, report_attempt(&message)) =>
                {
                    // A repeat of a lost run's end (absorbed the first time): its GM
                    // heard it lost; publishing it would show a finish of that run.
                    self.counters.bad_reports += 1;
                    tracing::debug!(task = %task, job = task.job.0, "repeated report of a run reported lost; ignored");
                }
                Err(LmError::UnknownTask { task, node }) => {
                    // Ended while this LM was away (or a report sent again after its
                    // answer was lost): nothing to release, but observers still learn
                    // how the task ended; they drop duplicates.
                    self.counters.orphan_reports += 1;
                    tracing::info!(task = %task, job = task.job.0, %node, "report of a task this LM does not hold (it ended while the LM was away, or the report is a repeat); published");
                    let WorkerToLm::Report(report) = message;
                    if let Some(end) = common::messages::TaskEnd::of_report(&report) {
                        self.orphan_end_to_gm(end, common::messages::EndsPublished::ByLm);
                    }
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

/// The run a worker's message reports on.
fn report_attempt(message: &WorkerToLm) -> u32 {
    let WorkerToLm::Report(report) = message;
    report.attempt()
}

/// The event for a report of a task this LM does not know.
fn orphan_event(lm: common::LmId, report: WorkerReport) -> TaskEvent {
    use common::events::TaskEventKind;
    let (task, at, kind) = match report {
        WorkerReport::Started { node, task, at, .. } => {
            (task, at, TaskEventKind::Started { lm, node })
        }
        WorkerReport::Finished { node, task, at, .. } => {
            (task, at, TaskEventKind::finished(lm, node))
        }
        WorkerReport::Failed {
            node,
            task,
            at,
            failure,
            ..
        } => (task, at, TaskEventKind::ended(lm, node, Some(&failure))),
        WorkerReport::Killed { node, task, at, .. } => (
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
    pub link: WorkerLink,
    /// Tasks the worker holds (it registers again after this LM restarted).
    pub holding: Vec<HeldTask>,
    /// Runs the worker ended recently (see `WorkerRegistration::ended`).
    pub ended: Vec<common::messages::TaskEnd>,
    /// The SHA-256 of the worker's order key, which its process keeps for life:
    /// the same value again for a registered slot is that process asking again
    /// (the answer to its registration was lost), not a restart.
    pub process: Option<[u8; 32]>,
}

impl std::fmt::Debug for Register {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Register(slot {})", self.slot)
    }
}

impl Handler<Register> for LmActor {
    type Result = Result<WorkerAssignment, String>;

    fn handle(&mut self, msg: Register, ctx: &mut Context<Self>) -> Self::Result {
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
        let repeat = self.workers[slot].is_some()
            && !self.slot_down[slot]
            && msg.process.is_some()
            && self.worker_processes[slot] == msg.process
            && self.worker_urls[slot].as_deref() == Some(msg.url.as_str());
        if repeat {
            // The same process (same order key, same URL) asking again: the answer
            // to its registration was lost (issue 33, seed 284102: taken for a
            // restart, its running tasks were declared lost and killed).
            self.counters.registration_repeats += 1;
            tracing::info!(lm = %self.core.id(), slot, "the registered worker process registered again (the answer to its registration was lost); nothing of it is lost");
        } else if self.workers[slot].is_some() {
            // Registered in this life already: the worker restarted (its process
            // lost what it ran) or another took the slot over. What it lists as
            // finished ended (its reports died with the old process); the rest of
            // what the LM placed there is gone: lost, as if the worker had gone
            // silent.
            self.unheard_ends(slot, &msg.ended, ctx);
            self.lose_worker(
                slot,
                "its worker registered again (it restarted, or another worker took the slot)",
                ctx,
            );
        }
        let was_ready = self.ready();
        let nodes = self.nodes_of(slot);
        let node = nodes.first().copied().unwrap_or(NodeId(0));
        let mut republished: Vec<TaskEvent> = Vec::new();
        let mut reannounced = 0u64;
        for end in &msg.ended {
            // Only the slot's own nodes: a worker cannot end runs elsewhere.
            let on = if nodes.contains(&end.node) {
                end.node
            } else {
                node
            };
            let end = common::messages::TaskEnd {
                node: on,
                ..end.clone()
            };
            if !self.core.ended_before_restart(&end) {
                continue;
            }
            reannounced += 1;
            // A finish is published again here; a failure by its GM, which alone
            // knows whether the run is still the task's (`EndsPublished::ByGmAgain`).
            let publish = if end.failure.is_some() {
                common::messages::EndsPublished::ByGmAgain
            } else {
                republished.push(TaskEvent::reannounced(self.core.id(), &end));
                common::messages::EndsPublished::ByLm
            };
            // Its GM hears it too: a finish of a run an earlier LM life reported
            // lost ends its task if the retry has not gone out; a failure that
            // died with that life reaches the GM after all (not lost, issue 33).
            self.orphan_end_to_gm(end, publish);
        }
        self.counters.reannounced += reannounced;
        if reannounced > 0 {
            tracing::info!(ends = reannounced, slot, "worker registered with runs it ended that this LM life had not heard of; announced again at their real end times");
        }
        if !republished.is_empty() {
            (self.events)(republished);
        }
        if !repeat {
            self.orders_from[slot] = lm_core::gate::first_of_registration(
                &self.held_orders[slot],
                self.core.next_dispatch(),
            );
            // A repeat keeps its stream: orders on their way to the process stay.
            let sender = OrderedSender::start(msg.link);
            for order in std::mem::take(&mut self.held_orders[slot]) {
                sender.send(order);
            }
            self.workers[slot] = Some(sender);
        }
        self.worker_processes[slot] = msg.process;
        self.worker_urls[slot] = Some(msg.url);
        // The previous registration's session no longer holds the slot; the HTTP
        // handler binds the new one ([`BindSession`]).
        self.worker_sessions[slot] = None;
        self.last_seen[slot] = clock::now();
        if std::mem::take(&mut self.slot_down[slot]) {
            // Back: its nodes are offered again; the lost tasks it holds are killed.
            let holding = msg
                .holding
                .iter()
                .map(|h| (h.node, h.task.id, h.task.attempt))
                .collect();
            let input = LmInput::WorkerBack {
                nodes: self.nodes_of(slot),
                holding,
            };
            match self.core.step(clock::now(), input) {
                Ok(out) => {
                    tracing::info!(lm = %self.core.id(), slot, kills = out.to_workers.len(), "lost worker back: its nodes are up again; lost tasks it still holds are killed");
                    self.apply(out, ctx);
                    self.state_changed(ctx);
                }
                Err(e) => tracing::error!(slot, error = %e, "cannot take the worker back"),
            }
        }
        self.adopt(slot, msg.holding);
        let topology = self.core.topology().clone();
        let nodes = self
            .nodes_of(slot)
            .into_iter()
            .map(|n| (n, topology.capacity[n.index()]))
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
            lease_ms: match self.worker_timeout {
                Some(t) if self.worker_fence => t.as_millis() as u64,
                _ => 0,
            },
            orders_from: self.orders_from[slot],
        })
    }
}

/// A worker checks in (every `--lm-check-ms`): it is alive, and learns whether this
/// LM still counts it registered (same life, not declared lost); if not, it registers
/// again listing the tasks it holds.
/// The second field: the SHA-256 of the session presented (a check-in without the
/// slot's session keeps nothing alive and is answered "not registered").
#[derive(Message, Debug)]
#[rtype(result = "WorkerAliveAnswer")]
pub struct Alive(pub WorkerAlive, pub Option<[u8; 32]>);

impl Handler<Alive> for LmActor {
    type Result = MessageResult<Alive>;

    fn handle(&mut self, msg: Alive, _: &mut Context<Self>) -> Self::Result {
        let WorkerAlive { slot, url } = msg.0;
        let slot = slot as usize;
        let registered = slot < self.workers.len()
            && self.workers[slot].is_some()
            && self.worker_urls[slot].as_deref() == Some(url.as_str())
            && self.worker_sessions[slot].is_some()
            && self.worker_sessions[slot] == msg.1;
        if registered {
            self.last_seen[slot] = clock::now();
        }
        MessageResult(WorkerAliveAnswer {
            incarnation: self.incarnation,
            registered,
        })
    }
}
