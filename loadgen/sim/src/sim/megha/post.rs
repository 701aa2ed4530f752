//! Queueing an input for a role's core: as its own event (timers) or in the
//! [`Mailboxes`](super::mail::Mailboxes) slot an [`Ev`] names.

use super::mail::Ev;
use super::Sim;
use common::Micros;
use gm_core::GmInput;
use lm_core::LmInput;
use worker_core::WorkerInput;

impl Sim<'_> {
    /// Queues `input` reaching GM `g` at `at`.
    pub(super) fn push_gm(&mut self, at: Micros, g: usize, input: GmInput) {
        let ev = match input {
            GmInput::Schedule => Ev::GmPass(g),
            GmInput::LraPass => Ev::GmLraPass(g),
            input => Ev::Gm(g, self.mail.gm.put(input)),
        };
        self.push(at, ev);
    }

    /// Queues `input` reaching LM `l` at `at`.
    pub(super) fn push_lm(&mut self, at: Micros, l: usize, input: LmInput) {
        let ev = match input {
            LmInput::Tick => Ev::LmTick(l),
            input => Ev::Lm(l, self.mail.lm.put(input)),
        };
        self.push(at, ev);
    }

    /// Queues `input` reaching worker `w` at `at`.
    pub(super) fn push_worker(&mut self, at: Micros, w: usize, input: WorkerInput) {
        let ev = match input {
            WorkerInput::Wake => Ev::WorkerWake(w),
            input => Ev::Worker(w, self.mail.worker.put(input)),
        };
        self.push(at, ev);
    }
}
