//! The simulated workers: start orders, kills, promotions, and the reports they
//! send back to their LM (booked in the task ledger and the run list).

use super::Sim;
use crate::sim::{probe, Run};
use common::messages::WorkerReport;
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Micros, TaskId};
use gm_core::GmInput;
use worker_core::{WorkerInput, WorkerOutput};

impl Sim<'_> {
    pub(super) fn schedule_wake(&mut self, w: usize) {
        if let Some(t) = self.workers[w].next_wakeup() {
            if self.wake_at[w].is_none_or(|s| t < s) {
                self.wake_at[w] = Some(t);
                self.push_worker(t, w, WorkerInput::Wake);
            }
        }
    }

    pub(super) fn end_run(&mut self, task: TaskId, at: Micros) {
        if let Some(i) = self.active_run.remove(&task) {
            self.runs[i].end = Some(at);
        }
    }

    /// An input reaches a worker: an order from its LM, or its own wake-up.
    pub(super) fn worker_input(&mut self, now: Micros, w: usize, input: WorkerInput) {
        match input {
            WorkerInput::Wake => {
                if self.wake_at[w] != Some(now) {
                    return;
                }
                self.wake_at[w] = None;
                if let Ok(out) = self.workers[w].step(now, WorkerInput::Wake) {
                    self.worker_reports(now, w, out);
                }
                self.schedule_wake(w);
            }
            // A synthetic task's end comes from Wake; an exit, from a released start
            // barrier (`barrier.rs`); nothing cuts a worker off from its LM here
            // (see `loadgen faults`).
            input @ WorkerInput::Exited { .. } => {
                if let Ok(out) = self.workers[w].step(now, input) {
                    self.worker_reports(now, w, out);
                    self.schedule_wake(w);
                }
            }
            WorkerInput::Fence { .. } => {}
            WorkerInput::Lm(LmToWorker::Start(mut order)) => {
                self.record(order.task.id).in_flight_until(now);
                // A member whose start barrier holds waits there (`barrier.rs`).
                if self.barriers.holds(order.task.id.job.0) {
                    self.barriers.order(&mut order.task);
                }
                // Placement-dependent run time (alsched): slower off the preferred set.
                if let Some(soft) = self.config.soft_jobs.as_ref() {
                    if let Some(job) = soft.get(&order.task.id.job.0) {
                        let node = self.node_attrs.get(w).copied().unwrap_or_default();
                        order.task.duration = job.run_time(&order.task, node);
                    }
                }
                // The worker's own cost of starting (zero by default; calibrated: a
                // draw from the measured distribution) counts as worker queuing.
                let cost =
                    self.costs
                        .worker_start(self.config.seed, order.task.id, order.task.attempt);
                let now = now + cost;
                let t0 = probe::start(self.probe.is_some());
                let result = self.workers[w].step(now, WorkerInput::Lm(LmToWorker::Start(order)));
                let ns = probe::stop(t0);
                if let Some(p) = self.probe.as_mut() {
                    p.worker_start.add(1, 0, ns);
                }
                match result {
                    Ok(out) => {
                        self.worker_reports(now, w, out);
                        self.schedule_wake(w);
                    }
                    Err(_) => self.counters.over_commits += 1,
                }
            }
            WorkerInput::Lm(LmToWorker::Kill(kill)) => {
                let (task, attempt) = (kill.task, kill.attempt);
                let was_running = self.workers[w].running().iter().any(|r| r.task == task);
                if let Ok(out) = self.workers[w].step(now, WorkerInput::Lm(LmToWorker::Kill(kill)))
                {
                    if was_running {
                        self.end_run(task, now);
                        self.running -= 1;
                        self.barriers.ended(task, attempt);
                    }
                    // The room is left to the work the LM killed for, whose start
                    // follows; queued work may take what that leaves.
                    self.send_from_worker(w, now, out);
                }
            }
            WorkerInput::Lm(LmToWorker::Promote(promote)) => {
                let task = promote.task;
                // A promotion of a task that ended meanwhile changes nothing.
                let input = WorkerInput::Lm(LmToWorker::Promote(promote));
                if self.workers[w].step(now, input).is_ok() {
                    if let Some(&i) = self.active_run.get(&task) {
                        self.runs[i].promoted_at = Some(now);
                    }
                }
            }
        }
    }

    /// A member of a barrier job started: when it is the last one, every member's
    /// exit is queued (`barrier.rs`).
    fn release_barrier(&mut self, now: Micros, w: usize, task: TaskId, attempt: u32) {
        if !self.barriers.holds(task.job.0) {
            return;
        }
        for exit in self.barriers.started(now, w, task, attempt) {
            let input = WorkerInput::Exited {
                task: exit.task,
                attempt: exit.attempt,
                failure: None,
                used: None,
            };
            self.push_worker(exit.at, exit.worker, input);
        }
    }

    /// Books a worker's reports (starts, finishes, kills it made on its own) and
    /// sends them to its LM.
    fn worker_reports(&mut self, now: Micros, w: usize, out: WorkerOutput) {
        for WorkerToLm::Report(report) in &out.to_lm {
            match report {
                WorkerReport::Started { task, attempt, .. } => {
                    let (task, attempt) = (*task, *attempt);
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
                    self.release_barrier(now, w, task, attempt);
                }
                // Failed: real executors only, never in the simulator.
                WorkerReport::Finished { task, at, .. } | WorkerReport::Failed { task, at, .. } => {
                    let (task, at) = (*task, *at);
                    self.end_run(task, at);
                    self.record(task).finish = Some(at);
                    self.done += 1;
                    self.running -= 1;
                    if self.has_lras {
                        // The LM's Finished event reaches the designated GM.
                        let at = now + self.delay() + self.delay();
                        let d = self.designated;
                        self.push_gm(at, d, GmInput::TaskEnded(task));
                    }
                }
                WorkerReport::Killed {
                    task, at, attempt, ..
                } => {
                    let (task, at) = (*task, *at);
                    self.end_run(task, at);
                    self.running -= 1;
                    self.barriers.ended(task, *attempt);
                }
            }
        }
        self.send_from_worker(w, now, out);
    }
}
