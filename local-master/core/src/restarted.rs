//! What an LM remembers of tasks that ran: the tasks it adopted from its workers after
//! a restart that still run, and the tasks that finished (reported finished when the
//! workers registered again, adopted and finished since, or finished cleanly in this
//! life). A GM's launch of one of the latter (a batch resent because the old LM
//! never answered, or a restarted GM resubmitting its journal) is a duplicate.
//! Finished tasks are remembered with their run ([`common::TaskSpec::attempt`]):
//! a finish stands for that run and earlier ones only, never for a later run (the
//! run of a gang restarted whole after a void run finished, issue 37).
//! Failed runs are remembered by run (task and attempt), only so that one is
//! announced once per life and never reported lost: their GM may retry the task.
//! Both memories are bounded ([`FINISHED_MEMORY`], oldest forgotten first). A leaf.

use common::bounded::{Bounded, BoundedMax};
use common::TaskId;
use rustc_hash::FxHashSet as HashSet;

/// How many finished tasks an LM remembers (about 40 bytes each).
pub const FINISHED_MEMORY: usize = 1 << 18;

#[derive(Debug)]
pub struct Restarted {
    /// Per finished task, the latest run that finished.
    finished_before: BoundedMax<TaskId, u32>,
    failed: Bounded<(TaskId, u32)>,
    adopted: HashSet<TaskId>,
}

impl Default for Restarted {
    fn default() -> Self {
        Restarted {
            finished_before: BoundedMax::new(FINISHED_MEMORY),
            failed: Bounded::new(FINISHED_MEMORY),
            adopted: HashSet::default(),
        }
    }
}

impl Restarted {
    /// A task taken over from the previous LM, still running.
    pub fn adopt(&mut self, task: TaskId) {
        self.adopted.insert(task);
    }

    /// Run `attempt` of a task finished (before this LM started, or since).
    pub fn finished(&mut self, task: TaskId, attempt: u32) {
        self.finished_before.raise(task, attempt);
    }

    /// Run `attempt` of a task failed (before this LM started, or since).
    pub fn failed(&mut self, task: TaskId, attempt: u32) {
        self.failed.insert((task, attempt));
    }

    /// True for a run remembered as failed.
    pub fn has_failed(&self, task: TaskId, attempt: u32) -> bool {
        self.failed.contains(&(task, attempt))
    }

    /// True for a task taken over from the previous LM that still runs.
    pub fn is_adopted(&self, task: &TaskId) -> bool {
        self.adopted.contains(task)
    }

    /// Forgets a finish of `task` by a run before `next` (its gang was restarted
    /// whole: that run was void, its GM runs the task again as run `next`).
    pub fn forget_finished(&mut self, task: TaskId, next: u32) {
        if self.finished_before.get(&task).is_some_and(|f| f < next) {
            self.finished_before.remove(&task);
        }
    }

    /// True when run `attempt` of a task, or a later one, is remembered finished:
    /// the task ended for that run. A finish of an earlier run is not (that run
    /// was void or lost for its GM, which launched the later one).
    pub fn has_finished(&self, task: &TaskId, attempt: u32) -> bool {
        self.finished_before.get(task).is_some_and(|f| f >= attempt)
    }

    /// An adopted task ended (a finish is remembered by the caller with its run).
    pub fn ended(&mut self, task: TaskId) {
        self.adopted.remove(&task);
    }
}
