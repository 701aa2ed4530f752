//! The GM's public HTTP API (axum, JSON).
//!
//! - `POST /v1/jobs`: submit a job (see [`super::api`]); 202 with the ids, 4xx naming
//!   the field at fault, 429 with `Retry-After` when the GM is full. With an
//!   `Idempotency-Key` header a retry gets the first answer ([`super::idempotency`]).
//! - `GET /v1/jobs?state=&queue=&user=&limit=&after=`: this GM's jobs, paged, filtered.
//! - `GET /v1/jobs/{id}`, `GET /v1/tasks/{job}/{index}`: what the GM knows.
//! - `GET /v1/tasks/{job}/{index}/logs?stream=stdout|stderr&tail=N&follow=true`:
//!   the task's output, through its LM from its worker (see [`super::logs`]).
//! - `DELETE /v1/jobs/{id}`: cancel a job (202 with its status, again on a repeat;
//!   404 for an unknown job).
//! - `GET /v1/pending?limit=N`: queued tasks with the reason each is pending.
//! - `GET /v1/nodes?summary=true|false`: the GM's view: per LM, its partitions and
//!   nodes with capacity, free and used resources, and the age of its last state.
//! - `POST /v1/internal/messages`: messages from an LM (bincode
//!   `Vec<common::protocol::LmToGm>` -> `()`, like the LM's internal API): preempted
//!   tasks of this GM's queues, ends of tasks it launched; 422 (nothing applied) if
//!   one is addressed to another GM.
//! - `GET /v1/overview`: what the dashboard needs beyond the rest (see
//!   [`super::overview`]); `GET /v1/cluster`: the LMs' own node lists, with down
//!   nodes and lent resources (see [`super::cluster`]).
//! - `GET /healthz`, `GET /metrics` (Prometheus text), `GET /openapi.json` (this API
//!   as OpenAPI 3, see [`super::openapi`]).
//! - `GET /`: the web dashboard (see [`super::dashboard`]): static files, open like
//!   `/healthz` (they hold no data; unknown paths still answer 401).
//!
//! Every route but `/healthz` and `/metrics` is guarded ([`super::users`]): a user's
//! bearer token (401 without or with a bad one; 403 naming `tasks[i].queue` for a
//! queue the user may not use; another user's job answers 404 like a missing one),
//! or the cluster credential for `/v1/internal/*` and forwarded requests.
//! - `POST /v1/lras`, `GET /v1/lras/{id}`: see [`super::lra_http`]. A job with
//!   GUARANTEED or long_running tasks, like an LRA, goes to the designated GM.

use super::actor::{CancelJob, GetJob, GetTask, GmActor, ListJobs, SubmitJob, SubmitRefused};
use super::answers::{JobAccepted, Refusal};
use super::api::{parse_job_request, ApiError, JobRequest, QueueTable};
use super::deliver::Deliver;
use super::nodes::NodesView;
use super::report::GetPending;
use super::report::PendingList;
use super::status::{JobFilter, JobPage, JobState, JobStatus, TaskStatus};
use super::users::{check_queue, Caller, GmAuth};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use common::codec;
use common::protocol::LmToGm;
use common::{JobId, TaskId};
use serde_json::json;
use service_kit::amqp::LinkStatus;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct ApiState {
    pub gm: Addr<GmActor>,
    pub max_job_tasks: usize,
    pub queues: QueueTable,
    pub broker: Option<Arc<LinkStatus>>,
    /// Operator-defined node groups LRA constraints may name.
    pub lra_groups: Arc<Vec<crate::lra::NodeGroupSpec>>,
    /// Forwarding to the designated GM; `None` handles everything here.
    pub route: Option<Arc<super::route::Route>>,
    /// Who may call (a layer over every route, see [`super::users`]).
    pub auth: Arc<GmAuth>,
    /// This GM's cluster: calls and messages of another are refused (421).
    pub cluster: service_kit::cluster::Cluster,
    /// `Idempotency-Key` of submissions (see [`super::idempotency`]).
    pub idempotency: Arc<super::idempotency::Idempotency>,
    /// A standby's status after it took over (`None`: started as the primary).
    pub standby: Option<Arc<super::standby::StandbyStatus>>,
    /// Memory bounds; `None` (embedded): a 64 MiB body cap only.
    pub limits: Option<Limits>,
}

/// What bounds the GM's memory under load (see [`service_kit::body_budget`] and
/// [`service_kit::amqp::Publisher::backlogged`]).
#[derive(Clone, Debug)]
pub struct Limits {
    pub bodies: service_kit::body_budget::BodyBudget,
    /// Submissions wait (503) while its backlog is over the limit.
    pub publisher: service_kit::amqp::Publisher,
}

pub fn router(state: ApiState) -> Router {
    let auth = state.auth.clone();
    let cluster = state.cluster.clone();
    let bodies = state.limits.as_ref().map(|l| l.bodies.clone());
    let routes = routes().with_state(state);
    let routes = match bodies {
        Some(b) => service_kit::body_budget::limit_bodies(routes, b),
        None => routes,
    };
    service_kit::cluster::require_same_cluster(auth.layer(routes), cluster)
}

