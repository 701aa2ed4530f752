//! The LM side of the simulation: inputs reaching an LM (charged per task, per
//! report, per node of a heartbeat) and the bookkeeping of its orders and requeues.

use super::Sim;
use crate::sim::{probe, CostModel};
use common::messages::WorkerReport;
use common::protocol::kind;
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Micros, TaskId, TaskKind};
use lm_core::{LmInput, LmOutput};

impl Sim<'_> {
    /// An input reaches an LM. Requests are charged per task, worker reports per
    /// report; the LM's ticks send its heartbeat (charged per node).
    pub(super) fn lm_input(&mut self, now: Micros, l: usize, input: LmInput) {
        match input {
            LmInput::Gm(request) => {
                // A batch's, a preemption's or a gang reserve's tasks.
                let tasks: Vec<TaskId> = request.placed_tasks();
                let (start, done) = self.lm_serve(now, l, &tasks);
                let launch = request.kind() == kind::LAUNCH;
                let t0 = probe::start(self.probe.is_some());
                let result = self.lms[l].step(start, LmInput::Gm(request));
                let ns = probe::stop(t0);
                if let (Some(p), true) = (self.probe.as_mut(), launch) {
                    let nodes = self.lms[l].topology().node_count() as u64;
                    p.lm_batch.add(tasks.len() as u64, nodes, ns);
                }
                let Ok(out) = result else {
                    return;
                };
                self.book_gang_holds(&out, &tasks, done);
                self.observe_lm_orders(l, done, &out, false);
                self.send_from_lm(l, done, out);
                // Every request is answered: the services' LM publishes after it.
                self.lm_state_changed(l, done);
            }
            LmInput::Worker(report) => {
                let ended = matches!(
                    report,
                    WorkerToLm::Report(WorkerReport::Finished { .. } | WorkerReport::Failed { .. })
                );
                let start = now.max(self.lm_busy[l]);
                self.lm_busy[l] = start + CostModel::micros(self.costs.lm_report_ns);
                let t0 = probe::start(self.probe.is_some());
                let result = self.lms[l].step(now, LmInput::Worker(report));
                let ns = probe::stop(t0);
                if let Some(p) = self.probe.as_mut() {
                    p.lm_report.add(1, 0, ns);
                }
                // A finish racing a preemption is answered "unknown task": harmless.
                if let Ok(out) = result {
                    self.observe_requeues(&out);
                    self.send_from_lm(l, self.lm_busy[l], out);
                }
                if ended {
                    self.lm_state_changed(l, self.lm_busy[l]);
                }
            }
            // A worker declared lost or back (the fault-injection harness's inputs), a
            // node drained or undrained.
            input @ (LmInput::WorkerLost { .. }
            | LmInput::WorkerBack { .. }
            | LmInput::Drain { .. }) => {
                if let Ok(out) = self.lms[l].step(now, input) {
                    self.observe_requeues(&out);
                    self.send_from_lm(l, now, out);
                }
            }
            LmInput::Tick => {
                let t0 = probe::start(self.probe.is_some());
                let Ok(out) = self.lms[l].step(now, LmInput::Tick) else {
                    return;
                };
                let ns = probe::stop(t0);
                if let (Some(p), Some(snapshot)) = (self.probe.as_mut(), out.heartbeat()) {
                    p.lm_tick.add(snapshot.free.len() as u64, 0, ns);
                }
                self.observe_lm_orders(l, now, &out, true);
                if let Some(snapshot) = out.heartbeat() {
                    self.counters.heartbeats += 1;
                    self.last_publish[l] = now;
                    let nodes = snapshot.free.len() as u64;
                    self.lm_busy[l] = now.max(self.lm_busy[l])
                        + CostModel::per_unit(nodes, self.costs.lm_snapshot_node_ns);
                }
                let mut next = out.next_wakeup;
                // Decided before this tick's heartbeat leaves (it is delivered either way).
                if let Some(later) = self.skip_idle(l, now, next) {
                    self.counters.idle_ticks_skipped += (later.0 - next.0) / (next.0 - now.0);
                    next = later;
                }
                self.send_from_lm(l, now, out);
                self.idle_check();
                self.push_lm(next, l, LmInput::Tick);
            }
        }
    }

    /// The LM serves a request for `tasks` from `max(now, busy)`: charges its cost and
    /// the tasks' ledgers. Returns when it started and when it is done.
    pub(super) fn lm_serve(&mut self, now: Micros, l: usize, tasks: &[TaskId]) -> (Micros, Micros) {
        let start = now.max(self.lm_busy[l]);
        let nodes = self.lms[l].topology().node_count() as u64;
        let done = start + self.costs.lm_batch(tasks.len() as u64, nodes);
        self.lm_busy[l] = done;
        for task in tasks {
            let rec = self.record(*task);
            rec.in_flight_until(now);
            rec.queued_until(start);
            rec.processed_until(done);
        }
        (start, done)
    }

    /// Books an LM's orders to its workers: promotions, kills made by shedding (on a
    /// tick), launches.
    pub(super) fn observe_lm_orders(
        &mut self,
        _l: usize,
        done: Micros,
        out: &LmOutput,
        tick: bool,
    ) {
        for order in &out.to_workers {
            match order {
                LmToWorker::Promote(_) => self.counters.promoted += 1,
                LmToWorker::Kill(_) if tick => self.counters.shed += 1,
                LmToWorker::Kill(_) => {}
                LmToWorker::Start(start) => self.record(start.task.id).launch = Some(done),
            }
        }
    }

    /// Books preempted tasks handed back to their GMs.
    pub(super) fn observe_requeues(&mut self, out: &LmOutput) {
        // One variant's own accounting: no other message requeues a task.
        for (_, message) in &out.to_gms {
            let common::protocol::LmToGm::Requeue(preempted) = message else {
                continue;
            };
            for (task, lost) in &preempted.tasks {
                if task.kind == TaskKind::Queueable {
                    self.counters.queueable_kills += 1;
                }
                self.counters.preemptions += 1;
                self.counters.wasted += *lost;
                let rec = self.record(task.id);
                rec.preemptions += 1;
                rec.lost_work += *lost;
            }
        }
    }
}
