//! The shapes the status API answers with: a task's state and record, a job's.

use common::messages::TaskFailure;
use common::reasons::PendingReason;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(utoipa::ToSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// A task of a DAG job whose stage waits for a parent stage to end (`reason`
    /// names it); queued once every parent stage ended.
    Blocked,
    Queued,
    Dispatched,
    Launched,
    /// Its worker reported the start.
    Running,
    /// Preempted by its LM (for a queue under its share) and queued again: it waits
    /// to be dispatched again (not final; `killed_runs` keeps the run).
    Killed,
    /// No node can ever host it: it left the GM's queues (final).
    Unplaceable,
    /// Ended at its worker with exit 0 (or a synthetic task's time was up).
    Finished,
    /// Ended at its worker with a failure (`failure` says which), and its job's
    /// retry policy runs it no more.
    Failed,
    /// Its job was cancelled: it left the queue, or its LM stopped it.
    Cancelled,
}

impl TaskState {
    /// An end: nothing changes the task's state any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Finished | TaskState::Failed | TaskState::Cancelled | TaskState::Unplaceable
        )
    }
}

/// One failed run of a task.
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct FailedAttempt {
    /// The run (1 for the first).
    pub attempt: u32,
    pub failure: TaskFailure,
    /// Where it ran: its LM (when the GM knew) and node; its log stays there
    /// (`GET /v1/tasks/{job}/{index}/logs?attempt=N`).
    pub lm: Option<u16>,
    pub node: u32,
    pub ended_at_us: u64,
}

/// One run of a task that its LM killed (preempted), after which it was requeued.
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct KilledRun {
    /// The run (1 for the first).
    pub attempt: u32,
    pub lm: u16,
    /// Where it ran, if the GM knew.
    pub node: Option<u32>,
    /// Why (human readable).
    pub reason: String,
    /// How long it had run (its lost work).
    pub ran_us: u64,
    /// When the GM heard of it (GM clock).
    pub at_us: u64,
}

#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct TaskStatus {
    pub job: u64,
    pub index: u32,
    pub state: TaskState,
    /// Why the task is not running yet (human readable), if the GM knows.
    pub reason: Option<String>,
    pub reason_detail: Option<PendingReason>,
    pub lm: Option<u16>,
    pub node: Option<u32>,
    /// Placement attempts (dispatches) so far, over every run.
    pub attempts: u32,
    /// The current run (1 for the first; more after a failure its job's retry
    /// policy runs again), and the most runs the policy allows.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The failed runs, oldest first.
    pub failures: Vec<FailedAttempt>,
    /// The runs its LM killed (preempted; the task was queued again), oldest first.
    pub killed_runs: Vec<KilledRun>,
    /// When a failed task goes back to its queue (waiting for its backoff).
    pub retry_at_us: Option<u64>,
    pub submitted_at_us: u64,
    pub launched_at_us: Option<u64>,
    /// When the worker started the current run (worker clock).
    pub started_at_us: Option<u64>,
    /// When the worker saw it end (worker clock), or the GM cancelled it.
    pub ended_at_us: Option<u64>,
    /// Why it failed (exit code, signal, start failure, lost), for `failed`.
    pub failure: Option<TaskFailure>,
    /// Its stage, in a DAG job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Soft constraints (docs/alsched.md): the branch of its job's utility tree it
    /// got and why better ones were not taken; only for a job with a tree, once
    /// the task was placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft: Option<SoftChoiceStatus>,
}

/// The branch of its job's utility tree a task got ([`TaskStatus::soft`]).
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct SoftChoiceStatus {
    /// The branch taken (its path in the tree); `null`: none had room (or none
    /// would gain), the task went where its hard constraints allowed.
    pub branch: Option<String>,
    /// The job's utility once this task was placed.
    pub utility: f64,
    /// The better branches not taken, best first, and why.
    pub passed_over: Vec<PassedOverStatus>,
}

#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct PassedOverStatus {
    pub branch: String,
    /// Why (human readable: no node in the set, or no room).
    pub why: String,
}

/// One stage of a DAG job: its parents and its tasks' states.
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct StageStatus {
    pub name: String,
    pub after: Vec<String>,
    pub states: BTreeMap<TaskState, u32>,
}

#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct JobStatus {
    pub job: u64,
    pub tasks: u32,
    pub states: BTreeMap<TaskState, u32>,
    pub state: JobState,
    /// The queues its tasks were submitted to, and the submitter's label.
    pub queues: Vec<String>,
    pub user: Option<String>,
    /// Its name and labels, as submitted.
    pub name: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub max_attempts: u32,
    pub submitted_at_us: u64,
    /// When its last task ended (GM clock).
    pub ended_at_us: Option<u64>,
    /// When a cancel was asked for.
    pub cancel_requested_at_us: Option<u64>,
    /// A DAG job's stages, in the order it named them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageStatus>,
    /// The jobs it runs after.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after_jobs: Vec<u64>,
    /// The failed (or unplaceable) task of lowest index, if any: what `megha wait`
    /// and `megha status --exit-code` exit with (see docs/cli.md).
    pub first_failed: Option<FailedTask>,
}

/// A job's failed task of lowest index, and why it failed.
#[derive(utoipa::ToSchema, Clone, Debug, Serialize)]
pub struct FailedTask {
    pub index: u32,
    /// `failed` or `unplaceable`.
    pub state: TaskState,
    /// Its last run's failure (none for an unplaceable task).
    pub failure: Option<TaskFailure>,
}

/// A job as a whole.
#[derive(utoipa::ToSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Every task finished.
    Finished,
    /// Every task ended and at least one failed (or was unplaceable).
    Failed,
    /// Every task ended and at least one was cancelled.
    Cancelled,
    /// Some task has not ended yet.
    Active,
}
