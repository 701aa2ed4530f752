//! What the GM knows about each task it accepted, for `GET /v1/tasks/...` and
//! `GET /v1/jobs/...`: queued -> dispatched -> launched -> running -> finished |
//! failed | killed | cancelled (and unplaceable), from its own decisions, the LMs'
//! answers and the LMs' reports of task starts and ends (`LmToGm::Started`,
//! `LmToGm::Ended`) and preemptions (`LmToGm::Requeue`). `killed` is not final: the
//! task was preempted and is back in its queue; it stays `killed` (the run is kept in
//! `killed_runs`) until it is dispatched again. See docs/lifecycle.md. An
//! end is final: a late answer or a stale requeue reason does not move a task back;
//! only a retry under the job's policy (the core decides) queues a failed task again.
//!
//! Jobs that ended (every task final) are kept for the retention time and count
//! ([`Retention`]), then forgotten, so the GM's memory stays bounded.

use common::messages::{TaskEnd, TaskStart};
use common::reasons::PendingReason;
use common::{JobId, LmId, Micros, NodeId, TaskId};
use gm_core::lifecycle::Retry;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::time::Duration;

mod shapes;
mod stages;
pub use shapes::{
    FailedAttempt, FailedTask, JobState, JobStatus, KilledRun, PassedOverStatus, SoftChoiceStatus,
    StageStatus, TaskState, TaskStatus,
};

/// How long and how many ended jobs the GM keeps.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// An ended job is forgotten this long after its end...
    pub keep: Duration,
    /// ... or sooner, oldest end first, when more jobs than this have ended.
    pub max_jobs: usize,
}

impl Default for Retention {
    /// One hour, 10,000 jobs.
    fn default() -> Self {
        Retention {
            keep: Duration::from_secs(3600),
            max_jobs: 10_000,
        }
    }
}

#[derive(Debug, Default)]
struct JobEntry {
    tasks: u32,
    /// Tasks not final yet.
    open: u32,
    queues: Vec<String>,
    user: Option<String>,
    max_attempts: u32,
    submitted_at: u64,
    ended_at: Option<u64>,
    cancel_requested_at: Option<u64>,
    name: Option<String>,
    labels: BTreeMap<String, String>,
    /// A DAG job's stages (name, parents' names) and the jobs it runs after.
    stages: Vec<(String, Vec<String>)>,
    after_jobs: Vec<u64>,
    /// Its spec as submitted, packed, or why it was not kept
    /// ([`crate::service::durable::specs`]).
    spec: Option<crate::service::durable::specs::Packed>,
}

#[derive(Debug, Default)]
pub struct Tracker {
    tasks: HashMap<TaskId, TaskStatus>,
    /// By job id (ids order jobs by submission).
    jobs: BTreeMap<JobId, JobEntry>,
    /// Ended jobs by end time, for retention.
    ended: BTreeSet<(u64, JobId)>,
    retention: Retention,
    /// Ended jobs forgotten so far.
    pub forgotten: u64,
    /// The time of the last [`Tracker::expire`] (the driver calls it every step).
    now: Micros,
    /// Jobs that ended since the last [`Tracker::take_ended_jobs`].
    just_ended: Vec<JobId>,
}

/// One page of [`Tracker::list`].
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct JobPage {
    pub jobs: Vec<JobStatus>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next: Option<u64>,
}

/// Filters of [`Tracker::list`], and its order.
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub queue: Option<String>,
    pub user: Option<String>,
    pub order: JobOrder,
    /// Only jobs of this name.
    pub name: Option<String>,
    /// Only jobs with this label (key, value).
    pub label: Option<(String, String)>,
}

/// The order of [`Tracker::list`]: by submission (job id), newest first unless
/// asked otherwise; `next` pages on in the same order.
#[derive(utoipa::ToSchema, Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOrder {
    #[default]
    Newest,
    Oldest,
}

impl Tracker {
    pub fn new(retention: Retention) -> Self {
        Tracker {
            retention,
            ..Tracker::default()
        }
    }

