//! The drain gave up ([`LeaveQueued`]): every task still queued is reported on the
//! event stream, and nothing more goes out (see [`crate::service::durable::shutdown`]).

use super::GmActor;
use crate::service::durable::shutdown::{LeaveQueued, LeftQueued};
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use service_kit::clock;

impl Handler<LeaveQueued> for GmActor {
    type Result = MessageResult<LeaveQueued>;

    fn handle(&mut self, _: LeaveQueued, _: &mut Context<Self>) -> Self::Result {
        let now = clock::now();
        let gm = self.gm();
        // Nothing more goes out: the queued tasks' runs never did, and the journal
        // says so, so the next life resumes each as the run it was to go out as.
        self.suspended = true;
        let mut left = LeftQueued::default();
        let lra_containers = self.core.lra_pending_containers();
        let queued: Vec<_> = self.core.pending().map(|p| p.task.id).collect();
        let events: Vec<TaskEvent> = queued
            .iter()
            .copied()
            .chain(lra_containers)
            .map(|task| {
                let journalled = self.journal.as_ref().is_some_and(|j| j.holds(task.job));
                let kind = if journalled {
                    left.suspended += 1;
                    tracing::info!(task = %task, job = task.job.0, "stopped with the task queued; the next life resumes it from the journal");
                    TaskEventKind::Suspended { gm }
                } else {
                    left.failed += 1;
                    tracing::warn!(task = %task, job = task.job.0, "shut down before placing the task");
                    TaskEventKind::failed("the global master shut down before placing it")
                };
                TaskEvent {
                    task,
                    at: now,
                    kind,
                }
            })
            .collect();
        if let Some(journal) = &mut self.journal {
            match journal.mark_unsent(&queued) {
                Ok(marked) => tracing::info!(tasks = marked, "runs of the queued tasks written as never sent: the next life resumes them as the same runs"),
                Err(e) => {
                    self.metrics.journal_errors += 1;
                    tracing::error!(error = %e, "cannot write the queued tasks' runs as never sent; the next life resumes them as the run after")
                }
            }
        }
        if !events.is_empty() {
            (self.events)(events);
        }
        MessageResult(left)
    }
}
