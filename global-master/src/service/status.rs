//! What the GM knows about each task it accepted, for `GET /v1/tasks/...` and
//! `GET /v1/jobs/...`: queued -> dispatched -> launched -> finished | failed, from
//! its own decisions, the LMs' answers and the LMs' reports of task ends
//! (`LmToGm::Ended`). An end is final: a late answer or a stale requeue reason does
//! not move a task back. Starts are on the event stream.

use common::reasons::PendingReason;
use common::{JobId, LmId, Micros, NodeId, TaskId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Dispatched,
    Launched,
    Unplaceable,
    /// Ended at its worker with exit 0 (or a synthetic task's time was up).
    Finished,
    /// Ended at its worker with a failure (`failure` says which).
    Failed,
}

impl TaskState {
    /// An end: nothing changes the task's state any more.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Finished | TaskState::Failed)
    }
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
    /// When the worker saw it end (worker clock).
    pub ended_at_us: Option<u64>,
    /// Why it failed (exit code, signal, start failure), for `failed`.
    pub failure: Option<common::messages::TaskFailure>,
}

#[derive(Clone, Debug, Serialize)]
pub struct JobStatus {
    pub job: u64,
    pub tasks: u32,
    pub states: BTreeMap<TaskState, u32>,
    pub state: JobState,
}

/// A job as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Every task finished.
    Finished,
    /// Every task ended and at least one failed.
    Failed,
    /// Some task has not ended yet.
    Active,
}

#[derive(Debug, Default)]
pub struct Tracker {
    tasks: HashMap<TaskId, TaskStatus>,
    /// Tasks per job, by job id (ids order jobs by submission).
    jobs: BTreeMap<JobId, u32>,
}

