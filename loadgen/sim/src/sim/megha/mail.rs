//! The simulation's events, and the inputs they carry, which wait out of line.
//!
//! An input moves several times on its way (into the queue, out of it, into the
//! core), and an LM's message carries its snapshot inline (192 bytes): the queue
//! moves events of two words, each naming the slot where its input waits, and the
//! input is written once and read once. Slots are reused, so inputs in flight cost
//! no allocation. Timers carry no input: they are events of their own. Queueing an
//! input is `post.rs` (a leaf here: the driver imports these types).

use crate::sim::events::Slots;
use gm_core::GmInput;
use lm_core::LmInput;
use worker_core::WorkerInput;

/// A simulation event: a job arriving from the trace, or an input reaching one role's
/// core (a message from another role, or one of its timers). Every message travels
/// as the protocol's enum, so a new message needs no new event. Queue an input with
/// `Sim::push_gm`, `Sim::push_lm` or `Sim::push_worker` (`post.rs`).
pub(super) enum Ev {
    JobArrival(usize),
    /// An input reaching GM `g`, waiting in [`Mailboxes::gm`] at the slot.
    Gm(usize, u32),
    /// GM `g`'s scheduling pass ([`GmInput::Schedule`]).
    GmPass(usize),
    /// The designated GM's LRA placer run ([`GmInput::LraPass`]).
    GmLraPass(usize),
    /// An input reaching LM `l`, waiting in [`Mailboxes::lm`] at the slot.
    Lm(usize, u32),
    /// LM `l`'s tick ([`LmInput::Tick`]).
    LmTick(usize),
    /// LM `l`'s change-triggered publication, deferred to the end of its minimum
    /// interval (see [`super::publish`]).
    LmPublish(usize),
    /// An input reaching worker `w`, waiting in [`Mailboxes::worker`] at the slot.
    Worker(usize, u32),
    /// Worker `w`'s wake-up ([`WorkerInput::Wake`]).
    WorkerWake(usize),
}

/// The inputs in flight to each kind of role.
#[derive(Default)]
pub(super) struct Mailboxes {
    pub(super) gm: Slots<GmInput>,
    pub(super) lm: Slots<LmInput>,
    pub(super) worker: Slots<WorkerInput>,
}
