//! The fault world's events ([`Ev`]) and what travels on its ordered streams
//! ([`Item`]). A leaf: the driver, its parts and the trace printer import it.

use crate::sim::faults::plan::{Fault, Role};
use common::messages::HeldTask;
use common::protocol::{GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::Micros;

/// What travels on an ordered stream.
#[derive(Clone, Debug)]
pub(super) enum Item {
    ToGm(LmToGm),
    /// An order, and the call whose answer waits for it, if any.
    ToWorker(LmToWorker, Option<u64>),
    ToLm(WorkerToLm),
    /// A worker registers with its LM (after either restarted).
    Register {
        holding: Vec<HeldTask>,
        ended: Vec<common::messages::TaskEnd>,
        /// The worker process life that sent it (its order key, in the service).
        life: u32,
    },
}

/// One event of the fault world.
#[derive(Debug)]
pub(super) enum Ev {
    Arrival(usize),
    Fault(Fault),
    Pass(u16, u32),
    Tick(u16, u32),
    Wake(u32, u32),
    /// A worker's fence timer: (worker, its life).
    Fence(u32, u32),
    /// A start order of a stream its LM abandoned arrives after all: (LM, worker,
    /// the order, the worker process life whose order key signed it).
    Late(u16, u32, LmToWorker, u32),
    Attempt(u64),
    Timeout(u64, u32),
    Request(u64, u32, GmToLm),
    Answer(u64, u32, LmToGm),
    /// An LM's "busy" answer to a call's attempt.
    Busy(u64, u32),
    Pump(Role, Role),
    State(u16, LmToGm),
    Settle(u64),
    /// A GM's own wake-up (a retry's backoff ended, a cancel is due again).
    GmTick(u16, u32),
    /// A GM asks a restarted LM about its tasks there: (GM, its life, LM, when the
    /// GM saw the new life).
    LmReconcile(u16, u32, u16, Micros),
    /// A restarted GM asks silent LMs again before resuming the tasks they may
    /// run: (GM, its life).
    ResumeAsk(u16, u32),
}
