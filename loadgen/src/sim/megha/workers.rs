//! The simulated workers: start orders, kills, promotions, and the reports they
//! send back to their LM (booked in the task ledger and the run list).

use super::{Ev, Sim};
use crate::sim::Run;
use common::messages::{KillTask, PromoteTask, StartTask, WorkerReport};
use common::{Micros, TaskId, TaskKind};

impl Sim<'_> {
    pub(super) fn schedule_wake(&mut self, w: usize) {
        if let Some(t) = self.workers[w].next_wakeup() {
            if self.wake_at[w].is_none_or(|s| t < s) {
                self.wake_at[w] = Some(t);
                self.queue.push(t, Ev::WorkerWake(w));
            }
        }
    }

    pub(super) fn end_run(&mut self, task: TaskId, at: Micros) {
        if let Some(i) = self.active_run.remove(&task) {
            self.runs[i].end = Some(at);
        }
    }

    pub(super) fn worker_kill(&mut self, now: Micros, w: usize, kill: KillTask) {
        let was_running = self.workers[w]
            .running()
            .iter()
            .any(|r| r.task == kill.task);
        if let Ok(report) = self.workers[w].kill(now, kill.task) {
            if was_running {
                self.end_run(kill.task, now);
                self.running -= 1;
            }
            let lm = self.lm_of_worker(w);
            // The room is left to the work the LM killed for, whose start
            // follows; queued work may take what that leaves.
            self.queue
                .push(now + self.delay(), Ev::LmReport(lm, report));
        }
    }

    /// A promotion reaches the worker (a task that ended meanwhile is left alone).
    pub(super) fn worker_promote(&mut self, now: Micros, w: usize, promote: PromoteTask) {
        if self.workers[w].promote(promote.task).is_ok() {
            if let Some(&i) = self.active_run.get(&promote.task) {
                self.runs[i].promoted_at = Some(now);
            }
        }
    }

    pub(super) fn worker_start(&mut self, now: Micros, w: usize, order: StartTask) {
        let task = order.task.id;
        self.record(task).in_flight_until(now);
        let reclaims = order.task.kind != TaskKind::Queueable;
        match self.workers[w].start_task(now, order) {
            Ok(mut reports) => {
                if reclaims {
                    // Room left over after kills made for this task goes to queued work.
                    reports.extend(self.workers[w].advance(now));
                }
                self.worker_reports(now, w, reports);
                self.schedule_wake(w);
            }
            Err(_) => self.counters.over_commits += 1,
        }
    }

    /// Books a worker's reports (starts, finishes, kills it made on its own) and
    /// sends them to its LM.
    pub(super) fn worker_reports(&mut self, now: Micros, w: usize, reports: Vec<WorkerReport>) {
        let lm = self.lm_of_worker(w);
        for report in reports {
            match report {
                WorkerReport::Started { task, .. } => {
                    let (resources, kind) = self.workers[w]
                        .running()
                        .iter()
                        .find(|r| r.task == task)
                        .map(|r| (r.resources, r.kind))
                        .unwrap_or_default();
                    let rec = self.record(task);
                    rec.worker_queued_until(now);
                    rec.start.get_or_insert(now);
                    rec.starts += 1;
                    let queue = rec.queue;
                    self.active_run.insert(task, self.runs.len());
                    self.runs.push(Run {
                        task,
                        kind,
                        promoted_at: None,
                        queue,
                        resources,
                        start: now,
                        end: None,
                    });
                    self.running += 1;
                    self.idle_ticks = 0;
                }
                WorkerReport::Finished { task, at, .. } => {
                    self.end_run(task, at);
                    self.record(task).finish = Some(at);
                    self.done += 1;
                    self.running -= 1;
                    if self.has_lras {
                        // The LM's Finished event reaches the designated GM.
                        let at = now + self.delay() + self.delay();
                        self.queue.push(at, Ev::GmLraEnded(task));
                    }
                }
                WorkerReport::Killed { task, at, .. } => {
                    self.end_run(task, at);
                    self.running -= 1;
                }
            }
            self.queue
                .push(now + self.delay(), Ev::LmReport(lm, report));
        }
    }
}
