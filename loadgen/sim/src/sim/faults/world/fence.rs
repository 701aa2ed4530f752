//! Workers fence themselves as the worker service does (`worker/src/service/fence.rs`):
//! a worker its LM has not confirmed (a check-in answered as registered, or a
//! registration) for 3/5 of the worker timeout stops every task it holds, reports
//! them lost, and refuses starts until the LM confirms it again. The LM declares a
//! worker lost only after the whole timeout, so a cut-off worker no longer runs a
//! task its GM retries elsewhere (`FaultConfig::worker_fence`).

use super::{Ev, World};
use worker_core::WorkerInput;

impl World<'_> {
    /// Fences are on: the LMs have worker liveness and give leases.
    fn fences(&self) -> Option<common::Micros> {
        let timeout = self
            .config
            .worker_timeout
            .filter(|_| self.config.worker_fence)?;
        Some(worker_core::fence_after(timeout))
    }

    /// Worker `w`'s LM confirmed it now: its lease starts again, a fence is lifted.
    pub(super) fn confirm(&mut self, w: u32) {
        let Some(after) = self.fences() else {
            return;
        };
        let i = w as usize;
        self.confirmed[i] = self.now;
        if std::mem::take(&mut self.fenced[i]) {
            self.note(|| format!("  w{w} confirmed: fence lifted"));
        }
        if !self.fence_pending[i] {
            self.fence_pending[i] = true;
            self.queue
                .push(self.now + after, Ev::Fence(w, self.worker_life[i]));
        }
    }

    /// Worker `w`'s fence timer: fences if no confirmation came since, else waits
    /// for the latest one's deadline.
    pub(super) fn fence_due(&mut self, w: u32, life: u32) {
        let i = w as usize;
        let Some(after) = self.fences() else {
            return;
        };
        if self.worker_life[i] != life {
            return;
        }
        self.fence_pending[i] = false;
        let due = self.confirmed[i] + after;
        if self.now < due {
            self.fence_pending[i] = true;
            self.queue.push(due, Ev::Fence(w, life));
            return;
        }
        if self.fenced[i] {
            return;
        }
        let now = self.clock(super::Role::Worker(w));
        let Some(worker) = self.workers[i].as_mut() else {
            return;
        };
        self.fenced[i] = true;
        let reason = format!(
            "w{w} not confirmed by its LM for {} ms: fenced",
            after.0 / 1000
        );
        if let Ok(out) = worker.step(now, WorkerInput::Fence { reason }) {
            if !out.to_lm.is_empty() {
                self.note(|| format!("  w{w} fences: {} task(s) stopped", out.to_lm.len()));
            }
            self.worker_out(w, out);
        }
    }

    /// A (re)started worker holds nothing and has no lease yet.
    pub(super) fn reset_fence(&mut self, w: u32) {
        let i = w as usize;
        self.fenced[i] = false;
        self.fence_pending[i] = false;
        self.confirmed[i] = self.now;
    }
}
