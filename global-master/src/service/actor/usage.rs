//! The accounting of runs ([`crate::service::observe::usage`]) in the actor: tasks
//! booked when their job is accepted (or read back from the journal), runs charged
//! when a step's output says they ended (before the tracker forgets when they
//! started), the rows handed to the journal, which writes them with the step's
//! task ends.

use super::GmActor;
use crate::core::GmOutput;
use crate::service::observe::usage::{Ledger, UsageLine, UsageQuery, UsageRow};
use actix::prelude::*;
use common::{Micros, TaskId, TaskSpec};

impl GmActor {
    /// The accounting.
    pub fn usage(&self) -> &Ledger {
        &self.usage
    }

    /// Books the tasks of an accepted job of `user`.
    pub(super) fn book_usage<'a>(
        &mut self,
        specs: impl IntoIterator<Item = &'a TaskSpec>,
        user: Option<&str>,
    ) {
        for spec in specs {
            let queue = self.queue_name(spec.queue);
            self.usage.book(spec.id, user, &queue, spec.resources);
        }
    }

    /// Charges the runs `out` ended: each end of a task still open here (a repeat
    /// of an end is not charged twice), from the start its worker reported (in
    /// this output or before) to its end; each task a cancel stopped while it ran,
    /// up to `now`. Called before the tracker takes the output.
    pub(super) fn charge_usage(&mut self, now: Micros, out: &GmOutput) {
        let mut rows: Vec<UsageRow> = Vec::new();
        for end in &out.ended {
            let Some(status) = self.tracker.task(end.task) else {
                continue;
            };
            if status.state.is_final() {
                continue;
            }
            let started = (out.started.iter())
                .find(|s| s.task == end.task && s.attempt == end.attempt)
                .map(|s| s.at.0)
                .or(status
                    .started_at_us
                    .filter(|_| status.attempt == end.attempt));
            let ran = started.map_or(0, |s| end.at.0.saturating_sub(s));
            rows.extend(self.usage.charge(now, end.task, Micros(ran), end.used));
            if !out.retries.iter().any(|r| r.task == end.task) {
                self.usage.close(end.task);
            }
        }
        for task in &out.cancelled {
            let Some(status) = self.tracker.task(*task) else {
                continue;
            };
            if status.state.is_final() {
                continue;
            }
            if let Some(started) = status.started_at_us {
                rows.extend(self.usage.charge(
                    now,
                    *task,
                    Micros(now.0.saturating_sub(started)),
                    None,
                ));
            }
            self.usage.close(*task);
        }
        self.record_usage(now, rows);
    }

    /// Charges a run its LM preempted (it ran for `ran`; the task is queued again).
    pub(super) fn charge_preempted(&mut self, now: Micros, task: TaskId, ran: Micros) {
        let row = self.usage.charge(now, task, ran, None);
        self.record_usage(now, row.into_iter().collect());
    }

    fn record_usage(&mut self, now: Micros, rows: Vec<UsageRow>) {
        self.usage.expire(now);
        let tracker = &self.tracker;
        self.usage
            .prune(|t| tracker.task(t).is_some_and(|s| !s.state.is_final()));
        if let (false, Some(journal)) = (rows.is_empty(), &mut self.journal) {
            journal.add_usage(rows);
        }
    }
}

/// `GET /v1/usage`: the sums per (user, queue) the query asks for.
#[derive(Message, Debug)]
#[rtype(result = "(Vec<UsageLine>, UsageLine)")]
pub struct GetUsage(pub UsageQuery);

impl Handler<GetUsage> for GmActor {
    type Result = MessageResult<GetUsage>;

    fn handle(&mut self, msg: GetUsage, _: &mut Context<Self>) -> Self::Result {
        self.usage.expire(service_kit::clock::now());
        MessageResult(self.usage.query(&msg.0))
    }
}
