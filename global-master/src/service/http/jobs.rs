//! Jobs and their tasks: `GET /v1/jobs` (paged, filtered), `GET /v1/jobs/{id}`,
//! `DELETE /v1/jobs/{id}`, `GET /v1/tasks/{job}/{index}`.

use super::answers::Refusal;
use super::cluster_jobs::ClusterJobPage;
use super::state::ApiState;
use super::state::{at_owner, caller_of, error, job_here, not_found, query_of, unavailable};
use crate::service::actor::queries::{CancelJob, GetJob, GetTask, ListJobs};
use crate::service::admission::api::parse_id;
use crate::service::admission::api::ApiError;
use crate::service::admission::route::FORWARDED_BY;
use crate::service::admission::users::Caller;
use crate::service::observe::status::{JobFilter, JobOrder, JobState, JobStatus, TaskStatus};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use common::{JobId, TaskId};
use serde_json::{json, Value};

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
    /// Every GM's jobs (the default, when this GM knows the cluster's GMs: asked of
    /// each, merged, paged in one order), or `false` for this GM's only.
    all_gms: Option<bool>,
}

/// The largest page of `GET /v1/jobs`.
const MAX_JOBS_PAGE: usize = 1000;

/// `GET /v1/jobs?state=finished|failed|active&limit=N&after=ID&order=newest|oldest&all_gms=`:
/// the cluster's jobs (or this GM's, `all_gms=false`), newest first unless
/// `order=oldest`, a page at a time (`next` is the `after` of the next page, in the
/// same order); see [`super::cluster_jobs`].
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    params(JobsQuery),
    responses(
        (status = 200, description = "A page of the caller's jobs (an admin's: everyone's), of every GM of the cluster unless all_gms=false; `unreachable` names the GMs that did not answer", body = ClusterJobPage),
        (status = 400, description = "A bad query parameter, named in `field`", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn list_jobs(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
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
    // A user lists their own jobs only (jobs are submitted as the caller).
    let user = if caller.admin {
        q.user
    } else {
        Some(caller.user.to_string())
    };
    let list = ListJobs {
        after: q.after,
        limit,
        filter: JobFilter {
            state,
            queue: q.queue,
            user,
            order,
            name: q.name,
            label,
        },
    };
    // A GM asked by another lists its own jobs only (no fan-out loops).
    let fan_out = q.all_gms.unwrap_or(true) && !headers.contains_key(FORWARDED_BY);
    if let Some(route) = s.route.as_deref().filter(|r| fan_out && r.gms().len() > 1) {
        let query = peer_query(&list, limit);
        let page = super::cluster_jobs::list(&s, route, &headers, list, &query).await;
        return Json(page).into_response();
    }
    match s.gm.send(list).await {
        Ok(page) => Json(page).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// `list`'s filters as a query string for another GM (without `after`, which
/// differs per GM). The user filter goes along too: the other GM applies the
/// caller's own for a non-admin anyway.
fn peer_query(list: &ListJobs, limit: usize) -> String {
    let f = &list.filter;
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("limit", &limit.to_string());
    q.append_pair(
        "order",
        match f.order {
            JobOrder::Newest => "newest",
            JobOrder::Oldest => "oldest",
        },
    );
    if let Some(state) = f.state {
        if let Ok(Value::String(state)) = serde_json::to_value(state) {
            q.append_pair("state", &state);
        }
    }
    for (k, v) in [("queue", &f.queue), ("user", &f.user), ("name", &f.name)] {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    if let Some((k, v)) = &f.label {
        q.append_pair("label", &format!("{k}={v}"));
    }
    q.finish()
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
    let route = |id| format!("/v1/jobs/{id}");
    let id = match job_here(&s, &headers, &id, reqwest::Method::GET, route).await {
        Ok(id) => id,
        Err(answer) => return answer,
    };
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
    let route = |id| format!("/v1/jobs/{id}");
    let id = match job_here(&s, &headers, &id, reqwest::Method::DELETE, route).await {
        Ok(id) => id,
        Err(answer) => return answer,
    };
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
    if let Some(r) = at_owner(&s, &headers, job, reqwest::Method::GET, &path, false).await {
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

#[utoipa::path(get, path = "/v1/jobs/{id}/spec", tag = "jobs",
    params(("id" = u64, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job's spec: the body of its POST /v1/jobs as submitted (submit it again to run the job again)", body = Object),
        (status = 400, description = "Not a job id", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, another user's job (the same answer), or its spec not kept (`error` says why)", body = Refusal),
    ))]
/// `GET /v1/jobs/{id}/spec`: the job's spec as submitted (see
/// [`crate::service::durable::specs`]), from the job's GM.
pub(crate) async fn spec(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> Response {
    use crate::service::actor::queries::{GetSpec, SpecMissing};
    let route = |id| format!("/v1/jobs/{id}/spec");
    let id = match job_here(&s, &headers, &id, reqwest::Method::GET, route).await {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match s.gm.send(GetSpec(JobId(id))).await {
        Ok(Ok(body)) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Ok(Err(SpecMissing::Unknown)) => not_found(format!("job {id} is unknown to this GM")),
        Ok(Err(SpecMissing::TooLarge { packed })) => not_found(format!(
            "the spec of job {id} was not kept: {packed} bytes compressed, over the {} kept",
            crate::service::durable::specs::MAX_PACKED
        )),
        Ok(Err(SpecMissing::Unreadable(e))) => unavailable(&format!("the spec of job {id}: {e}")),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// `GET /v1/internal/jobs/{id}` (another GM, with the cluster credential): whether
/// this GM's job ended, `{"job":ID,"state":"active|finished|failed"}` (`failed`:
/// failed or cancelled; from the journal's outcomes once the tracker forgot it),
/// 404 when it knows nothing of it. For jobs of other GMs that jobs there run after
/// (see [`crate::service::actor::remote_after`]): states only, no user's data.
pub(crate) async fn job_outcome(State(s): State<ApiState>, Path(id): Path<String>) -> Response {
    let id: u64 = match parse_id("job", &id) {
        Ok(v) => v,
        Err(e) => return error(e),
    };
    let asked = crate::service::actor::remote_after::JobOutcome(JobId(id));
    let state = match s.gm.send(asked).await {
        Ok(Some(None)) => "active",
        Ok(Some(Some(true))) => "finished",
        Ok(Some(Some(false))) => "failed",
        Ok(None) => return not_found(format!("job {id} is unknown to this GM")),
        Err(e) => return unavailable(&e.to_string()),
    };
    Json(json!({"job": id, "state": state})).into_response()
}
