//! What an LM remembers of its previous life (after a restart): the tasks it adopted
//! from its workers that still run, and the tasks that finished (reported finished
//! when the workers registered again, or adopted and finished since). A GM's launch of
//! one of the latter (a batch resent because the old LM never answered) is a
//! duplicate. A leaf.

use common::TaskId;
use std::collections::HashSet;

#[derive(Debug, Default)]
pub struct Restarted {
    finished_before: HashSet<TaskId>,
    adopted: HashSet<TaskId>,
}

impl Restarted {
    /// A task taken over from the previous LM, still running.
    pub fn adopt(&mut self, task: TaskId) {
        self.adopted.insert(task);
    }

    /// A task finished before this LM started (or, adopted, finished since).
    pub fn finished(&mut self, task: TaskId) {
        self.finished_before.insert(task);
    }

    /// True for a task that finished in the previous life (or adopted, since).
    pub fn has_finished(&self, task: &TaskId) -> bool {
        self.finished_before.contains(task)
    }

    /// An adopted task ended: one that finished is remembered as finished; one that
    /// was killed is forgotten (its GM may launch it again).
    pub fn ended(&mut self, task: TaskId, finished: bool) {
        if self.adopted.remove(&task) && finished {
            self.finished_before.insert(task);
        }
    }
}
