//! The public submission format (JSON) and its validation, kept pure so that every
//! refusal can be table-tested: each names the offending field and the reason.

use super::constraints_api::check_constraints;
pub use super::constraints_api::ConstraintRef;
pub use super::error::{parse_id, ApiError};
use super::executor_api::{check_executor, ExecutorRequest};
use super::stages_api::{check_stages, AfterJobRequest, StageRequest};
use common::attributes::Attributes;
use common::dag::JobDag;
use common::fairness::{FairnessConfig, DEFAULT_QUEUE};
use common::retry::{Backoff, RetryPolicy};
use common::{ConstraintSet, Executor, GmId, Micros, QueueId, Resources, TaskKind};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `POST /v1/jobs` body: a batch of tasks submitted together (one job).
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    #[schema(min_items = 1)]
    pub tasks: Vec<TaskRequest>,
    /// How failed (or lost) tasks run again; absent: the GM's default
    /// (`--max-attempts`, 1 unless configured: no retry).
    #[serde(default)]
    pub retry: Option<RetryRequest>,
    /// The job's stages, when it is a DAG (see docs/dags.md): each task names its
    /// stage, a stage's tasks are queued once its parent stages ended.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 1024)]
    pub stages: Option<Vec<StageRequest>>,
    /// Jobs of this GM this job runs after (Slurm's `afterok`, `afterany`,
    /// `afternotok`): its tasks (those of its stages without parents) wait for them.
    #[serde(default)]
    #[schema(max_items = 64)]
    pub after_jobs: Option<Vec<AfterJobRequest>>,
    /// Whose job this is (1 to 64 bytes; `GET /v1/jobs?user=` filters on it). With a
    /// tokens file the caller's user name is recorded; only an admin may name another
    /// user (403 naming `user` otherwise). In open mode, a free label.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64, pattern = r"\S")]
    pub user: Option<String>,
    /// A name for the job (1 to 128 bytes, not blank; names need not be unique):
    /// `GET /v1/jobs?name=` finds the jobs of a name.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128, pattern = r"\S")]
    pub name: Option<String>,
    /// Labels: at most 32, keys of 1 to 64 bytes without `=`, values of at most
    /// 256 bytes; `GET /v1/jobs?label=KEY=VALUE` filters on one.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The job's priority class, by name (`--priority-class`); absent: the default
    /// class. An unknown class is a 400 naming `priority_class`.
    #[serde(default)]
    pub priority_class: Option<String>,
    /// Soft constraints (docs/alsched.md): the job's utility tree, e.g.
    /// `{"prefer": {"set": "c17"}}`; its tasks go where it gains most, else anywhere
    /// their hard constraints allow. A bad tree is a 400 naming its node's path.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub utility: Option<serde_json::Value>,
    /// A gang (docs/gangs.md): its tasks (or `min_members` of them) start together
    /// or not at all. A bad value is a 400 naming its field (`gang.min_members`,
    /// `gang.timeout_s`).
    #[serde(default)]
    pub gang: Option<super::gang_api::GangRequest>,
}

/// A validated job, before the GM gives it an id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub tasks: Vec<NewTask>,
    pub retry: Option<RetryPolicy>,
    pub user: Option<String>,
    /// The job's DAG, when it declares stages.
    pub dag: Option<Arc<JobDag>>,
    /// Its name and labels ([`JobNames`]).
    pub names: JobNames,
    /// The priority class it names, resolved by
    /// [`super::priority_api::resolve_priority`].
    pub priority_class: Option<String>,
    /// Its compiled utility tree (soft constraints), if it has one.
    pub utility: Option<Arc<common::utility::Utility>>,
    /// Its gang, if it is one.
    pub gang: Option<common::gang::GangSpec>,
}

/// A job's name and labels, as submitted (checked by [`check_names`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobNames {
    pub name: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// Most labels of a job, and the longest key and value.
pub const MAX_LABELS: usize = 32;
pub const MAX_LABEL_KEY: usize = 64;
pub const MAX_LABEL_VALUE: usize = 256;
/// The longest job name.
pub const MAX_NAME: usize = 128;