/// Every route of the GM, before its state and its guard (see [`router`]); the
/// OpenAPI test reads the paths from here.
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/v1/jobs", post(submit).get(list_jobs))
        .route("/v1/jobs/{id}", get(job).delete(cancel))
        .route("/v1/tasks/{job}/{index}", get(task))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/v1/pending", get(pending))
        .route("/v1/nodes", get(nodes))
        .route("/v1/overview", get(super::overview::serve))
        .route("/v1/cluster", get(super::cluster::serve))
        .route("/v1/internal/messages", post(from_lm))
        .route("/healthz", get(super::probes::healthz))
        .merge(super::lra_http::routes())
        .route("/metrics", get(super::probes::metrics))
        .route(super::openapi::PATH, get(super::openapi::openapi_json))
        .merge(super::dashboard::routes())
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
}

/// The caller the auth layer put on the request (an admin when there is none: a
/// router served without the layer is the embedded, open one).
pub(super) fn caller_of(c: Option<Extension<Caller>>) -> Caller {
    c.map_or_else(Caller::anonymous, |Extension(c)| c)
}

pub(super) fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(e)).into_response()
}

pub(super) fn unavailable(what: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": format!("global master unavailable: {what}")})),
    )
        .into_response()
}

#[utoipa::path(post, path = "/v1/jobs", tag = "jobs",
    request_body = JobRequest,
    responses(
        (status = 202, description = "Accepted (durable): the ids", body = JobAccepted,
            links(
                ("job" = (operation_id = "job", parameters(("id" = "$response.body#/job")))),
                ("cancel" = (operation_id = "cancel", parameters(("id" = "$response.body#/job")))),
                ("task" = (operation_id = "task", parameters(("job" = "$response.body#/job"), ("index" = json!(0))))),
                ("logs" = (operation_id = "task_logs", parameters(("job" = "$response.body#/job"), ("index" = json!(0))))),
            )),
        (status = 400, description = "Not JSON of this shape; `field` is the JSON path", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "A queue the user may not use, or another user named", body = Refusal),
        (status = 413, description = "More tasks than --max-job-tasks", body = Refusal),
        (status = 421, description = "A queue served by another GM (named in `error`)", body = Refusal),
        (status = 422, description = "A value out of range; `field` is the JSON path", body = Refusal),
        (status = 429, description = "The GM is full (--max-queued); retry after `Retry-After` seconds",
            body = Refusal, headers(("Retry-After" = u32, description = "Seconds to wait"))),
        (status = 502, description = "GUARANTEED work: the designated GM did not answer", body = Refusal),
        (status = 503, description = "Shutting down, or the journal failed: not accepted", body = Refusal),
    ))]
pub(crate) async fn submit(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let caller = caller_of(caller);
    let job = match parse_job_request(&body, s.max_job_tasks, &s.queues) {
        Ok(j) => j,
        Err(e) => return error(e),
    };
    for (i, t) in job.tasks.iter().enumerate() {
        let field = format!("tasks[{i}].queue");
        if let Some(refused) = check_queue(&s.auth, &caller, &s.queues, t.queue, &field) {
            return refused;
        }
    }
    // The job's user is who is calling; only an admin (or open mode) may name another.
    let user = match (&job.user, caller.admin) {
        (Some(named), false) if named.as_str() != &*caller.user => {
            return super::users::forbidden_user(&s.auth, &caller, named);
        }
        (named, true) => named.clone(),
        (_, false) => Some(caller.user.to_string()),
    };
    if job.tasks.iter().any(|t| t.kind.needs_designated_gm()) {
        let route = s.route.as_deref();
        let method = reqwest::Method::POST;
        let routed =
            super::route::Route::route(route, &headers, method, "/v1/jobs", Some(body.clone()));
        if let super::route::Routed::Answered(r) = routed.await {
            return r;
        }
    }
    if let Some(l) = s.limits.as_ref().filter(|l| l.publisher.backlogged()) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "2")],
            Json(json!({
                "error": format!("the broker is behind: {} bytes of events wait for it; retry later", l.publisher.pending_bytes()),
            })),
        )
            .into_response();
    }
    let now = service_kit::clock::now();
    let reservation = match s
        .idempotency
        .before_submit(&headers, &caller.user, &body, now)
    {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let submit = SubmitJob {
        tasks: job.tasks,
        retry: job.retry,
        user,
        idempotency: reservation.as_ref().map(|r| r.key_of()),
    };
    let sent = s.gm.send(submit).await;
    if let Some(r) = reservation {
        let created = match &sent {
            Ok(Ok((job, ids))) => Some((*job, ids.len() as u32, now)),
            _ => None,
        };
        s.idempotency.settle(r, created);
    }
    match sent {
        Ok(Ok((job, ids))) => {
            s.auth.record_owner(job.0, &caller);
            super::idempotency::accepted(job, ids.len() as u32, false)
        }
        Ok(Err(SubmitRefused::QueueFull { held, limit })) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            Json(json!({
                "field": "tasks",
                "error": format!("the GM holds {held} tasks (limit {limit}); retry later"),
            })),
        )
            .into_response(),
        Ok(Err(SubmitRefused::ShuttingDown)) => unavailable("shutting down"),
        Ok(Err(SubmitRefused::JournalFailed)) => {
            unavailable("cannot write the job to this GM's journal (see its log); not accepted")
        }
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn from_lm(State(s): State<ApiState>, body: Bytes) -> Response {
    let messages: Vec<LmToGm> = match s.cluster.decode(&body, "/v1/internal/messages") {
        Ok(m) => m,
        Err(e) => return error(ApiError::new(400, "body", e.to_string())),
    };
    // All or nothing: one message for another GM refuses the whole call.
    if let Some(m) = messages.iter().find(|m| !m.is_for(s.queues.me)) {
        return error(ApiError::new(
            422,
            "gm",
            format!(
                "a {} message for {:?} sent to {}",
                m.kind(),
                m.to(),
                s.queues.me
            ),
        ));
    }
    for message in messages {
        if let Err(e) = s.gm.send(Deliver(crate::core::GmInput::Lm(message))).await {
            return unavailable(&e.to_string());
        }
    }
    match s.cluster.encode(&()) {
        Ok(b) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], b).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// A route's query parameters, or the 400 naming `query` and why they do not parse.
fn query_of<T>(
    query: Result<Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::new(400, "query", e.body_text()))
}

