//! Tasks and their kinds.

use crate::{ConstraintSet, Micros, QueueId, Resources, TaskId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How a task is scheduled.
///
/// - `Short`: the Megha path. Placed only where the GM's view shows free resources,
///   validated by the LM, never queued at a worker. The default.
/// - `Guaranteed` / `Queueable`: Mercury's container types (GUARANTEED goes through the
///   designated GM; QUEUEABLE may wait in worker queues and be killed for GUARANTEED work).
/// - `LongRunning`: an LRA container with tags, placed by the designated GM's ILP placer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    #[default]
    Short,
    Guaranteed,
    Queueable,
    LongRunning,
}

impl TaskKind {
    /// Work that must be handled by the designated GM.
    pub fn needs_designated_gm(self) -> bool {
        matches!(self, TaskKind::Guaranteed | TaskKind::LongRunning)
    }
}

/// Everything a scheduler needs to know about one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub id: TaskId,
    /// The user queue the task was submitted to.
    pub queue: QueueId,
    /// A submission that names no type is Short.
    #[serde(default)]
    pub kind: TaskKind,
    pub resources: Resources,
    pub constraints: ConstraintSet,
    /// How long the task runs once started (synthetic tasks replayed from traces).
    pub duration: Micros,
    /// Tags for LRA placement constraints (MEDEA); empty for most tasks.
    #[serde(default)]
    pub tags: Vec<Arc<str>>,
}

impl TaskSpec {
    /// A short task with no constraints, for tests and examples.
    pub fn short(id: TaskId, resources: Resources, duration: Micros) -> Self {
        TaskSpec {
            id,
            queue: QueueId(0),
            kind: TaskKind::Short,
            resources,
            constraints: ConstraintSet::EMPTY,
            duration,
            tags: Vec::new(),
        }
    }

    pub fn with_constraints(mut self, constraints: ConstraintSet) -> Self {
        self.constraints = constraints;
        self
    }

    pub fn with_queue(mut self, queue: QueueId) -> Self {
        self.queue = queue;
        self
    }

    pub fn with_kind(mut self, kind: TaskKind) -> Self {
        self.kind = kind;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Micros, TaskId};

    #[test]
    fn a_submission_without_a_kind_is_short() {
        let task = TaskSpec::short(TaskId::new(1, 0), Resources::cores(1, 1), Micros(1))
            .with_kind(TaskKind::Queueable);
        let mut json = serde_json::to_value(&task).unwrap();
        assert_eq!(json["kind"], "queueable");
        json.as_object_mut().unwrap().remove("kind");
        let back: TaskSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back.kind, TaskKind::Short);
    }
}
