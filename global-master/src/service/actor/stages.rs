//! What the core's DAG stage decided, carried out (see `gm_core::dag`): tasks held
//! for a parent stage show `blocked`, released ones `queued`; a task that will never
//! run (a parent stage failed) ends failed, is journalled and published like any end.

use super::GmActor;
use crate::core::GmOutput;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{TaskEnd, TaskFailure};
use common::{Micros, NodeId};

impl GmActor {
    /// Blocked and released tasks into the tracker; tasks that never run end failed.
    pub(super) fn record_dag_progress(&mut self, now: Micros, out: &GmOutput) {
        for b in &out.blocked {
            self.tracker.blocked(b.task, &b.stage, &b.waits_for);
        }
        for task in &out.released {
            self.tracker.released(*task);
        }
        if out.never_run.is_empty() {
            return;
        }
        let mut events = Vec::with_capacity(out.never_run.len());
        let mut ends = Vec::with_capacity(out.never_run.len());
        for never in &out.never_run {
            let failure = TaskFailure::StartFailed {
                reason: format!("parent stage `{}` failed", never.parent),
            };
            tracing::info!(task = %never.task, job = never.task.job.0, stage = %never.stage, parent = %never.parent, "task will not run: a parent stage failed");
            events.push(TaskEvent {
                task: never.task,
                at: now,
                kind: TaskEventKind::Failed {
                    detail: failure.to_string(),
                    reannounced: false,
                },
            });
            let attempt = self.tracker.task(never.task).map_or(1, |s| s.attempt);
            self.tracker.never_run(never.task, failure.clone(), now);
            ends.push(TaskEnd {
                task: never.task,
                attempt,
                node: NodeId(0),
                at: now,
                failure: Some(failure),
            });
        }
        self.journal_ends(&ends, &[], &[]);
        (self.events)(events);
    }
}