fn parse_id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::new(400, field, format!("`{raw}` is not a valid {field}")))
}

/// The designated GM's answer for a job it accepted on this GM's behalf (a forwarded
/// GUARANTEED job), or `None` to answer here.
async fn forwarded_status(
    s: &ApiState,
    headers: &axum::http::HeaderMap,
    job: u64,
    path: &str,
) -> Option<Response> {
    let route = s.route.as_deref();
    if !super::route::Route::is_forwarded_job(route, job) {
        return None;
    }
    match super::route::Route::route(route, headers, reqwest::Method::GET, path, None).await {
        super::route::Routed::Answered(r) => Some(r),
        super::route::Routed::Local => None,
    }
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": what}))).into_response()
}

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
}

/// The largest page of `GET /v1/jobs`.
const MAX_JOBS_PAGE: usize = 1000;

/// `GET /v1/jobs?state=finished|failed|active&limit=N&after=ID`: this GM's jobs in
/// submission order, a page at a time (`next` is the `after` of the next page).
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
    if super::route::Route::is_forwarded_job(s.route.as_deref(), id) {
        let path = format!("/v1/jobs/{id}");
        let routed = super::route::Route::route(
            s.route.as_deref(),
            &headers,
            reqwest::Method::DELETE,
            &path,
            None,
        );
        if let super::route::Routed::Answered(r) = routed.await {
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
        (status = 404, description = "Unknown here, another user's task, or no log at the worker", body = Refusal),
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
    if let Some(r) = forwarded_status(&s, &headers, job, &path).await {
        return r;
    }
    let id = TaskId {
        job: JobId(job),
        index,
    };
    match s.gm.send(super::logs::FindLog(id)).await {
        Ok(Ok(source)) => {
            let follow = q.follow.unwrap_or(false);
            super::logs::serve(s.gm.clone(), id, source, stream, q.tail, follow).await
        }
        Ok(Err((status, why))) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::NOT_FOUND);
            (status, Json(json!({"error": why}))).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PendingQuery {
    /// Tasks shown at most (default 100, at most 10,000).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/v1/pending", tag = "scheduler",
    params(PendingQuery),
    responses(
        (status = 200, description = "Queued tasks (the caller's; an admin's: all) with why each waits", body = PendingList),
        (status = 400, description = "A bad query parameter", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn pending(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<PendingQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = caller_of(caller);
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let limit = q.limit.unwrap_or(100).min(10_000);
    // A user sees their own pending tasks only (among the first 10,000 queued), and
    // their count as `total`.
    let asked = if caller.admin { limit } else { 10_000 };
    match s.gm.send(GetPending { limit: asked }).await {
        Ok(mut list) => {
            if !caller.admin {
                list.shown.retain(|p| s.auth.may_see(&caller, p.job));
                list.total = list.shown.len();
                list.shown.truncate(limit);
            }
            Json(list).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct NodesQuery {
    /// Leave out the per-node lists.
    summary: Option<bool>,
}

#[utoipa::path(get, path = "/v1/nodes", tag = "scheduler",
    params(NodesQuery),
    responses(
        (status = 200, description = "This GM's (eventually consistent) view of the nodes", body = NodesView),
        (status = 400, description = "A bad query parameter", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn nodes(
    State(s): State<ApiState>,
    query: Result<Query<NodesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let summary = q.summary.unwrap_or(false);
    match s.gm.send(super::nodes::GetNodes { summary }).await {
        Ok(view) => Json(view).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}
