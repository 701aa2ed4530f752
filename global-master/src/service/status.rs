//! What the GM knows about each task it accepted, for `GET /v1/tasks/...` and
//! `GET /v1/jobs/...`. The GM's knowledge ends when the LM accepts a launch
//! (`launched`); starts and finishes are on the event stream.

use common::reasons::PendingReason;
use common::{JobId, LmId, Micros, NodeId, TaskId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Dispatched,
    Launched,
    Unplaceable,
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskStatus {
    pub job: u64,
    pub index: u32,
    pub state: TaskState,
    /// Why the task is not running yet (human readable), if the GM knows.
    pub reason: Option<String>,
    pub reason_detail: Option<PendingReason>,
    pub lm: Option<u16>,
    pub node: Option<u32>,
    pub attempts: u32,
    pub submitted_at_us: u64,
    pub launched_at_us: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct JobStatus {
    pub job: u64,
    pub tasks: u32,
    pub states: BTreeMap<TaskState, u32>,
}

#[derive(Debug, Default)]
pub struct Tracker {
    tasks: HashMap<TaskId, TaskStatus>,
    jobs: HashMap<JobId, u32>,
}

impl Tracker {
    pub fn accepted(&mut self, task: TaskId, now: Micros) {
        *self.jobs.entry(task.job).or_default() += 1;
        self.tasks.insert(
            task,
            TaskStatus {
                job: task.job.0,
                index: task.index,
                state: TaskState::Queued,
                reason: None,
                reason_detail: None,
                lm: None,
                node: None,
                attempts: 0,
                submitted_at_us: now.0,
                launched_at_us: None,
            },
        );
    }

    pub fn dispatched(&mut self, task: TaskId, lm: LmId, node: NodeId) {
        if let Some(s) = self.tasks.get_mut(&task) {
            s.state = TaskState::Dispatched;
            s.lm = Some(lm.0);
            s.node = Some(node.0);
            s.attempts += 1;
        }
    }

    /// Records a new reason; returns true when it differs from the last one (the
    /// caller publishes an event only then, to avoid a storm of identical requeues).
    pub fn pending(&mut self, task: TaskId, reason: &PendingReason, unplaceable: bool) -> bool {
        let Some(s) = self.tasks.get_mut(&task) else {
            return false;
        };
        s.state = if unplaceable {
            TaskState::Unplaceable
        } else {
            TaskState::Queued
        };
        s.lm = None;
        s.node = None;
        let changed = s.reason_detail.as_ref() != Some(reason);
        s.reason = Some(reason.to_string());
        s.reason_detail = Some(reason.clone());
        changed
    }

    /// The LM accepted the task; returns when it was submitted.
    pub fn launched(&mut self, task: TaskId, now: Micros) -> Option<Micros> {
        let s = self.tasks.get_mut(&task)?;
        s.state = TaskState::Launched;
        s.reason = None;
        s.reason_detail = None;
        s.launched_at_us = Some(now.0);
        Some(Micros(s.submitted_at_us))
    }

    pub fn task(&self, task: TaskId) -> Option<&TaskStatus> {
        self.tasks.get(&task)
    }

    pub fn job(&self, job: JobId) -> Option<JobStatus> {
        let &tasks = self.jobs.get(&job)?;
        let mut states = BTreeMap::new();
        for index in 0..tasks {
            if let Some(s) = self.tasks.get(&TaskId { job, index }) {
                *states.entry(s.state).or_default() += 1;
            }
        }
        Some(JobStatus {
            job: job.0,
            tasks,
            states,
        })
    }
}
