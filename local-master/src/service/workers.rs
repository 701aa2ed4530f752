//! Workers as the LM sees them: registration (a worker announces itself for a slot
//! and gets its nodes back; after an LM restart it lists the tasks it holds, which
//! are adopted) and reports (started, finished, killed), each a step of the core.

use super::actor::LmActor;
use super::orders::WorkerLink;
use crate::core::{LmEffects, LmError};
use actix::prelude::*;
use common::events::TaskEvent;
use common::messages::{HeldTask, WorkerAssignment, WorkerReport};
use common::protocol::WorkerToLm;
use common::{Micros, NodeId};
use lm_core::LmInput;
use service_kit::clock;
use service_kit::links::OrderedSender;

impl LmActor {
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
                    self.apply(out, ctx);
                }
                Err(LmError::UnknownTask { task, node }) => {
                    // Ended while this LM was away (or a report sent again after its
                    // answer was lost): nothing to release, but observers still learn
                    // how the task ended; they drop duplicates.
                    self.counters.orphan_reports += 1;
                    tracing::info!(task = %task, job = task.job.0, %node, "report of a task this LM does not hold (it ended while the LM was away, or the report is a repeat); published");
                    let WorkerToLm::Report(report) = message;
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
        WorkerReport::Failed {
            node,
            task,
            at,
            failure,
        } => (task, at, crate::core::ended_event(lm, node, Some(&failure))),
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
    pub link: WorkerLink,
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
        let sender = OrderedSender::start(msg.link);
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
