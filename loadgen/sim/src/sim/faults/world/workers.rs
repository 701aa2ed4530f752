//! The workers' side: start, kill and promote orders from their LM, their own
//! wake-ups, their reports, and the check that a task never runs on two workers at
//! once.

use super::{Ev, Item, World};
use crate::sim::faults::check::{self, Known};
use crate::sim::faults::plan::Role;
use common::protocol::{LmToWorker, WorkerToLm};
use common::{NodeId, Resources, TaskId};
use worker_core::Worker;
use worker_core::{WorkerInput, WorkerOutput};

impl World<'_> {
    pub(super) fn worker_of(&self, l: u16, node: NodeId) -> u32 {
        self.placement
            .iter()
            .position(|p| *p == (l, node))
            .unwrap_or(0) as u32
    }

    pub(super) fn worker_order(&mut self, w: u32, order: LmToWorker) {
        let now = self.clock(Role::Worker(w));
        let (l, node) = self.placement[w as usize];
        let Some(worker) = self.workers[w as usize].as_mut() else {
            return;
        };
        let start = match &order {
            LmToWorker::Start(s) => Some((s.task.id, s.task.attempt)),
            _ => None,
        };
        if let LmToWorker::Start(s) = &order {
            // Dropped before anything else looks at it, as the worker service's
            // HTTP layer does: a dispatch already taken, of a replaced LM life, or
            // sent before this process's current registration.
            if !self.filters[w as usize].first(s.dispatch) {
                let (task, seq) = (s.task.id, s.dispatch.seq);
                self.note(|| format!("  w{w} drops start {task} (dispatch {seq}): taken before, or sent before its registration"));
                return;
            }
        }
        let refusing = self.refusing[w as usize] || self.fenced[w as usize];
        if let (Some((task, attempt)), true) = (start, refusing) {
            let report = worker_core::refused_start(node, task, attempt, now, "fault injection");
            self.refused(w, l, report);
            return;
        }
        match worker.step(now, WorkerInput::Lm(order)) {
            Ok(out) => {
                if let Some((task, attempt)) = start {
                    self.check_overlap(w, task, attempt);
                }
                self.worker_out(w, out);
            }
            // Already here (a resent order): it runs, its reports stand (as the
            // worker service does).
            Err(worker_core::WorkerError::Duplicate { .. }) => {}
            Err(e) => {
                if let Some((task, attempt)) = start {
                    self.note(|| format!("  w{w} refuses {task}: {e}"));
                    let report =
                        worker_core::refused_start(node, task, attempt, now, "fault injection");
                    self.refused(w, l, report);
                }
            }
        }
    }

    /// Worker `w` refused a start: reported failed, and remembered with its other
    /// ends (as the worker service does).
    fn refused(&mut self, w: u32, l: u16, report: common::messages::WorkerReport) {
        self.ended[w as usize].extend(common::messages::TaskEnd::of_report(&report));
        self.send(
            Role::Worker(w),
            Role::Lm(l),
            Item::ToLm(WorkerToLm::Report(report)),
            false,
        );
    }

    /// Run `attempt` of `task` just started on worker `w`: no other worker may still
    /// run an earlier run of it (a run declared lost on a worker that was cut off,
    /// not dead). Workers fence themselves so that it never does; without fences
    /// (`--no-worker-fence`) it is the known price of timeout-based liveness.
    fn check_overlap(&mut self, w: u32, task: TaskId, attempt: u32) {
        // A dead worker's run still running (its helper has not killed it yet).
        let now = self.now;
        self.orphans.retain(|o| o.3 > now);
        if let Some(&(j, _, earlier, _)) = self.orphans.iter().find(|o| o.1 == task) {
            self.broke(Err((
                check::Invariant::RanTwice,
                format!("{task}: run {attempt} started on w{w} while run {earlier} of dead w{j} still runs"),
            )));
            return;
        }
        let other = self.workers.iter().enumerate().find_map(|(j, x)| {
            let run = x.as_ref()?.running().iter().find(|r| r.task == task)?;
            (j != w as usize).then_some((j, run.attempt))
        });
        let Some((j, earlier)) = other else {
            return;
        };
        let broken = (
            check::Invariant::RanTwice,
            format!("{task}: run {attempt} started on w{w} while w{j} still runs run {earlier}"),
        );
        let result = if self.config.worker_fence {
            Err(broken)
        } else {
            self.checker.excuse(Known::RunsOverlap, broken)
        };
        self.broke(result);
    }

    pub(super) fn wake(&mut self, w: u32, life: u32) {
        if self.worker_life[w as usize] != life || self.wake_at[w as usize] != Some(self.now) {
            return;
        }
        self.wake_at[w as usize] = None;
        let now = self.clock(Role::Worker(w));
        let Some(worker) = self.workers[w as usize].as_mut() else {
            return;
        };
        if let Ok(out) = worker.step(now, WorkerInput::Wake) {
            self.worker_out(w, out);
        }
    }

    pub(super) fn worker_out(&mut self, w: u32, out: WorkerOutput) {
        let l = self.placement[w as usize].0;
        for report in out.to_lm {
            let WorkerToLm::Report(r) = &report;
            self.ended[w as usize].extend(common::messages::TaskEnd::of_report(r));
            self.send(Role::Worker(w), Role::Lm(l), Item::ToLm(report), false);
        }
        let next = self.workers[w as usize]
            .as_ref()
            .and_then(Worker::next_wakeup);
        if let Some(t) = next {
            let at = self.to_sim(Role::Worker(w), t).max(self.now);
            if self.wake_at[w as usize].is_none_or(|s| at < s) {
                self.wake_at[w as usize] = Some(at);
                self.queue
                    .push(at, Ev::Wake(w, self.worker_life[w as usize]));
            }
        }
    }

    /// A start order of a stream LM `l` abandoned (`lose_worker`) arrives at worker
    /// `w` after all, if the process it was signed for still lives (a new process
    /// has another order key and refuses it, as in `deliver`): then only its fence
    /// and its order floor stand between it and a run the LM reported lost and may
    /// have retried elsewhere.
    pub(super) fn late_order(&mut self, l: u16, w: u32, order: LmToWorker, life: u32) {
        if self.worker_life[w as usize] != life || self.workers[w as usize].is_none() {
            return;
        }
        self.note(|| format!("  late: lm{l}'s abandoned {} reaches w{w}", order.kind()));
        self.deliver(Role::Lm(l), Role::Worker(w), Item::ToWorker(order, None));
    }

    pub(super) fn start_worker(&mut self, w: u32) {
        let (l, node) = self.placement[w as usize];
        let capacity = self.cluster.lms[l as usize]
            .nodes()
            .find(|(id, _, _)| *id == node)
            .map_or_else(Resources::default, |(_, _, n)| n.capacity);
        self.workers[w as usize] = Some(Worker::new(node, capacity));
        self.filters[w as usize] = Default::default();
        self.reset_fence(w);
    }
}
