//! Fairness preemption requests an LM holds for room that frees by itself
//! ([`common::preemption::PreemptionRules::hold`]), in the order they came. A leaf.
//!
//! A held request is a claim on the next room that frees at this LM: the LM, the
//! one writer of its nodes, gives it to the waiting task before any GM's launch
//! can take it for a queue that is over its share already. Only a claim that no
//! room served within the hold kills.

use common::messages::PreemptRequest;
use common::{GmId, JobId, Micros, TaskId};

/// One held request and the end of its hold.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldPreempt {
    pub request: PreemptRequest,
    pub until: Micros,
}

#[derive(Debug, Default)]
pub struct PreemptHolds {
    /// Oldest first: the first room that frees goes to the oldest claim it fits.
    held: Vec<HeldPreempt>,
}

impl PreemptHolds {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Holds `request` until `until`.
    pub fn hold(&mut self, request: PreemptRequest, until: Micros) {
        self.held.push(HeldPreempt { request, until });
    }

    /// The end of the hold of `gm`'s request for `task`, if it is held (a request
    /// sent again is answered with it, and not held twice).
    pub fn until_of(&self, gm: GmId, task: TaskId) -> Option<Micros> {
        self.held
            .iter()
            .find(|h| h.request.gm == gm && h.request.task.id == task)
            .map(|h| h.until)
    }

    /// When the first hold ends.
    pub fn next_expiry(&self) -> Option<Micros> {
        self.held.iter().map(|h| h.until).min()
    }

    /// Every held request, oldest first, to serve; those still waiting come back
    /// through [`PreemptHolds::hold`] in the same order.
    pub fn take_all(&mut self) -> Vec<HeldPreempt> {
        std::mem::take(&mut self.held)
    }

    /// Puts back a request taken by [`PreemptHolds::take_all`].
    pub fn keep(&mut self, held: HeldPreempt) {
        self.held.push(held);
    }

    /// Takes out the held requests of `gm` for tasks of `job` (cancelled).
    pub fn remove_job(&mut self, gm: GmId, job: JobId) -> Vec<HeldPreempt> {
        let (gone, kept) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.request.gm == gm && h.request.task.id.job == job);
        self.held = kept;
        gone
    }
}
