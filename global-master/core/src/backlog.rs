//! The work waiting in a GM's queues, and the task shapes known to find no node.
//!
//! A shape (constraints, resources) that found no node since the view last gained
//! resources would fail again: the view has only shrunk since. The placement
//! pipeline skips its scan (a known miss); the cache empties whenever the view gains
//! resources, which is also when blocked tasks deserve another try.

use crate::queue::{Pending, Queues};
use common::{ConstraintSet, Resources};
use rustc_hash::FxHashSet as HashSet;

/// A task's shape: its constraints and its request.
pub type Shape = (ConstraintSet, Resources);

/// The user queues and the known-miss cache.
#[derive(Debug, Default)]
pub struct Backlog {
    queues: Queues,
    failed_shapes: HashSet<Shape>,
}

impl Backlog {
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// A new or retried task, at the back of its queue.
    pub fn push_ready(&mut self, pending: Box<Pending>) {
        self.queues.push_ready(pending);
    }

    /// Tasks to try again, in order.
    pub fn push_all_ready(&mut self, pending: impl IntoIterator<Item = Box<Pending>>) {
        pending.into_iter().for_each(|p| self.queues.push_ready(p));
    }

    /// A task that found no room in the current view.
    pub fn push_blocked(&mut self, pending: Box<Pending>) {
        self.queues.push_blocked(pending);
    }

    /// Takes every waiting task of `job` out (a cancelled job).
    pub fn remove_job(&mut self, job: common::JobId) -> Vec<Box<Pending>> {
        self.queues.remove_job(job)
    }

    /// The next ready task, taking queues in turn.
    pub fn pop_ready(&mut self) -> Option<Box<Pending>> {
        self.queues.pop_ready()
    }

    /// The shape found no node since the view last gained resources.
    pub fn is_known_miss(&self, shape: &Shape) -> bool {
        self.failed_shapes.contains(shape)
    }

    /// The shape found no node in the current view.
    pub fn remember_miss(&mut self, shape: Shape) {
        self.failed_shapes.insert(shape);
    }

    /// The view gained resources: every shape and every blocked task is worth another
    /// try.
    pub fn view_gained(&mut self) {
        self.failed_shapes.clear();
        self.queues.unblock_all();
    }
}