/// A name of 1 to [`MAX_NAME`] bytes, not blank, no control characters; at most
/// [`MAX_LABELS`] labels, keys of 1 to [`MAX_LABEL_KEY`] bytes without `=`, values
/// of at most [`MAX_LABEL_VALUE`] bytes, neither with control characters. A
/// refusal (422) names `name`, `labels` or `labels.KEY`.
pub fn check_names(
    name: Option<String>,
    labels: BTreeMap<String, String>,
) -> Result<JobNames, ApiError> {
    let control = |s: &str| s.chars().any(char::is_control);
    if let Some(n) = &name {
        if n.trim().is_empty() || n.len() > MAX_NAME || control(n) {
            return Err(ApiError::new(
                422,
                "name",
                format!("1 to {MAX_NAME} bytes, not blank, no control characters"),
            ));
        }
    }
    if labels.len() > MAX_LABELS {
        return Err(ApiError::new(
            422,
            "labels",
            format!("{} labels; at most {MAX_LABELS}", labels.len()),
        ));
    }
    for (key, value) in &labels {
        if key.is_empty() || key.len() > MAX_LABEL_KEY || key.contains('=') || control(key) {
            return Err(ApiError::new(
                422,
                format!("labels.{key}"),
                format!("a key is 1 to {MAX_LABEL_KEY} bytes, without `=` or control characters"),
            ));
        }
        if value.len() > MAX_LABEL_VALUE || control(value) {
            return Err(ApiError::new(
                422,
                format!("labels.{key}"),
                format!("a value is at most {MAX_LABEL_VALUE} bytes, without control characters"),
            ));
        }
    }
    Ok(JobNames { name, labels })
}

/// `retry` of a job: `{"max_attempts":3,"backoff":{"initial_ms":1000,"factor":2,"max_ms":60000}}`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// Runs of a task at most, the first included (1 to 100).
    #[schema(minimum = 1, maximum = 100)]
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Option<BackoffRequest>,
}

/// Every field defaults to the default backoff's (1000 ms, x2, at most 60000 ms).
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffRequest {
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86_400_000)]
    pub initial_ms: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub factor: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86_400_000)]
    pub max_ms: Option<f64>,
}

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// User queue, by name. Required when queues are configured; otherwise absent or
    /// `default`.
    #[serde(default)]
    pub queue: Option<String>,
    pub resources: ResourceRequest,
    /// What the node must have: constraint ids (0..64) or attribute names of the
    /// cluster's description (`"gpu"`, `"rack=r3"`; `GET /v1/cluster` lists them).
    #[serde(default)]
    #[schema(max_items = 64)]
    pub constraints: Vec<ConstraintRef>,
    /// How long the task runs once started. Required unless the executor is `exec`
    /// (a command ends on its own; then it is only an estimate and may be absent).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 604_800_000)]
    pub duration_ms: Option<f64>,
    #[serde(default)]
    pub kind: TaskKind,
    #[serde(default)]
    #[schema(max_items = 32)]
    pub tags: Vec<String>,
    /// How the worker runs the task (see [`crate::service::admission::executor_api`]); absent: the
    /// worker's default.
    #[serde(default)]
    pub executor: Option<ExecutorRequest>,
    /// The task's stage (a name from the job's `stages`); required in a DAG job,
    /// absent otherwise.
    #[serde(default)]
    pub stage: Option<String>,
}

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequest {
    #[schema(minimum = 1)]
    pub cpu_millis: u64,
    #[schema(minimum = 1)]
    pub memory_mb: u64,
}

/// A validated task, before the GM gives it an id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub queue: QueueId,
    pub kind: TaskKind,
    pub resources: Resources,
    pub constraints: ConstraintSet,
    pub duration: Micros,
    pub tags: Vec<String>,
    pub executor: Option<Executor>,
    /// Its job's priority class value (set by
    /// [`super::priority_api::resolve_priority`]).
    pub priority: u16,
}

/// The queues a GM knows and which of them it serves.
#[derive(Clone, Debug)]
pub struct QueueTable {
    pub me: GmId,
    /// `None`: the single implicit queue [`DEFAULT_QUEUE`] (fairness off).
    pub fairness: Option<Arc<FairnessConfig>>,
    /// The node attribute names jobs may use in `constraints` and utility trees
    /// (`--cluster-file`; else Megha's numbered `c0` .. `c63`).
    pub attributes: Arc<Attributes>,
}

impl QueueTable {
    /// GM `me`'s queues; jobs name constraints by number (`c0` .. `c63` in trees).
    pub fn new(me: GmId, fairness: Option<Arc<FairnessConfig>>) -> Self {
        QueueTable {
            me,
            fairness,
            attributes: Arc::new(Attributes::numbered()),
        }
    }

    /// The cluster's attribute names, for `constraints` and utility trees.
    pub fn with_attributes(mut self, attributes: Arc<Attributes>) -> Self {
        self.attributes = attributes;
        self
    }

    /// The queue a task names, if this GM serves it: 422 for a missing or unknown
    /// queue, 421 (Misdirected Request) naming the GM for a queue served elsewhere.
    /// `anywhere`: the task is placed by the designated GM whatever its queue
    /// (GUARANTEED and long-running work), so any known queue is accepted.
    pub fn resolve(
        &self,
        i: usize,
        name: Option<&str>,
        anywhere: bool,
    ) -> Result<QueueId, ApiError> {
        self.resolve_at(format!("tasks[{i}].queue"), name, anywhere)
    }

