//! Worker reports: a task started, finished, or was killed (on the LM's order, or by
//! the worker on its own to make room).

use super::LocalMaster;
use crate::allocation::PendingKill;
use crate::effects::{LmEffects, LmError};
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
        if self.lost.contains(&(report.task(), report.attempt())) {
            self.lost_task_reported(report, &mut effects);
            return Ok(effects);
        }
        // A failed task ends as a finished one does; only its event differs.
        let failure = match &report {
            WorkerReport::Failed { failure, .. } => Some(failure.clone()),
            _ => None,
        };
        let used = report.used();
        // Only the run this LM holds counts: a report of another run of the task (an
        // earlier one whose end was already absorbed) is refused like an unknown task.
        let (node, task, attempt) = (report.node(), report.task(), report.attempt());
        let unknown = LmError::UnknownTask { task, node };
        let held = |run: Option<&common::TaskSpec>| run.is_some_and(|t| t.attempt == attempt);
        match report {
            // Its job was cancelled and its kill is on the way (see cancel.rs).
            report if self.is_cancelling(task) => {
                return Ok(self.cancelled_report(report));
            }
            WorkerReport::Started { at, .. } if self.queued.contains_key(&task) => {
                if !held(self.queued.get(&task).map(|q| &q.task)) {
                    return Err(unknown);
                }
                self.queueable_started(now, node, task, at, &mut effects)?;
                if let Some(a) = self.running.get(&task) {
                    let start = TaskStart {
                        task,
                        attempt,
                        node,
                        at,
                    };
                    effects.started(lm, a.gm, start);
                }
            }
            // Started after the LM ordered its kill (preempted, shed or reclaimed):
            // the kill is on its way to the worker. The start is still reported, so
            // an observer sees the run the kill (or a finish winning the race) ends.
            WorkerReport::Started { at, .. }
                if held(self.pending_kills.get(&task).map(|k| &k.task)) =>
            {
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Started { at, .. } => {
                let alloc = self
                    .running
                    .get_mut(&task)
                    .filter(|a| a.node == node && a.task.attempt == attempt)
                    .ok_or(unknown)?;
                alloc.started = true;
                alloc.started_at = Some(at);
                let start = TaskStart {
                    task,
                    attempt,
                    node,
                    at,
                };
                effects.started(lm, alloc.gm, start);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Killed { at, .. } => {
                if !held(self.pending_kills.get(&task).map(|k| &k.task)) {
                    // The worker made room for other work on its own.
                    self.ended_adopted(task);
                    return self.queueable_killed_by_worker(node, task, attempt, at);
                }
                let Some(PendingKill {
                    gm,
                    task: spec,
                    lost,
                    ..
                }) = self.pending_kills.remove(&task)
                else {
                    return Err(unknown);
                };
                self.ended_adopted(task);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Preempted { lm, node, lost },
                });
                effects.requeue(lm, gm, spec, lost);
            }
            WorkerReport::Finished { at, .. } | WorkerReport::Failed { at, .. }
                if held(self.pending_kills.get(&task).map(|k| &k.task)) =>
            {
                // Finished before the kill reached the worker: the finish stands.
                let gm = self.pending_kills.remove(&task).map(|k| k.gm);
                self.ended_adopted(task);
                self.remember_end(task, attempt, failure.as_ref());
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::ended(lm, node, failure.as_ref()),
                });
                if let Some(gm) = gm {
                    let end = TaskEnd {
                        used,
                        task,
                        attempt,
                        node,
                        at,
                        failure,
                    };
                    effects.ended(lm, gm, end);
                }
            }
            WorkerReport::Finished { at, .. }
                if !self.running.contains_key(&task)
                    && !self.queued.contains_key(&task)
                    && !self.is_lost_run(task, attempt) =>
            {
                self.unowned_finish(task, attempt, node, at, &mut effects);
            }
            WorkerReport::Finished { at, .. } | WorkerReport::Failed { at, .. } => {
                let gm = match self.running.get(&task) {
                    Some(a) if a.node == node && a.task.attempt == attempt => a.gm,
                    _ => return Err(unknown),
                };
                if self.release(task).is_none() {
                    return Err(unknown);
                }
                self.ended_adopted(task);
                self.remember_end(task, attempt, failure.as_ref());
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::ended(lm, node, failure.as_ref()),
                });
                effects.ended(
                    lm,
                    gm,
                    TaskEnd {
                        used,
                        task,
                        attempt,
                        node,
                        at,
                        failure,
                    },
                );
            }
        }
        Ok(effects)
    }

    /// A worker finished a task this LM does not hold: the LM restarted after the
    /// task started, and the worker reports its end before registering again (or
    /// the same report comes twice). The LM does not know which GM launched it, so
    /// the end is remembered finished (answered to that GM's reconcile request,
    /// and a resent launch of it is a `Duplicate`) and published once; a repeat
    /// changes nothing. Failed runs are not kept: the GM retries the run it hears
    /// is lost. A run this LM knows void (its gang was restarted whole) is not
    /// kept either: its task runs again.
    fn unowned_finish(
        &mut self,
        task: common::TaskId,
        attempt: u32,
        node: common::NodeId,
        at: Micros,
        effects: &mut LmEffects,
    ) {
        if self.restarted.has_finished(&task, attempt) || self.gangs.is_void(task, attempt) {
            return;
        }
        self.restarted.finished(task, attempt);
        effects.unowned_finished.push(task);
        effects.events.push(TaskEvent {
            task,
            at,
            kind: TaskEventKind::ended(self.topology.lm, node, None),
        });
    }

    /// A task that finished cleanly is remembered: a launch of it again (a restarted
    /// GM resubmitting its journal, a resent batch) is a `Duplicate`. A failed run
    /// is remembered as a run only (its GM may retry the task): a worker that
    /// lists it on registering again does not make this life announce it twice.
    fn remember_end(&mut self, task: common::TaskId, attempt: u32, failure: Option<&TaskFailure>) {
        match failure {
            None => self.restarted.finished(task, attempt),
            Some(_) => self.restarted.failed(task, attempt),
        }
    }
}
