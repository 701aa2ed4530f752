//! What an LM remembers of tasks that ran: the tasks it adopted from its workers after
//! a restart that still run, and the tasks that finished (reported finished when the
//! workers registered again, adopted and finished since, or finished cleanly in this
//! life). A GM's launch of one of the latter (a batch resent because the old LM
//! never answered, or a restarted GM resubmitting its journal) is a duplicate.
//! Failed runs are remembered by run (task and attempt), only so that one is
//! announced once per life and never reported lost: their GM may retry the task.
//! Both memories are bounded ([`FINISHED_MEMORY`], oldest forgotten first). A leaf.

use common::bounded::Bounded;
use common::TaskId;
use rustc_hash::FxHashSet as HashSet;

/// How many finished tasks an LM remembers (about 40 bytes each).
pub const FINISHED_MEMORY: usize = 1 << 18;

#[derive(Debug)]
pub struct Restarted {
    finished_before: Bounded<TaskId>,
    failed: Bounded<(TaskId, u32)>,
    adopted: HashSet<TaskId>,
}

impl Default for Restarted {
    fn default() -> Self {
        Restarted {
            finished_before: Bounded::new(FINISHED_MEMORY),
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

    /// A task finished (before this LM started, or since).
    pub fn finished(&mut self, task: TaskId) {
        self.finished_before.insert(task);
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

    /// Forgets that `task` finished (its gang was restarted whole: the run was
    /// void, its GM runs it again).
    pub fn forget_finished(&mut self, task: TaskId) {
        self.finished_before.remove(&task);
    }

    /// True for a task remembered as finished.
    pub fn has_finished(&self, task: &TaskId) -> bool {
        self.finished_before.contains(task)
    }

    /// An adopted task ended: one that finished is remembered as finished; one that
    /// was killed is forgotten (its GM may launch it again).
    pub fn ended(&mut self, task: TaskId, finished: bool) {
        if self.adopted.remove(&task) && finished {
            self.finished(task);
        }
    }
}
