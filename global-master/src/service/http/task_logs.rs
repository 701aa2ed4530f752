//! `GET /v1/tasks/{job}/{index}/logs`: a task's output, through its LM from its
//! worker (see [`super::logs`]).

use super::answers::Refusal;
use super::state::{at_owner, error, query_of, unavailable, ApiState};
use crate::service::admission::api::parse_id;
use crate::service::admission::api::ApiError;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::{JobId, TaskId};
use serde_json::json;

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogsQuery {
    /// `stdout` (default) or `stderr`.
    #[param(value_type = Option<LogStream>)]
    stream: Option<String>,
    /// Only the last this many lines.
    tail: Option<usize>,
    /// Keep the answer open and send output as it comes, until the task ends.
    follow: Option<bool>,
    /// An attempt's log (1 for the first run; the current attempt by default):
    /// a retried task's earlier attempts keep theirs at the worker they ran on.
    attempt: Option<u32>,
}

/// Which output of a task (for the OpenAPI document; the handler checks the text).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "snake_case")]
pub(crate) enum LogStream {
    Stdout,
    Stderr,
}

#[utoipa::path(get, path = "/v1/tasks/{job}/{index}/logs", tag = "jobs",
    params(("job" = u64, Path, description = "The job id"), ("index" = u32, Path, description = "The task's index in its job"), LogsQuery),
    responses(
        (status = 200, description = "The task's output, from its worker (streamed with follow=true)", body = String, content_type = "text/plain"),
        (status = 400, description = "A bad parameter, named in `field`", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, another user's task, no such attempt, or no log at the worker", body = Refusal),
        (status = 409, description = "The task has not started: no log yet", body = Refusal),
        (status = 501, description = "An embedded GM does not know its LMs' URLs", body = Refusal),
        (status = 502, description = "The task's LM did not answer", body = Refusal),
    ))]
pub(crate) async fn task_logs(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    Path((job, index)): Path<(String, String)>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
    uri: axum::http::Uri,
) -> Response {
    let (job, index): (u64, u32) = match (parse_id("job", &job), parse_id("index", &index)) {
        (Ok(j), Ok(i)) => (j, i),
        (Err(e), _) | (_, Err(e)) => return error(e),
    };
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let stream = q.stream.unwrap_or_else(|| "stdout".to_owned());
    if stream != "stdout" && stream != "stderr" {
        return error(ApiError::new(400, "stream", "use stdout or stderr"));
    }
    let path = match uri.query() {
        Some(query) => format!("/v1/tasks/{job}/{index}/logs?{query}"),
        None => format!("/v1/tasks/{job}/{index}/logs"),
    };
    let follow = q.follow.unwrap_or(false);
    if let Some(r) = at_owner(&s, &headers, job, reqwest::Method::GET, &path, follow).await {
        return r;
    }
    let id = TaskId {
        job: JobId(job),
        index,
    };
    let find = super::logs::FindLog {
        task: id,
        attempt: q.attempt,
    };
    match s.gm.send(find).await {
        Ok(Ok(source)) => {
            super::logs::serve(s.gm.clone(), id, source, stream, q.tail, follow).await
        }
        Ok(Err((status, why))) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::NOT_FOUND);
            (status, Json(json!({"error": why}))).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}
