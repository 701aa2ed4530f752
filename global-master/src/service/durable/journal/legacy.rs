//! Jobs journaled by a GM of wire version 6 to 8, whose tasks had neither a
//! preemption count nor a priority class (issue 37 added both to
//! [`TaskSpec`]): read in their own shape and taken up with both at 0 (every task
//! was of the one class then). The other stored records kept their shape.

use common::{Executor, Micros, QueueId, Resources, TaskId, TaskKind, TaskSpec};
use serde::Deserialize;
use std::sync::Arc;

/// Wire versions whose journaled tasks have this shape.
pub(super) const TASKS_WITHOUT_PRIORITY: &[u8] = &[6, 7, 8];

/// A journaled job of those versions; `A` is the job's acceptance record (the
/// same shape then and now).
#[derive(Deserialize)]
pub(super) struct OldJob<A> {
    pub accepted: A,
    pub tasks: Vec<OldTaskSpec>,
}

/// [`TaskSpec`] as versions 6 to 8 wrote it (bincode: fields in order).
#[derive(Deserialize)]
pub(super) struct OldTaskSpec {
    id: TaskId,
    queue: QueueId,
    kind: TaskKind,
    resources: Resources,
    constraints: common::ConstraintSet,
    duration: Micros,
    tags: Vec<Arc<str>>,
    executor: Option<Executor>,
    attempt: u32,
}

impl From<OldTaskSpec> for TaskSpec {
    fn from(t: OldTaskSpec) -> Self {
        TaskSpec {
            id: t.id,
            queue: t.queue,
            kind: t.kind,
            resources: t.resources,
            constraints: t.constraints,
            duration: t.duration,
            tags: t.tags,
            executor: t.executor,
            attempt: t.attempt,
            preemptions: 0,
            priority: 0,
        }
    }
}
