//! Worker reports: a task started, finished, or was killed (on the LM's order, or by
//! the worker on its own to make room).

use super::LocalMaster;
use crate::allocation::PendingKill;
use crate::effects::{ended_event, LmEffects, LmError};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{TaskEnd, TaskFailure, TaskStart, WorkerReport};
use common::Micros;

impl LocalMaster {
    /// A worker started or finished a task. Finishing returns the task's resources to
    /// the physical node (and so ends any repartition).
    pub fn handle_worker_report(
        &mut self,
        now: Micros,
        report: WorkerReport,
    ) -> Result<LmEffects, LmError> {
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        if self.lost.contains(&(report.task(), report.node())) {
            self.lost_task_reported(report, &mut effects);
            return Ok(effects);
        }
        // A failed task ends as a finished one does; only its event differs.
        let failure = match &report {
            WorkerReport::Failed { failure, .. } => Some(failure.clone()),
            _ => None,
        };
        match report {
            // Its job was cancelled and its kill is on the way (see cancel.rs).
            report if self.is_cancelling(report.task()) => {
                return Ok(self.cancelled_report(report));
            }
            WorkerReport::Started { node, task, at } if self.queued.contains_key(&task) => {
                self.queueable_started(now, node, task, at, &mut effects)?;
                if let Some(a) = self.running.get(&task) {
                    effects.started(lm, a.gm, TaskStart { task, node, at });
                }
            }
            // Started after the LM ordered its kill (preempted, shed or reclaimed):
            // the kill is on its way to the worker. The start is still reported, so
            // an observer sees the run the kill (or a finish winning the race) ends.
            WorkerReport::Started { node, task, at } if self.pending_kills.contains_key(&task) => {
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Started { node, task, at } => {
                let alloc = self
                    .running
                    .get_mut(&task)
                    .filter(|a| a.node == node)
                    .ok_or(LmError::UnknownTask { task, node })?;
                alloc.started = true;
                alloc.started_at = Some(at);
                effects.started(lm, alloc.gm, TaskStart { task, node, at });
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Killed { node, task, at } => {
                let Some(PendingKill {
                    gm,
                    task: spec,
                    lost,
                    ..
                }) = self.pending_kills.remove(&task)
                else {
                    // The worker made room for other work on its own.
                    self.ended_adopted(task, false);
                    return self.queueable_killed_by_worker(node, task, at);
                };
                self.ended_adopted(task, false);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Preempted { lm, node, lost },
                });
                effects.requeue(lm, gm, spec, lost);
            }
            WorkerReport::Finished { node, task, at }
            | WorkerReport::Failed { node, task, at, .. }
                if self.pending_kills.contains_key(&task) =>
            {
                // Finished before the kill reached the worker: the finish stands.
                let gm = self.pending_kills.remove(&task).map(|k| k.gm);
                self.ended_adopted(task, true);
                self.remember_if_finished(task, failure.as_ref());
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: ended_event(lm, node, failure.as_ref()),
                });
                if let Some(gm) = gm {
                    let end = TaskEnd {
                        task,
                        node,
                        at,
                        failure,
                    };
                    effects.ended(lm, gm, end);
                }
            }
            WorkerReport::Finished { node, task, at }
            | WorkerReport::Failed { node, task, at, .. } => {
                let gm = match self.running.get(&task) {
                    Some(a) if a.node == node => a.gm,
                    _ => return Err(LmError::UnknownTask { task, node }),
                };
                if self.release(task).is_none() {
                    return Err(LmError::UnknownTask { task, node });
                }
                self.ended_adopted(task, true);
                self.remember_if_finished(task, failure.as_ref());
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: ended_event(lm, node, failure.as_ref()),
                });
                effects.ended(
                    lm,
                    gm,
                    TaskEnd {
                        task,
                        node,
                        at,
                        failure,
                    },
                );
            }
        }
        Ok(effects)
    }

    /// A task that finished cleanly is remembered: a launch of it again (a restarted
    /// GM resubmitting its journal, a resent batch) is a `Duplicate`. A failed one is
    /// not: its GM may retry it.
    fn remember_if_finished(&mut self, task: common::TaskId, failure: Option<&TaskFailure>) {
        if failure.is_none() {
            self.finished_before_restart(task);
        }
    }
}
