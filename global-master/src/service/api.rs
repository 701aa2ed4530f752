//! The public submission format (JSON) and its validation, kept pure so that every
//! refusal can be table-tested: each names the offending field and the reason.

use super::executor_api::{check_executor, ExecutorRequest};
use common::fairness::{FairnessConfig, DEFAULT_QUEUE};
use common::retry::{Backoff, RetryPolicy};
use common::{ConstraintSet, Executor, GmId, Micros, QueueId, Resources, TaskKind};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// `POST /v1/jobs` body: a batch of tasks submitted together (one job).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    pub tasks: Vec<TaskRequest>,
    /// How failed (or lost) tasks run again; absent: the GM's default
    /// (`--max-attempts`, 1 unless configured: no retry).
    #[serde(default)]
    pub retry: Option<RetryRequest>,
    /// Who submits (a label for `GET /v1/jobs?user=`, 1 to 64 bytes), until
    /// authentication names the caller.
    #[serde(default)]
    pub user: Option<String>,
}

/// A validated job, before the GM gives it an id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub tasks: Vec<NewTask>,
    pub retry: Option<RetryPolicy>,
    pub user: Option<String>,
}

/// `retry` of a job: `{"max_attempts":3,"backoff":{"initial_ms":1000,"factor":2,"max_ms":60000}}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// Runs of a task at most, the first included (1 to 100).
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Option<BackoffRequest>,
}

/// Every field defaults to the default backoff's (1000 ms, x2, at most 60000 ms).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffRequest {
    #[serde(default)]
    pub initial_ms: Option<f64>,
    #[serde(default)]
    pub factor: Option<f64>,
    #[serde(default)]
    pub max_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// User queue, by name. Required when queues are configured; otherwise absent or
    /// `default`.
    #[serde(default)]
    pub queue: Option<String>,
    pub resources: ResourceRequest,
    /// Machine constraint ids the node must have (0..64).
    #[serde(default)]
    pub constraints: Vec<u64>,
    /// How long the task runs once started. Required unless the executor is `exec`
    /// (a command ends on its own; then it is only an estimate and may be absent).
    #[serde(default)]
    pub duration_ms: Option<f64>,
    #[serde(default)]
    pub kind: TaskKind,
    #[serde(default)]
    pub tags: Vec<String>,
    /// How the worker runs the task (see [`super::executor_api`]); absent: the
    /// worker's default.
    #[serde(default)]
    pub executor: Option<ExecutorRequest>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequest {
    pub cpu_millis: u64,
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
}

/// A refusal: HTTP status, the field at fault (JSON path) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub field: String,
    pub error: String,
}

impl ApiError {
    pub fn new(status: u16, field: impl Into<String>, error: impl Into<String>) -> Self {
        ApiError {
            status,
            field: field.into(),
            error: error.into(),
        }
    }
}

/// The queues a GM knows and which of them it serves.
#[derive(Clone, Debug)]
pub struct QueueTable {
    pub me: GmId,
    /// `None`: the single implicit queue [`DEFAULT_QUEUE`] (fairness off).
    pub fairness: Option<Arc<FairnessConfig>>,
}