    pub fn accepted(&mut self, task: TaskId, now: Micros) {
        let job = self.jobs.entry(task.job).or_insert_with(|| JobEntry {
            max_attempts: 1,
            submitted_at: now.0,
            ..JobEntry::default()
        });
        job.tasks += 1;
        job.open += 1;
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
                attempt: 1,
                max_attempts: job.max_attempts,
                failures: Vec::new(),
                killed_runs: Vec::new(),
                retry_at_us: None,
                submitted_at_us: now.0,
                launched_at_us: None,
                started_at_us: None,
                ended_at_us: None,
                failure: None,
                stage: None,
                soft: None,
            },
        );
    }

    /// What the submission said of the job as a whole (call before its tasks are
    /// accepted).
    pub fn job_accepted(
        &mut self,
        job: JobId,
        now: Micros,
        queues: Vec<String>,
        user: Option<String>,
        max_attempts: u32,
    ) {
        let entry = self.jobs.entry(job).or_default();
        entry.queues = queues;
        entry.user = user;
        entry.max_attempts = max_attempts;
        entry.submitted_at = now.0;
    }

    /// The job's name and labels (call after [`Tracker::job_accepted`]).
    pub fn named(&mut self, job: JobId, names: crate::service::admission::api::JobNames) {
        if let Some(entry) = self.jobs.get_mut(&job) {
            entry.name = names.name;
            entry.labels = names.labels;
        }
    }

    /// Jobs that ended (every task final) since the last call (the driver calls it
    /// after every step).
    pub fn take_ended_jobs(&mut self) -> Vec<JobId> {
        std::mem::take(&mut self.just_ended)
    }

    /// The task, unless it already ended.
    fn live(&mut self, task: TaskId) -> Option<&mut TaskStatus> {
        self.tasks.get_mut(&task).filter(|s| !s.state.is_final())
    }

    /// A task became final: its job may have ended.
    fn closed(&mut self, job: JobId, now: Micros) {
        let Some(entry) = self.jobs.get_mut(&job) else {
            return;
        };
        entry.open = entry.open.saturating_sub(1);
        if entry.open == 0 && entry.ended_at.is_none() {
            entry.ended_at = Some(now.0);
            self.ended.insert((now.0, job));
            self.just_ended.push(job);
        }
    }

    pub fn dispatched(&mut self, task: TaskId, lm: LmId, node: NodeId) {
        if let Some(s) = self.live(task) {
            s.state = TaskState::Dispatched;
            s.lm = Some(lm.0);
            s.node = Some(node.0);
            s.attempts += 1;
        }
    }

    /// A task read back from the journal of a previous life resumes as run
    /// `attempt` (it failed or was lost `attempt - 1` times before).
    pub fn resumed_as(&mut self, task: TaskId, attempt: u32) {
        if let Some(s) = self.live(task) {
            s.attempt = attempt;
        }
    }

    /// Records a new reason; returns true when it differs from the last one (the
    /// caller publishes an event only then, to avoid a storm of identical requeues).
    /// `unplaceable` ends the task (the core dropped it). A `killed` task stays
    /// `killed` until dispatched again (the reason says why it still waits).
    pub fn pending(&mut self, task: TaskId, reason: &PendingReason, unplaceable: bool) -> bool {
        let Some(s) = self.live(task) else {
            return false;
        };
        s.state = match (unplaceable, s.state) {
            (true, _) => TaskState::Unplaceable,
            (false, TaskState::Killed) => TaskState::Killed,
            (false, _) => TaskState::Queued,
        };
        s.lm = None;
        s.node = None;
        let changed = s.reason_detail.as_ref() != Some(reason);
        s.reason = Some(reason.to_string());
        s.reason_detail = Some(reason.clone());
        if unplaceable {
            self.closed(task.job, self.now);
        }
        changed
    }

    /// Its LM killed the running task (preempted it, `reason` says for what) and
    /// handed it back: `killed`, queued again, the run kept in `killed_runs`. A
    /// repeat (the LM resends) or a report about an ended task changes nothing.
    pub fn killed(
        &mut self,
        task: TaskId,
        lm: LmId,
        reason: &PendingReason,
        ran: Micros,
        now: Micros,
    ) {
        let Some(s) = self.live(task) else {
            return;
        };
        if s.state == TaskState::Killed && s.reason_detail.as_ref() == Some(reason) {
            return;
        }
        s.killed_runs.push(KilledRun {
            attempt: s.attempt,
            lm: lm.0,
            node: s.node,
            reason: reason.to_string(),
            ran_us: ran.0,
            at_us: now.0,
        });
        s.state = TaskState::Killed;
        s.reason = Some(reason.to_string());
        s.reason_detail = Some(reason.clone());
        s.lm = None;
        s.node = None;
        s.launched_at_us = None;
        s.started_at_us = None;
    }

    /// The LM accepted the task; returns when it was submitted.
    pub fn launched(&mut self, task: TaskId, now: Micros) -> Option<Micros> {
        let s = self.live(task)?;
        if s.state != TaskState::Running {
            s.state = TaskState::Launched;
        }
        s.reason = None;
        s.reason_detail = None;
        s.launched_at_us = Some(now.0);
        Some(Micros(s.submitted_at_us))
    }

    /// The worker started the task (reported by its LM; it may overtake the launch
    /// answer). A repeat changes nothing.
    pub fn started(&mut self, start: &TaskStart) {
        let Some(s) = self.live(start.task) else {
            return;
        };
        if matches!(s.state, TaskState::Dispatched | TaskState::Launched) {
            s.state = TaskState::Running;
            s.node = Some(start.node.0);
            s.started_at_us = Some(start.at.0);
            s.reason = None;
            s.reason_detail = None;
        }
    }

    /// The task ended at its worker (reported by its LM). A repeat changes nothing.
    pub fn ended(&mut self, end: &TaskEnd, now: Micros) {
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
        if let Some(failure) = &end.failure {
            s.failures.push(FailedAttempt {
                attempt: s.attempt,
                failure: failure.clone(),
                lm: s.lm,
                node: end.node.0,
                ended_at_us: end.at.0,
            });
        }
        self.closed(end.task.job, now);
    }

    /// The task failed and its job's policy runs it again: queued (once its backoff
    /// is over) for run `retry.attempt`.
    pub fn retrying(&mut self, end: &TaskEnd, retry: &Retry) {
        let Some(s) = self.live(end.task) else {
            return;
        };
        s.failures.push(FailedAttempt {
            attempt: s.attempt,
            failure: retry.failure.clone(),
            lm: s.lm,
            node: end.node.0,
            ended_at_us: end.at.0,
        });
        s.state = TaskState::Queued;
        s.attempt = retry.attempt;
        s.failure = Some(retry.failure.clone());
        s.retry_at_us = Some(retry.at.0);
        s.lm = None;
        s.node = None;
        s.started_at_us = None;
        s.launched_at_us = None;
        let reason = PendingReason::Retrying {
            attempt: retry.attempt,
            failure: format!("{} (on {})", retry.failure, end.node),
        };
        s.reason = Some(reason.to_string());
        s.reason_detail = Some(reason);
    }

    /// A cancel was asked for: false if the job is unknown.
    pub fn cancel_requested(&mut self, job: JobId, now: Micros) -> bool {
        match self.jobs.get_mut(&job) {
            Some(entry) => {
                entry.cancel_requested_at.get_or_insert(now.0);
                true
            }
            None => false,
        }
    }

    /// The task ended cancelled (left the queue, or stopped by its LM). Returns
    /// false if it had already ended.
    pub fn cancelled(&mut self, task: TaskId, now: Micros) -> bool {
        let Some(s) = self.live(task) else {
            return false;
        };
        s.state = TaskState::Cancelled;
        s.reason = None;
        s.reason_detail = None;
        s.retry_at_us = None;
        s.ended_at_us = Some(now.0);
        self.closed(task.job, now);
        true
    }

    pub fn task(&self, task: TaskId) -> Option<&TaskStatus> {
        self.tasks.get(&task)
    }

    /// Whether `task` is known here and in a final state (its end was heard).
    pub fn has_ended(&self, task: TaskId) -> bool {
        self.tasks.get(&task).is_some_and(|t| t.state.is_final())
    }

    /// Forgets the jobs that ended longer than the retention time ago, and the
    /// oldest ended ones beyond the retention count. Returns how many.
    pub fn expire(&mut self, now: Micros) -> usize {
        self.now = now;
        let keep = self.retention.keep.as_micros() as u64;
        let mut forgotten = 0;
        while let Some(&(at, job)) = self.ended.first() {
            let too_old = now.0.saturating_sub(at) > keep;
            if !too_old && self.ended.len() <= self.retention.max_jobs {
                break;
            }
            self.ended.pop_first();
            if let Some(entry) = self.jobs.remove(&job) {
                for index in 0..entry.tasks {
                    self.tasks.remove(&TaskId { job, index });
                }
            }
            forgotten += 1;
        }
        self.forgotten += forgotten as u64;
        forgotten
    }

    /// Jobs and tasks held (gauges).
    pub fn size(&self) -> (usize, usize) {
        (self.jobs.len(), self.tasks.len())
    }

    /// Jobs after `after` in `filter.order` (by id, i.e. submission order: newest
    /// first, older ids after; or oldest first, newer ids after), at most `limit`,
    /// that pass `filter`.
    pub fn list(&self, after: Option<u64>, limit: usize, filter: &JobFilter) -> JobPage {
        let cursor = after.map_or(Bound::Unbounded, |a| Bound::Excluded(JobId(a)));
        let in_order: Box<dyn Iterator<Item = (&JobId, &JobEntry)>> = match filter.order {
            JobOrder::Oldest => Box::new(self.jobs.range((cursor, Bound::Unbounded))),
            JobOrder::Newest => Box::new(self.jobs.range((Bound::Unbounded, cursor)).rev()),
        };
        let mut jobs = Vec::new();
        let mut next = None;
        for (job, entry) in in_order {
            if filter
                .queue
                .as_ref()
                .is_some_and(|q| !entry.queues.contains(q))
                || filter.user.is_some() && filter.user != entry.user
                || filter.name.is_some() && filter.name != entry.name
                || filter
                    .label
                    .as_ref()
                    .is_some_and(|(k, v)| entry.labels.get(k) != Some(v))
            {
                continue;
            }
            let Some(status) = self.job(*job) else {
                continue;
            };
            if filter.state.is_some_and(|s| s != status.state) {
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

    /// Keeps `job`'s packed spec (or why it was not kept) while the job is held.
    pub fn set_spec(&mut self, job: JobId, spec: crate::service::durable::specs::Packed) {
        if let Some(entry) = self.jobs.get_mut(&job) {
            entry.spec = Some(spec);
        }
    }

    /// `job`'s packed spec, when the tracker holds the job and was given one.
    pub fn spec(&self, job: JobId) -> Option<&crate::service::durable::specs::Packed> {
        self.jobs.get(&job)?.spec.as_ref()
    }

    pub fn job(&self, job: JobId) -> Option<JobStatus> {
        let entry = self.jobs.get(&job)?;
        let mut states = BTreeMap::new();
        let mut first_failed = None;
        for index in 0..entry.tasks {
            if let Some(s) = self.tasks.get(&TaskId { job, index }) {
                *states.entry(s.state).or_default() += 1;
                if first_failed.is_none()
                    && matches!(s.state, TaskState::Failed | TaskState::Unplaceable)
                {
                    first_failed = Some(FailedTask {
                        index,
                        state: s.state,
                        failure: s.failure.clone(),
                    });
                }
            }
        }
        let count = |state| states.get(&state).copied().unwrap_or(0);
        let state = if entry.open > 0 {
            JobState::Active
        } else if count(TaskState::Cancelled) > 0 {
            JobState::Cancelled
        } else if count(TaskState::Finished) == entry.tasks {
            JobState::Finished
        } else {
            JobState::Failed
        };
        let stages = entry
            .stages
            .iter()
            .map(|(name, after)| {
                let mut states = BTreeMap::new();
                for index in 0..entry.tasks {
                    if let Some(s) = self
                        .tasks
                        .get(&TaskId { job, index })
                        .filter(|s| s.stage.as_deref() == Some(name.as_str()))
                    {
                        *states.entry(s.state).or_default() += 1;
                    }
                }
                StageStatus {
                    name: name.clone(),
                    after: after.clone(),
                    states,
                }
            })
            .collect();
        Some(JobStatus {
            stages,
            after_jobs: entry.after_jobs.clone(),
            job: job.0,
            tasks: entry.tasks,
            states,
            state,
            queues: entry.queues.clone(),
            user: entry.user.clone(),
            name: entry.name.clone(),
            labels: entry.labels.clone(),
            max_attempts: entry.max_attempts,
            submitted_at_us: entry.submitted_at,
            ended_at_us: entry.ended_at,
            cancel_requested_at_us: entry.cancel_requested_at,
            first_failed,
        })
    }

    /// Every task held (for the dashboard's allocation-time histogram).
    pub fn tasks(&self) -> impl Iterator<Item = &TaskStatus> {
        self.tasks.values()
    }

    /// The newest jobs first, at most `limit`, of `user` only when given.
    pub fn newest(&self, limit: usize, user: Option<&str>) -> Vec<JobStatus> {
        self.jobs
            .iter()
            .rev()
            .filter(|(_, e)| user.is_none_or(|u| e.user.as_deref() == Some(u)))
            .filter_map(|(job, _)| self.job(*job))
            .take(limit)
            .collect()
    }

    /// The tasks this GM believes run at `lm` (launched there, not ended), launched
    /// at `before` or earlier, with their current run.
    pub fn running_on(&self, lm: LmId, before: Micros) -> Vec<(TaskId, u32)> {
        let mut tasks: Vec<(TaskId, u32)> = self
            .tasks
            .iter()
            .filter(|(_, s)| {
                matches!(s.state, TaskState::Launched | TaskState::Running)
                    && s.lm == Some(lm.0)
                    && s.launched_at_us.is_some_and(|at| at <= before.0)
            })
            .map(|(t, s)| (*t, s.attempt))
            .collect();
        tasks.sort_unstable();
        tasks
    }

    /// The tasks of `job` not ended yet.
    pub fn open_tasks(&self, job: JobId) -> Vec<TaskId> {
        let Some(entry) = self.jobs.get(&job) else {
            return Vec::new();
        };
        (0..entry.tasks)
            .map(|index| TaskId { job, index })
            .filter(|t| self.tasks.get(t).is_some_and(|s| !s.state.is_final()))
            .collect()
    }
}

#[cfg(test)]
mod tests;
