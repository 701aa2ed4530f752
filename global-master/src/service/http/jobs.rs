//! Jobs and their tasks: `GET /v1/jobs` (paged, filtered), `GET /v1/jobs/{id}`,
//! `DELETE /v1/jobs/{id}`, `GET /v1/tasks/{job}/{index}`.

use super::answers::Refusal;
use super::state::ApiState;
use super::state::{caller_of, error, forwarded_status, not_found, query_of, unavailable};
use crate::service::actor::queries::{CancelJob, GetJob, GetTask, ListJobs};
use crate::service::admission::api::parse_id;
use crate::service::admission::api::ApiError;
use crate::service::admission::users::Caller;
use crate::service::observe::status::{
    JobFilter, JobOrder, JobPage, JobState, JobStatus, TaskStatus,
};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use common::{JobId, TaskId};
use serde_json::json;

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct JobsQuery {
    /// Only jobs in this state.
    #[param(value_type = Option<JobState>)]
    state: Option<String>,
    /// Jobs per page, 1 to 1000 (default 100).
    limit: Option<usize>,
    /// The `next` of the previous page.
    after: Option<u64>,
    /// Only jobs with a task in this queue.
    queue: Option<String>,
    /// Only this user's jobs (an admin's filter; a user sees their own jobs only).
    user: Option<String>,
    /// `newest` first (the default) or `oldest` first; `next` pages on in the
    /// same order.
    #[param(value_type = Option<JobOrder>)]
    order: Option<String>,
    /// Only jobs of this name.
    name: Option<String>,
    /// Only jobs with this label, `KEY=VALUE`.
    label: Option<String>,
}

/// The largest page of `GET /v1/jobs`.
const MAX_JOBS_PAGE: usize = 1000;

/// `GET /v1/jobs?state=finished|failed|active&limit=N&after=ID&order=newest|oldest`:
/// this GM's jobs, newest first unless `order=oldest`, a page at a time (`next` is
/// the `after` of the next page, in the same order).
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    params(JobsQuery),
    responses(
        (status = 200, description = "A page of the caller's jobs (an admin's: everyone's)", body = JobPage),
        (status = 400, description = "A bad query parameter, named in `field`", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn list_jobs(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = caller_of(caller);
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let state = match q
        .state
        .map(|v| serde_json::from_value::<JobState>(json!(v)))
    {
        None => None,
        Some(Ok(state)) => Some(state),
        Some(Err(_)) => {
            return error(ApiError::new(
                400,
                "state",
                "not a job state: use finished, failed, cancelled or active",
            ))
        }
    };
    let order = match q
        .order
        .map(|v| serde_json::from_value::<JobOrder>(json!(v)))
    {
        None => JobOrder::default(),
        Some(Ok(order)) => order,
        Some(Err(_)) => {
            return error(ApiError::new(
                400,
                "order",
                "not an order: use newest or oldest",
            ))
        }
    };
    let label = match q.label.as_deref().map(|l| l.split_once('=')) {
        None => None,
        Some(Some((k, v))) if !k.is_empty() => Some((k.to_owned(), v.to_owned())),
        Some(_) => {
            return error(ApiError::new(400, "label", "a label filter is KEY=VALUE"));
        }
    };
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_JOBS_PAGE {
        return error(ApiError::new(
            400,
            "limit",
            format!("must be between 1 and {MAX_JOBS_PAGE}"),
        ));
    }
    match s
        .gm
        .send(ListJobs {
            after: q.after,
            limit,
            filter: JobFilter {
                state,
                queue: q.queue,
                // A user lists their own jobs only (jobs are submitted as the caller).
                user: if caller.admin {
                    q.user
                } else {
                    Some(caller.user.to_string())
                },
                order,
                name: q.name,
                label,
            },
        })
        .await
    {
        Ok(page) => Json(page).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = u64, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job's state and its tasks' states", body = JobStatus),
        (status = 400, description = "Not a job id", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, or another user's job (the same answer)", body = Refusal),
    ))]
pub(crate) async fn job(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let id: u64 = match parse_id("job", &id) {
        Ok(v) => v,
        Err(e) => return error(e),
    };
    if let Some(r) = forwarded_status(&s, &headers, id, &format!("/v1/jobs/{id}")).await {
        return r;
    }
    match s.gm.send(GetJob(JobId(id))).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => not_found(format!("job {id} is unknown to this GM")),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// `DELETE /v1/jobs/{id}`: cancels the job; 202 with its status (queued tasks are
/// `cancelled` at once, the others once their LM stopped them). A second call
/// answers the same way; 404 for a job this GM does not know.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = u64, Path, description = "The job id")),
    responses(
        (status = 202, description = "Cancelling (again on a repeat): the job's status", body = JobStatus),
        (status = 400, description = "Not a job id", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, or another user's job (the same answer)", body = Refusal),
    ))]
pub(crate) async fn cancel(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let id: u64 = match parse_id("job", &id) {
        Ok(v) => v,
        Err(e) => return error(e),
    };
    if crate::service::admission::route::Route::is_forwarded_job(s.route.as_deref(), id) {
        let path = format!("/v1/jobs/{id}");
        let routed = crate::service::admission::route::Route::route(
            s.route.as_deref(),
            &headers,
            reqwest::Method::DELETE,
            &path,
            None,
        );
        if let crate::service::admission::route::Routed::Answered(r) = routed.await {
            return r;
        }
    }
    match s.gm.send(CancelJob(JobId(id))).await {
        Ok(Some(status)) => (StatusCode::ACCEPTED, Json(status)).into_response(),
        Ok(None) => not_found(format!(
            "job {id} is unknown to this GM (never submitted here, or ended and forgotten after the retention time)"
        )),
        Err(e) => unavailable(&e.to_string()),
    }
}

#[utoipa::path(get, path = "/v1/tasks/{job}/{index}", tag = "jobs",
    params(("job" = u64, Path, description = "The job id"), ("index" = u32, Path, description = "The task's index in its job")),
    responses(
        (status = 200, description = "What the GM knows of the task", body = TaskStatus),
        (status = 400, description = "Not a job id or index", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, or another user's task (the same answer)", body = Refusal),
    ))]
pub(crate) async fn task(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    Path((job, index)): Path<(String, String)>,
) -> Response {
    let (job, index): (u64, u32) = match (parse_id("job", &job), parse_id("index", &index)) {
        (Ok(j), Ok(i)) => (j, i),
        (Err(e), _) | (_, Err(e)) => return error(e),
    };
    let path = format!("/v1/tasks/{job}/{index}");
    if let Some(r) = forwarded_status(&s, &headers, job, &path).await {
        return r;
    }
    let id = TaskId {
        job: JobId(job),
        index,
    };
    match s.gm.send(GetTask(id)).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => not_found(format!("task {id} is unknown to this GM")),
        Err(e) => unavailable(&e.to_string()),
    }
}
