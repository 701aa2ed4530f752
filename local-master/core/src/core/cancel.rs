//! Cancel requests: a GM cancelled a job it owns; the LM stops every task of that
//! job the same GM launched here (a task another GM launched is left alone and named
//! in the answer). A stopped task's resources are free at once; its worker gets a
//! kill order, and the worker's report of the kill (or of an end that won the race)
//! closes it without handing anything back to a GM. A repeated request finds nothing
//! more to stop and answers so.

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{CancelRequest, CancelResponse, KillTask, WorkerReport};
use common::{GmId, Micros, NodeId, TaskId};

impl LocalMaster {
    /// Handles a cancel request; the answer carries the LM's new state.
    pub fn handle_cancel(
        &mut self,
        now: Micros,
        request: CancelRequest,
    ) -> Result<LmEffects, LmError> {
        self.check_addressed(request.lm)?;
        let mut effects = LmEffects::default();
        let job = request.job;
        let (cancelled, not_yours) = self.stop_job(request.gm, job, &mut effects);
        self.cancel_held_preempts(now, request.gm, job, &mut effects);
        effects.cancel_response = Some(Box::new(CancelResponse {
            lm: self.topology.lm,
            gm: request.gm,
            job,
            cancelled,
            not_yours,
            snapshot: self.snapshot(now),
        }));
        Ok(effects)
    }

    /// Stops every task of `job` that `gm` launched here (running or queued at its
    /// worker): its room is free at once, its worker gets a kill order, and the
    /// worker's report closes it without handing anything back to a GM. Returns
    /// the tasks stopped and those of the job another GM launched (left alone).
    pub(super) fn stop_job(
        &mut self,
        gm: GmId,
        job: common::JobId,
        effects: &mut LmEffects,
    ) -> (Vec<TaskId>, Vec<TaskId>) {
        let mut running: Vec<TaskId> = self
            .running
            .keys()
            .chain(self.queued.keys())
            .filter(|t| t.job == job)
            .copied()
            .collect();
        running.sort_unstable();
        let mut stopped = Vec::new();
        let mut not_yours = Vec::new();
        for task in running {
            let (owner, node, attempt) = match (self.running.get(&task), self.queued.get(&task)) {
                (Some(a), _) => (a.gm, a.node, a.task.attempt),
                (None, Some(q)) => (q.gm, q.node, q.task.attempt),
                (None, None) => continue,
            };
            if owner != gm {
                not_yours.push(task);
                continue;
            }
            if self.running.contains_key(&task) {
                self.release(task);
            } else {
                self.unqueue(task);
            }
            self.ended_adopted(task);
            effects.kills.push(KillTask {
                node,
                task,
                attempt,
            });
            self.cancelling.insert(task, (gm, node, attempt));
            stopped.push(task);
        }
        (stopped, not_yours)
    }

    /// True while the kill of a cancelled task is on its way to its worker.
    pub fn is_cancelling(&self, task: TaskId) -> bool {
        self.cancelling.contains_key(&task)
    }

    /// A worker's report about a task being cancelled: the kill confirmed, an end
    /// that won the race (published as it is), or a start the kill will end.
    /// Nothing goes back to the GM: it already counts the task cancelled.
    pub(crate) fn cancelled_report(&mut self, report: WorkerReport) -> LmEffects {
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        let (task, at) = (report.task(), report.at());
        let kind = match report {
            WorkerReport::Started { node, .. } => TaskEventKind::Started { lm, node },
            WorkerReport::Killed { .. } => match self.cancelling.remove(&task) {
                Some((gm, _, _)) => TaskEventKind::Cancelled { gm },
                None => return effects,
            },
            WorkerReport::Finished { node, .. } => {
                self.cancelling.remove(&task);
                TaskEventKind::ended(lm, node, None)
            }
            WorkerReport::Failed { node, failure, .. } => {
                self.cancelling.remove(&task);
                TaskEventKind::ended(lm, node, Some(&failure))
            }
        };
        effects.events.push(TaskEvent { task, at, kind });
        effects
    }

    /// The worker of `node` is lost: the kills of cancelled tasks on its way there
    /// will never be confirmed. Each ends `cancelled` in the event stream now (its GM
    /// counts it so already) and is remembered as a lost run, so that the worker,
    /// should it come back still holding it, is told to kill it.
    pub(super) fn cancels_lost(&mut self, now: Micros, node: NodeId, effects: &mut LmEffects) {
        let mut tasks: Vec<(TaskId, GmId, u32)> = self
            .cancelling
            .iter()
            .filter(|(_, (_, n, _))| *n == node)
            .map(|(t, (gm, _, attempt))| (*t, *gm, *attempt))
            .collect();
        tasks.sort_unstable();
        for (task, gm, attempt) in tasks {
            self.cancelling.remove(&task);
            self.lost.insert((task, attempt));
            effects.events.push(TaskEvent {
                task,
                at: now,
                kind: TaskEventKind::Cancelled { gm },
            });
        }
    }
}
