//! A task waiting in a GM, and a task taken from its queue for a try.

use common::reasons::PendingReason;
use common::{LmId, Micros, QueueId, TaskSpec};

/// A task's shape: its constraints and its request.
pub type Shape = (common::ConstraintSet, common::Resources);

/// A task waiting in a GM.
#[derive(Debug, Clone)]
pub struct Pending {
    pub task: TaskSpec,
    /// When the GM accepted it.
    pub submitted_at: Micros,
    /// Placement attempts so far.
    pub attempts: u32,
    /// Why the last attempt failed.
    pub reason: Option<PendingReason>,
    /// The preemption request in flight for this task, if any.
    pub preempting: Option<(LmId, QueueId)>,
    /// When the task first found no room while a victim existed (the preemption
    /// grace runs from there; see [`common::preemption::PreemptionRules::grace`]).
    pub contended_since: Option<Micros>,
}

impl Pending {
    pub fn shape(&self) -> Shape {
        (self.task.constraints, self.task.resources)
    }
}

/// A task taken from its queue for a try, with its place in the line (given back
/// with it if it must wait: [`Queues::push_blocked`]).
#[derive(Debug)]
pub struct Queued {
    pub key: u64,
    pub pending: Box<Pending>,
    /// It waited in a class (it failed against an earlier view), as opposed to a
    /// new or refused task.
    pub was_blocked: bool,
}

/// What a pass takes next from the queues.
#[derive(Debug)]
pub enum Popped {
    /// A task to try.
    Task(Queued),
    /// `count` tasks of classes whose shapes are known misses, in line before the
    /// next task to try: each missed once more, counted in bulk (see
    /// [`crate::queue::Queues::pop_ready_bulk`]).
    Missed { count: usize },
}

/// What a queue gives next.
pub(crate) enum Next {
    Task(Queued, bool),
    Missed(usize),
}

/// Whether a sleeping class could find room now (asked during a selective pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Fits,
    No,
    /// No class can find room any more in this pass: stop asking.
    Never,
}
