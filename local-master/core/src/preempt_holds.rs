//! Fairness preemption requests an LM holds for room that frees by itself
//! ([`common::preemption::PreemptionRules::hold`]), in the order they came. A leaf.
//!
//! A held request is a claim on the next room that frees at this LM: the LM, the
//! one writer of its nodes, gives it to the waiting task before any GM's launch
//! can take it for a queue that is over its share already. Only a claim that no
//! room served within the hold kills.
//!
//! A request the LM told its GM it does not hold (the GM's ask about an overdue
//! final answer, [`common::messages::ReconcileRequest::preempts`]) is void here
//! from then on: the GM queued its task again, so a late copy must never launch
//! it ([`PreemptHolds::is_void`]).

use common::bounded::BoundedMax;
use common::messages::PreemptRequest;
use common::{GmId, JobId, Micros, TaskId};

/// How many void requests an LM remembers (oldest forgotten first): one per task
/// a GM asked about while this LM held nothing for it, a rare event.
pub const VOID_MEMORY: usize = 1 << 16;

/// One held request and the end of its hold.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldPreempt {
    pub request: PreemptRequest,
    pub until: Micros,
}

#[derive(Debug)]
pub struct PreemptHolds {
    /// Oldest first: the first room that frees goes to the oldest claim it fits.
    held: Vec<HeldPreempt>,
    /// Per GM life and task: requests numbered up to this
    /// ([`PreemptRequest::seq`]) are void.
    void: BoundedMax<(GmId, u64, TaskId), u64>,
}

impl Default for PreemptHolds {
    fn default() -> Self {
        PreemptHolds {
            held: Vec::new(),
            void: BoundedMax::new(VOID_MEMORY),
        }
    }
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

    /// `gm` (life `life`) was told this LM holds no request for `task`: its
    /// requests for it numbered up to `seq` are void from now on.
    pub fn void(&mut self, gm: GmId, life: u64, task: TaskId, seq: u64) {
        self.void.raise((gm, life, task), seq);
    }

    /// Void requests forgotten because their memory was full ([`VOID_MEMORY`]):
    /// a late copy of one would be served as a new request.
    pub fn void_forgotten(&self) -> u64 {
        self.void.forgotten()
    }

    /// Whether `request` is a late copy of one this LM told its GM it did not
    /// hold (see [`PreemptHolds::void`]).
    pub fn is_void(&self, request: &PreemptRequest) -> bool {
        let key = (request.gm, request.life, request.task.id);
        self.void.get(&key).is_some_and(|upto| request.seq <= upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::PreemptRequest;
    use common::{LmId, Micros, QueueId, Resources, TaskSpec};

    fn request(task: TaskId, seq: u64) -> PreemptRequest {
        PreemptRequest {
            gm: GmId(0),
            life: 1,
            lm: LmId(0),
            task: TaskSpec::short(task, Resources::cores(1, 1), Micros(1)),
            victim: QueueId(1),
            seq,
        }
    }

    /// The void memory is bounded: past [`VOID_MEMORY`] the oldest goes, and the
    /// forgetting is counted (the service logs it and shows it as a metric).
    #[test]
    fn the_oldest_void_request_is_forgotten_and_counted_when_the_memory_is_full() {
        let mut holds = PreemptHolds::default();
        let first = TaskId::new(1, 0);
        holds.void(GmId(0), 1, first, 3);
        assert!(holds.is_void(&request(first, 3)));
        assert!(
            !holds.is_void(&request(first, 4)),
            "a later request is served"
        );
        for i in 0..VOID_MEMORY as u32 {
            holds.void(GmId(0), 1, TaskId::new(2, i), 1);
        }
        assert_eq!(holds.void_forgotten(), 1);
        assert!(
            !holds.is_void(&request(first, 3)),
            "the oldest was forgotten"
        );
        assert!(holds.is_void(&request(TaskId::new(2, 0), 1)));
    }
}