impl QueueTable {
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
    let request: JobRequest = parse_body(body)?;
    let retry = request.retry.as_ref().map(check_retry).transpose()?;
    if let Some(user) = &request.user {
        if user.trim().is_empty() || user.len() > 64 {
            return Err(ApiError::new(422, "user", "1 to 64 bytes, not blank"));
        }
    }
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
    let tasks = request
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| validate_task(i, t, queues, designated))
        .collect::<Result<_, _>>()?;
    Ok(NewJob {
        tasks,
        retry,
        user: request.user,
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
    let constraints = ConstraintSet::from_ids(t.constraints.iter().copied())
        .map_err(|e| ApiError::new(422, field("constraints"), e.to_string()))?;
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
mod tests {
    use super::*;

    fn no_queues() -> QueueTable {
        QueueTable {
            me: GmId(0),
            fairness: None,
        }
    }

    /// GM 1 of 2, serving `b`; `a` is GM 0's.
    fn two_queues() -> QueueTable {
        let f = FairnessConfig::parse("a:0.5:0,b:0.5:1", Default::default(), 2).expect("valid");
        QueueTable {
            me: GmId(1),
            fairness: Some(Arc::new(f)),
        }
    }

    fn refusal(body: &str) -> (u16, String) {
        let e = parse_job(body.as_bytes(), 3, &no_queues()).expect_err(body);
        (e.status, e.field)
    }

    #[test]
    fn queues_are_named_and_must_be_served_here() {
        let ok_res = r#""resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10"#;
        let job = |queue: &str| format!(r#"{{"tasks":[{{{ok_res}}},{{{ok_res}{queue}}}]}}"#);
        // (queues, body, the last task's queue id or the refusal's status and field)
        type Case = (QueueTable, String, Result<u16, (u16, &'static str)>);
        let cases: Vec<Case> = vec![
            (no_queues(), job(""), Ok(0)),
            (no_queues(), job(r#","queue":"default""#), Ok(0)),
            (
                no_queues(),
                job(r#","queue":"b""#),
                Err((422, "tasks[1].queue")),
            ),
            (
                no_queues(),
                job(r#","queue":3"#),
                Err((400, "tasks[1].queue")),
            ),
            (
                two_queues(),
                job(r#","queue":"b""#),
                Err((422, "tasks[0].queue")),
            ),
            (
                two_queues(),
                format!(r#"{{"tasks":[{{{ok_res},"queue":"b"}},{{{ok_res},"queue":"b"}}]}}"#),
                Ok(1),
            ),
            (
                two_queues(),
                format!(r#"{{"tasks":[{{{ok_res},"queue":"b"}},{{{ok_res},"queue":"zz"}}]}}"#),
                Err((422, "tasks[1].queue")),
            ),
            (
                two_queues(),
                format!(r#"{{"tasks":[{{{ok_res},"queue":"a"}}]}}"#),
                Err((421, "tasks[0].queue")),
            ),
            (
                two_queues(),
                format!(r#"{{"tasks":[{{{ok_res},"queue":"default"}}]}}"#),
                Err((422, "tasks[0].queue")),
            ),
        ];
        for (table, body, want) in cases {
            let got = parse_job(body.as_bytes(), 3, &table)
                .map(|tasks| tasks[tasks.len() - 1].queue.0)
                .map_err(|e| (e.status, e.field));
            let want = want.map_err(|(s, f)| (s, f.to_owned()));
            assert_eq!(got, want, "{body}");
        }
        let misdirected = parse_job(
            format!(r#"{{"tasks":[{{{ok_res},"queue":"a"}}]}}"#).as_bytes(),
            3,
            &two_queues(),
        )
        .expect_err("a is gm0's");
        assert!(
            misdirected.error.contains("served by gm0"),
            "{}",
            misdirected.error
        );
        // The same task in a job with GUARANTEED work: the job is placed whole by the
        // designated GM, so the queue of another GM is accepted (here and there).
        let mixed = format!(
            r#"{{"tasks":[{{{ok_res},"queue":"b","kind":"guaranteed"}},{{{ok_res},"queue":"a"}}]}}"#
        );
        let tasks = parse_job(mixed.as_bytes(), 3, &two_queues()).expect("mixed job");
        assert_eq!(tasks[1].queue.0, 0, "queue a");
    }

    #[test]
    fn table_of_refusals_names_the_field() {
        let ok_res = r#""resources":{"cpu_millis":1000,"memory_mb":64}"#;
        let ok = format!(r#"{ok_res},"duration_ms":10"#);
        let cases: Vec<(String, u16, &str)> = vec![
            ("not json".into(), 400, "body"),
            (r#"{"tasks":"x"}"#.into(), 400, "tasks"),
            (r#"{"tasks":[]}"#.into(), 422, "tasks"),
            (
                r#"{"tasks":[{"resources":{"cpu_millis":"a","memory_mb":1}}]}"#.into(),
                400,
                "tasks[0].resources.cpu_millis",
            ),
            (
                r#"{"tasks":[{"resources":{"cpu_millis":-5,"memory_mb":1}}]}"#.into(),
                400,
                "tasks[0].resources.cpu_millis",
            ),
            (
                r#"{"tasks":[{"resources":{"cpu_millis":0,"memory_mb":1}}]}"#.into(),
                422,
                "tasks[0].resources.cpu_millis",
            ),
            (
                r#"{"tasks":[{"resources":{"cpu_millis":1,"memory_mb":0}}]}"#.into(),
                422,
                "tasks[0].resources.memory_mb",
            ),
            (
                format!(r#"{{"tasks":[{{{ok}}},{{{ok},"constraints":[3,64]}}]}}"#),
                422,
                "tasks[1].constraints",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"duration_ms":-1}}]}}"#),
                422,
                "tasks[0].duration_ms",
            ),
            // Without `duration_ms` only an `exec` task may run: a synthetic or burn
            // task would end at once (it used to mean 0 ms, silently).
            (
                format!(r#"{{"tasks":[{{{ok}}},{{{ok_res}}}]}}"#),
                400,
                "tasks[1].duration_ms",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"executor":{{"type":"burn"}}}}]}}"#),
                400,
                "tasks[0].duration_ms",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"executor":{{"type":"synthetic"}}}}]}}"#),
                400,
                "tasks[0].duration_ms",
            ),
            (
                format!(r#"{{"tasks":[{{{ok},"kind":"bogus"}}]}}"#),
                400,
                "tasks[0].kind",
            ),
            (
                format!(r#"{{"tasks":[{{{ok},"colour":1}}]}}"#),
                400,
                "tasks[0].colour",
            ),
            (
                format!(r#"{{"tasks":[{{{ok}}},{{{ok}}},{{{ok}}},{{{ok}}}]}}"#),
                413,
                "tasks",
            ),
        ];
        for (body, status, field) in cases {
            assert_eq!(refusal(&body), (status, field.to_owned()), "{body}");
        }
    }

    #[test]
    fn an_exec_task_may_leave_out_its_duration() {
        let body = r#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":64},"executor":{"type":"exec","command":["true"]}}]}"#;
        let tasks = parse_job(body.as_bytes(), 3, &no_queues()).expect("exec without duration");
        assert_eq!(tasks[0].duration, Micros(0));
        let refused = parse_job(
            br#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":64}}]}"#,
            3,
            &no_queues(),
        )
        .expect_err("the default executor needs a duration");
        assert!(refused.error.contains("required"), "{}", refused.error);
    }

    #[test]
    fn retry_policies_are_checked_field_by_field() {
        let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10}"#;
        let job = |retry: &str| format!(r#"{{"tasks":[{task}],"retry":{retry}}}"#);
        let parse = |retry: &str| parse_job_request(job(retry).as_bytes(), 3, &no_queues());
        let policy =
            parse(r#"{"max_attempts":3,"backoff":{"initial_ms":10,"factor":3,"max_ms":50}}"#)
                .expect("valid")
                .retry
                .expect("a policy");
        assert_eq!(policy.max_attempts, 3);
        assert_eq!(
            (policy.backoff.initial, policy.backoff.max),
            (Micros(10_000), Micros(50_000))
        );
        let defaults = parse(r#"{"max_attempts":2}"#)
            .expect("valid")
            .retry
            .expect("a policy");
        assert_eq!(defaults.backoff, Backoff::default());
        let none = parse_job_request(
            format!(r#"{{"tasks":[{task}]}}"#).as_bytes(),
            3,
            &no_queues(),
        );
        assert_eq!(none.expect("valid").retry, None);
        for (retry, status, field) in [
            (r#"{"max_attempts":0}"#, 422, "retry.max_attempts"),
            (r#"{"max_attempts":101}"#, 422, "retry.max_attempts"),
            (r#"{"max_attempts":-1}"#, 400, "retry.max_attempts"),
            (r#"{}"#, 400, "retry"),
            (r#"{"max_attempts":2,"tries":1}"#, 400, "retry.tries"),
            (
                r#"{"max_attempts":2,"backoff":{"initial_ms":-5}}"#,
                422,
                "retry.backoff.initial_ms",
            ),
            (
                r#"{"max_attempts":2,"backoff":{"factor":0.5}}"#,
                422,
                "retry.backoff.factor",
            ),
            (
                r#"{"max_attempts":2,"backoff":{"initial_ms":100,"max_ms":10}}"#,
                422,
                "retry.backoff.max_ms",
            ),
        ] {
            let e = parse(retry).expect_err(retry);
            assert_eq!((e.status, e.field.as_str()), (status, field), "{retry}");
        }
    }

    #[test]
    fn accepts_a_well_formed_job() {
        let body = r#"{"tasks":[{"queue":"b","resources":{"cpu_millis":500,"memory_mb":64},"constraints":[0,20],"duration_ms":1.5,"kind":"queueable","tags":["a"]}]}"#;
        let tasks = parse_job(body.as_bytes(), 3, &two_queues()).expect("valid");
        assert_eq!(tasks[0].duration, Micros(1500));
        assert_eq!(
            tasks[0].constraints,
            ConstraintSet::from_ids([0, 20]).expect("ids")
        );
        assert_eq!(tasks[0].queue, QueueId(1));
    }
}
