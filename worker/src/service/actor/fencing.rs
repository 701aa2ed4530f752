//! The actor's side of the fence ([`super::super::fence`]): stop everything held and
//! refuse starts, until the LM confirms the worker again.

use super::WorkerActor;
use crate::core::WorkerInput;
use actix::prelude::*;
use common::messages::WorkerReport;
use common::NodeId;
use service_kit::clock;
use std::time::Duration;

/// The LM has not confirmed this worker for most of its lease (see
/// `super::fence`): every task held stops, SIGKILLed within `grace`, and is reported
/// lost. Answers how many tasks stopped.
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct Fence {
    pub reason: String,
    pub grace: Duration,
}

impl Handler<Fence> for WorkerActor {
    type Result = usize;
    fn handle(&mut self, msg: Fence, ctx: &mut Context<Self>) -> usize {
        let now = clock::now();
        let mut reports = Vec::new();
        let nodes: Vec<NodeId> = self.nodes.keys().copied().collect();
        for node in nodes {
            let Some(w) = self.nodes.get_mut(&node) else {
                continue;
            };
            let input = WorkerInput::Fence {
                reason: msg.reason.clone(),
            };
            if let Ok(out) = w.step(now, input) {
                self.take(node, out, &mut reports, Some(msg.grace), ctx);
            }
        }
        let stopped = reports
            .iter()
            .filter(|r| matches!(r, WorkerReport::Failed { .. }))
            .count();
        self.counters.fences += 1;
        self.counters.fenced_tasks += stopped as u64;
        self.fenced = Some(msg.reason.clone());
        tracing::warn!(tasks = stopped, reason = %msg.reason, grace_ms = msg.grace.as_millis() as u64, "fenced: every task here stopped and reported lost, before the LM can declare this worker lost and have them run elsewhere");
        self.emit(reports);
        self.reschedule(ctx);
        stopped
    }
}

/// The LM confirmed this worker again: start orders are taken again.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Unfence;

impl Handler<Unfence> for WorkerActor {
    type Result = ();
    fn handle(&mut self, _: Unfence, _: &mut Context<Self>) {
        self.fenced = None;
    }
}