    /// [`QueueTable::resolve`] for the queue named at JSON path `field`.
    pub fn resolve_at(
        &self,
        field: String,
        name: Option<&str>,
        anywhere: bool,
    ) -> Result<QueueId, ApiError> {
        let Some(fairness) = &self.fairness else {
            return match name {
                None | Some(DEFAULT_QUEUE) => Ok(QueueId(0)),
                Some(other) => Err(ApiError::new(
                    422,
                    field,
                    format!("unknown queue `{other}`: no queues are configured, so the only queue is `{DEFAULT_QUEUE}`"),
                )),
            };
        };
        let names = || {
            fairness
                .queues
                .iter()
                .map(|q| q.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(name) = name else {
            return Err(ApiError::new(
                422,
                field,
                format!("required: name one of the queues {}", names()),
            ));
        };
        match fairness.by_name(name) {
            None => Err(ApiError::new(
                422,
                field,
                format!("unknown queue `{name}`; the queues are {}", names()),
            )),
            Some(q) if q.gm != self.me && !anywhere => Err(ApiError::new(
                421,
                field,
                format!(
                    "queue `{name}` is served by {}, not by this GM ({}); submit it there",
                    q.gm, self.me
                ),
            )),
            Some(q) => Ok(q.id),
        }
    }
}

/// Most tags a task may carry, and their longest length.
const MAX_TAGS: usize = 32;
const MAX_TAG_LEN: usize = 128;
/// Longest synthetic duration accepted (one week).
pub(super) const MAX_DURATION_MS: f64 = 7.0 * 24.0 * 3600.0 * 1000.0;

/// Parses and validates a submission of at most `max_tasks` tasks to queues of
/// `queues`.
pub fn parse_job(
    body: &[u8],
    max_tasks: usize,
    queues: &QueueTable,
) -> Result<Vec<NewTask>, ApiError> {
    parse_job_request(body, max_tasks, queues).map(|job| job.tasks)
}

/// [`parse_job`], with the job's retry policy if it names one.
pub fn parse_job_request(
    body: &[u8],
    max_tasks: usize,
    queues: &QueueTable,
) -> Result<NewJob, ApiError> {
    let mut request: JobRequest = parse_body(body)?;
    let retry = request.retry.as_ref().map(check_retry).transpose()?;
    if let Some(user) = &request.user {
        if user.trim().is_empty() || user.len() > 64 {
            return Err(ApiError::new(422, "user", "1 to 64 bytes, not blank"));
        }
    }
    let names = check_names(request.name.take(), std::mem::take(&mut request.labels))?;
    if request.tasks.is_empty() {
        return Err(ApiError::new(422, "tasks", "a job needs at least one task"));
    }
    if request.tasks.len() > max_tasks {
        return Err(ApiError::new(
            413,
            "tasks",
            format!(
                "{} tasks in one job; at most {max_tasks} are accepted",
                request.tasks.len()
            ),
        ));
    }
    // A job with GUARANTEED or long-running work is forwarded whole to the designated
    // GM and placed there, so each of its tasks may name any queue.
    let designated = request.tasks.iter().any(|t| t.kind.needs_designated_gm());
    let task_stages: Vec<Option<String>> =
        request.tasks.iter_mut().map(|t| t.stage.take()).collect();
    let kinds: Vec<TaskKind> = request.tasks.iter().map(|t| t.kind).collect();
    let dag = check_stages(
        request.stages.as_deref(),
        request.after_jobs.as_deref(),
        &task_stages,
        &kinds,
    )?;
    let mut tasks: Vec<NewTask> = request
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| validate_task(i, t, queues, designated))
        .collect::<Result<_, _>>()?;
    let count = tasks.len();
    for t in &mut tasks {
        super::executor_api::set_task_count(&mut t.executor, count);
    }
    let utility =
        super::utility_api::check_utility(request.utility.take(), count, &queues.attributes)?;
    let executors = tasks.iter().map(|t| t.executor.as_ref());
    super::executor_api::check_burn_needs_tree(executors, utility.is_some())?;
    super::utility_api::check_tree_kinds(&kinds, utility.is_some())?;
    let gang = super::gang_api::check_gang(request.gang.take(), &kinds, dag.is_some())?;
    Ok(NewJob {
        tasks,
        retry,
        user: request.user,
        dag,
        names,
        priority_class: request.priority_class,
        utility,
        gang,
    })
}

/// A retry policy: 1 to [`RetryPolicy::MAX_ATTEMPTS`] attempts, a backoff of
/// non-negative waits (at most a day) growing by a factor of 1 to 100.
pub fn check_retry(r: &RetryRequest) -> Result<RetryPolicy, ApiError> {
    if !(1..=RetryPolicy::MAX_ATTEMPTS).contains(&r.max_attempts) {
        return Err(ApiError::new(
            422,
            "retry.max_attempts",
            format!(
                "must be between 1 (no retry) and {}",
                RetryPolicy::MAX_ATTEMPTS
            ),
        ));
    }
    let default = Backoff::default();
    let Some(b) = &r.backoff else {
        return Ok(RetryPolicy {
            max_attempts: r.max_attempts,
            backoff: default,
        });
    };
    const DAY_MS: f64 = 24.0 * 3600.0 * 1000.0;
    let wait = |field: &str, ms: Option<f64>, default: Micros| match ms {
        None => Ok(default),
        Some(ms) if ms.is_finite() && (0.0..=DAY_MS).contains(&ms) => {
            Ok(Micros((ms * 1000.0).round() as u64))
        }
        Some(_) => Err(ApiError::new(
            422,
            format!("retry.backoff.{field}"),
            format!("must be a number of milliseconds between 0 and {DAY_MS}"),
        )),
    };
    let initial = wait("initial_ms", b.initial_ms, default.initial)?;
    let max = wait("max_ms", b.max_ms, default.max.max(initial))?;
    let factor = b.factor.unwrap_or(default.factor);
    if !(factor.is_finite() && (1.0..=100.0).contains(&factor)) {
        return Err(ApiError::new(
            422,
            "retry.backoff.factor",
            "must be a number between 1 and 100",
        ));
    }
    if max < initial {
        return Err(ApiError::new(
            422,
            "retry.backoff.max_ms",
            "must not be less than initial_ms",
        ));
    }
    Ok(RetryPolicy {
        max_attempts: r.max_attempts,
        backoff: Backoff {
            initial,
            factor,
            max,
        },
    })
}

/// Decodes a JSON body; a refusal (400) names the JSON path at fault.
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path == "?" {
            "body".to_owned()
        } else {
            path
        };
        ApiError::new(400, field, e.inner().to_string())
    })
}

