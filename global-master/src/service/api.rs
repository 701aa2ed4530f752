//! The public submission format (JSON) and its validation, kept pure so that every
//! refusal can be table-tested: each names the offending field and the reason.

use common::{ConstraintSet, Micros, QueueId, Resources, TaskKind};
use serde::{Deserialize, Serialize};

/// `POST /v1/jobs` body: a batch of tasks submitted together (one job).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    pub tasks: Vec<TaskRequest>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// User queue (fairness); 0 when absent.
    #[serde(default)]
    pub queue: u16,
    pub resources: ResourceRequest,
    /// Machine constraint ids the node must have (0..64).
    #[serde(default)]
    pub constraints: Vec<u64>,
    /// How long the synthetic task holds its resources once started.
    #[serde(default)]
    pub duration_ms: f64,
    #[serde(default)]
    pub kind: TaskKind,
    #[serde(default)]
    pub tags: Vec<String>,
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

/// Most tags a task may carry, and their longest length.
const MAX_TAGS: usize = 32;
const MAX_TAG_LEN: usize = 128;
/// Longest synthetic duration accepted (one week).
const MAX_DURATION_MS: f64 = 7.0 * 24.0 * 3600.0 * 1000.0;

/// Parses and validates a submission of at most `max_tasks` tasks.
pub fn parse_job(body: &[u8], max_tasks: usize) -> Result<Vec<NewTask>, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let request: JobRequest = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path == "?" {
            "body".to_owned()
        } else {
            path
        };
        ApiError::new(400, field, e.inner().to_string())
    })?;
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
    request
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| validate_task(i, t))
        .collect()
}

fn validate_task(i: usize, t: TaskRequest) -> Result<NewTask, ApiError> {
    let field = |name: &str| format!("tasks[{i}].{name}");
    if t.resources.cpu_millis == 0 {
        return Err(ApiError::new(
            422,
            field("resources.cpu_millis"),
            "must be positive",
        ));
    }
    if t.resources.memory_mb == 0 {
        return Err(ApiError::new(
            422,
            field("resources.memory_mb"),
            "must be positive",
        ));
    }
    let constraints = ConstraintSet::from_ids(t.constraints.iter().copied())
        .map_err(|e| ApiError::new(422, field("constraints"), e.to_string()))?;
    if !(t.duration_ms.is_finite() && t.duration_ms >= 0.0 && t.duration_ms <= MAX_DURATION_MS) {
        return Err(ApiError::new(
            422,
            field("duration_ms"),
            format!("must be a number of milliseconds between 0 and {MAX_DURATION_MS}"),
        ));
    }
    if t.kind.needs_designated_gm() {
        return Err(ApiError::new(
            422,
            field("kind"),
            "guaranteed and long_running work needs the designated GM's placer, which the services do not run yet; use short or queueable",
        ));
    }
    if t.tags.len() > MAX_TAGS || t.tags.iter().any(|g| g.is_empty() || g.len() > MAX_TAG_LEN) {
        return Err(ApiError::new(
            422,
            field("tags"),
            format!("at most {MAX_TAGS} tags of 1 to {MAX_TAG_LEN} bytes"),
        ));
    }
    Ok(NewTask {
        queue: QueueId(t.queue),
        kind: t.kind,
        resources: Resources::new(t.resources.cpu_millis, t.resources.memory_mb),
        constraints,
        duration: Micros((t.duration_ms * 1000.0).round() as u64),
        tags: t.tags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &str) -> (u16, String) {
        let e = parse_job(body.as_bytes(), 3).expect_err(body);
        (e.status, e.field)
    }

    #[test]
    fn table_of_refusals_names_the_field() {
        let ok_res = r#""resources":{"cpu_millis":1000,"memory_mb":64}"#;
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
                format!(r#"{{"tasks":[{{{ok_res}}},{{{ok_res},"constraints":[3,64]}}]}}"#),
                422,
                "tasks[1].constraints",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"duration_ms":-1}}]}}"#),
                422,
                "tasks[0].duration_ms",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"kind":"bogus"}}]}}"#),
                400,
                "tasks[0].kind",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res},"colour":1}}]}}"#),
                400,
                "tasks[0].colour",
            ),
            (
                format!(r#"{{"tasks":[{{{ok_res}}},{{{ok_res}}},{{{ok_res}}},{{{ok_res}}}]}}"#),
                413,
                "tasks",
            ),
        ];
        for (body, status, field) in cases {
            assert_eq!(refusal(&body), (status, field.to_owned()), "{body}");
        }
    }

    #[test]
    fn accepts_a_well_formed_job() {
        let body = r#"{"tasks":[{"queue":2,"resources":{"cpu_millis":500,"memory_mb":64},"constraints":[0,20],"duration_ms":1.5,"kind":"queueable","tags":["a"]}]}"#;
        let tasks = parse_job(body.as_bytes(), 3).expect("valid");
        assert_eq!(tasks[0].duration, Micros(1500));
        assert_eq!(
            tasks[0].constraints,
            ConstraintSet::from_ids([0, 20]).expect("ids")
        );
        assert_eq!(tasks[0].queue, QueueId(2));
    }
}