/// One page of [`Tracker::list`].
#[derive(Clone, Debug, Serialize)]
pub struct JobPage {
    pub jobs: Vec<JobStatus>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next: Option<u64>,
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
                ended_at_us: None,
                failure: None,
            },
        );
    }

    /// The task, unless it already ended.
    fn live(&mut self, task: TaskId) -> Option<&mut TaskStatus> {
        self.tasks.get_mut(&task).filter(|s| !s.state.is_final())
    }

    pub fn dispatched(&mut self, task: TaskId, lm: LmId, node: NodeId) {
        if let Some(s) = self.live(task) {
            s.state = TaskState::Dispatched;
            s.lm = Some(lm.0);
            s.node = Some(node.0);
            s.attempts += 1;
        }
    }

    /// Records a new reason; returns true when it differs from the last one (the
    /// caller publishes an event only then, to avoid a storm of identical requeues).
    pub fn pending(&mut self, task: TaskId, reason: &PendingReason, unplaceable: bool) -> bool {
        let Some(s) = self.live(task) else {
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
        let s = self.live(task)?;
        s.state = TaskState::Launched;
        s.reason = None;
        s.reason_detail = None;
        s.launched_at_us = Some(now.0);
        Some(Micros(s.submitted_at_us))
    }

    /// The task ended at its worker (reported by its LM). A repeat changes nothing.
    pub fn ended(&mut self, end: &common::messages::TaskEnd) {
        let Some(s) = self.live(end.task) else {
            return;
        };
        s.state = match end.failure {
            None => TaskState::Finished,
            Some(_) => TaskState::Failed,
        };
        s.reason = None;
        s.reason_detail = None;
        s.node = Some(end.node.0);
        s.ended_at_us = Some(end.at.0);
        s.failure = end.failure.clone();
    }

    pub fn task(&self, task: TaskId) -> Option<&TaskStatus> {
        self.tasks.get(&task)
    }

    /// Jobs after `after` (by id, i.e. submission order), at most `limit`, whose
    /// state is `state` if given (`finished`, `failed`, `active`).
    pub fn list(&self, after: Option<u64>, limit: usize, state: Option<JobState>) -> JobPage {
        let start = after.map_or(Bound::Unbounded, |a| Bound::Excluded(JobId(a)));
        let mut jobs = Vec::new();
        let mut next = None;
        for job in self.jobs.range((start, Bound::Unbounded)).map(|(j, _)| *j) {
            let Some(status) = self.job(job) else {
                continue;
            };
            if state.is_some_and(|s| s != status.state) {
                continue;
            }
            if jobs.len() == limit {
                next = jobs.last().map(|j: &JobStatus| j.job);
                break;
            }
            jobs.push(status);
        }
        JobPage { jobs, next }
    }

    pub fn job(&self, job: JobId) -> Option<JobStatus> {
        let &tasks = self.jobs.get(&job)?;
        let mut states = BTreeMap::new();
        for index in 0..tasks {
            if let Some(s) = self.tasks.get(&TaskId { job, index }) {
                *states.entry(s.state).or_default() += 1;
            }
        }
        let ended = |state| states.get(&state).copied().unwrap_or(0);
        let state = match (ended(TaskState::Finished), ended(TaskState::Failed)) {
            (f, 0) if f == tasks => JobState::Finished,
            (f, e) if e > 0 && f + e == tasks => JobState::Failed,
            _ => JobState::Active,
        };
        Some(JobStatus {
            job: job.0,
            tasks,
            states,
            state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::{TaskEnd, TaskFailure};

    fn end(task: TaskId, failure: Option<TaskFailure>) -> TaskEnd {
        TaskEnd {
            task,
            node: NodeId(3),
            at: Micros(50),
            failure,
        }
    }

    #[test]
    fn ends_are_final_and_make_the_job_state() {
        let mut t = Tracker::default();
        let (a, b) = (TaskId::new(1, 0), TaskId::new(1, 1));
        t.accepted(a, Micros(1));
        t.accepted(b, Micros(1));
        t.dispatched(a, LmId(0), NodeId(3));
        assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
        // The end can overtake the launch answer: the late answer changes nothing.
        t.ended(&end(a, None));
        assert!(t.launched(a, Micros(9)).is_none());
        assert!(!t.pending(a, &PendingReason::NoStateYet, false));
        assert_eq!(t.task(a).expect("a").state, TaskState::Finished);
        assert_eq!(t.task(a).expect("a").ended_at_us, Some(50));
        assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
        t.launched(b, Micros(9));
        t.ended(&end(b, Some(TaskFailure::Exit { code: 3 })));
        // A repeated end (the LM's stream resends) is harmless.
        t.ended(&end(b, None));
        let s = t.task(b).expect("b");
        assert_eq!(s.state, TaskState::Failed);
        assert_eq!(s.failure, Some(TaskFailure::Exit { code: 3 }));
        let job = t.job(a.job).expect("job");
        assert_eq!(job.state, JobState::Failed);
        assert_eq!(job.states.get(&TaskState::Finished), Some(&1));
    }

    #[test]
    fn jobs_list_in_pages_and_by_state() {
        let mut t = Tracker::default();
        for job in 1..=5 {
            t.accepted(TaskId::new(job, 0), Micros(job));
        }
        t.ended(&end(TaskId::new(2, 0), None));
        t.ended(&end(TaskId::new(4, 0), None));
        let ids = |p: &JobPage| p.jobs.iter().map(|j| j.job).collect::<Vec<_>>();
        let first = t.list(None, 2, None);
        assert_eq!((ids(&first), first.next), (vec![1, 2], Some(2)));
        let second = t.list(first.next, 2, None);
        assert_eq!((ids(&second), second.next), (vec![3, 4], Some(4)));
        let last = t.list(second.next, 2, None);
        assert_eq!((ids(&last), last.next), (vec![5], None));
        let finished = t.list(None, 10, Some(JobState::Finished));
        assert_eq!((ids(&finished), finished.next), (vec![2, 4], None));
        assert_eq!(
            ids(&t.list(None, 10, Some(JobState::Active))),
            vec![1, 3, 5]
        );
    }
}
