//! A restarted GM's tasks waiting on silent LMs ([`InDoubt`]): kept by the world,
//! handled by `journal.rs`. A leaf.

use common::{Micros, TaskId};

/// A restarted GM's tasks waiting on silent LMs.
#[derive(Debug)]
pub(super) struct InDoubt {
    pub(super) tasks: Vec<TaskId>,
    pub(super) silent: Vec<u16>,
    pub(super) deadline: Micros,
}