fn validate_task(
    i: usize,
    t: TaskRequest,
    queues: &QueueTable,
    any_queue: bool,
) -> Result<NewTask, ApiError> {
    let field = |name: &str| format!("tasks[{i}].{name}");
    let resources = check_resources(&field("resources"), &t.resources)?;
    let constraints = check_constraints(&field("constraints"), &t.constraints, &queues.attributes)?;
    let is_exec = matches!(t.executor, Some(ExecutorRequest::Exec { .. }));
    let duration =
        match t.duration_ms {
            Some(ms) => check_duration(&field("duration_ms"), ms)?,
            None if is_exec => Micros(0),
            None => return Err(ApiError::new(
                400,
                field("duration_ms"),
                "required: a `synthetic` or `burn` task (the worker's default executor) runs for \
             exactly this long; only an `exec` task, which ends with its command, may leave it out",
            )),
        };
    // GUARANTEED and long_running work is placed by the designated GM; the HTTP layer
    // forwards it there (see `route`).
    check_tags(&field("tags"), &t.tags)?;
    let queue = queues.resolve(i, t.queue.as_deref(), any_queue)?;
    let executor = t
        .executor
        .map(|e| check_executor(&field("executor"), e))
        .transpose()?;
    Ok(NewTask {
        queue,
        kind: t.kind,
        resources,
        constraints,
        duration,
        tags: t.tags,
        executor,
        priority: 0,
    })
}

/// Positive CPU and memory; `field` is the path of the resources object.
pub(super) fn check_resources(field: &str, r: &ResourceRequest) -> Result<Resources, ApiError> {
    if r.cpu_millis == 0 {
        return Err(ApiError::new(
            422,
            format!("{field}.cpu_millis"),
            "must be positive",
        ));
    }
    if r.memory_mb == 0 {
        return Err(ApiError::new(
            422,
            format!("{field}.memory_mb"),
            "must be positive",
        ));
    }
    Ok(Resources::new(r.cpu_millis, r.memory_mb))
}

/// A duration in milliseconds between 0 and a week.
pub(super) fn check_duration(field: &str, ms: f64) -> Result<Micros, ApiError> {
    if !(ms.is_finite() && (0.0..=MAX_DURATION_MS).contains(&ms)) {
        return Err(ApiError::new(
            422,
            field,
            format!("must be a number of milliseconds between 0 and {MAX_DURATION_MS}"),
        ));
    }
    Ok(Micros((ms * 1000.0).round() as u64))
}

/// At most [`MAX_TAGS`] non-empty tags of at most [`MAX_TAG_LEN`] bytes.
pub(super) fn check_tags(field: &str, tags: &[String]) -> Result<(), ApiError> {
    if tags.len() > MAX_TAGS
        || tags
            .iter()
            .any(|g| g.trim().is_empty() || g.len() > MAX_TAG_LEN)
    {
        return Err(ApiError::new(
            422,
            field,
            format!("at most {MAX_TAGS} tags of 1 to {MAX_TAG_LEN} bytes, not blank"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
