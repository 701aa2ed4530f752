//! The GM's public HTTP API (axum, JSON).
//!
//! - `POST /v1/jobs`: submit a job (see [`super::api`]); 202 with the ids, 4xx naming
//!   the field at fault, 429 with `Retry-After` when the GM is full.
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
//! - `GET /healthz`, `GET /metrics` (Prometheus text).
//! - `POST /v1/lras`, `GET /v1/lras/{id}`: see [`super::lra_http`]. A job with
//!   GUARANTEED or long_running tasks, like an LRA, goes to the designated GM.

use super::actor::{
    CancelJob, GetJob, GetLoad, GetTask, GmActor, ListJobs, SubmitJob, SubmitRefused,
};
use super::api::{parse_job_request, ApiError, QueueTable};
use super::deliver::Deliver;
use super::report::{GetPending, RenderMetrics};
use super::status::{JobFilter, JobState};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
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
}

pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/v1/jobs", post(submit).get(list_jobs))
        .route("/v1/jobs/{id}", get(job).delete(cancel))
        .route("/v1/tasks/{job}/{index}", get(task))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/v1/pending", get(pending))
        .route("/v1/nodes", get(nodes))
        .route("/v1/internal/messages", post(from_lm))
        .route("/healthz", get(healthz))
        .merge(super::lra_http::routes())
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state)
}

pub(super) fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(e)).into_response()
}

fn unavailable(what: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": format!("global master unavailable: {what}")})),
    )
        .into_response()
}

async fn submit(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let job = match parse_job_request(&body, s.max_job_tasks, &s.queues) {
        Ok(j) => j,
        Err(e) => return error(e),
    };
    if job.tasks.iter().any(|t| t.kind.needs_designated_gm()) {
        let route = s.route.as_deref();
        let method = reqwest::Method::POST;
        let routed = super::route::Route::route(route, &headers, method, "/v1/jobs", Some(body));
        if let super::route::Routed::Answered(r) = routed.await {
            return r;
        }
    }
    let submit = SubmitJob {
        tasks: job.tasks,
        retry: job.retry,
        user: job.user,
    };
    match s.gm.send(submit).await {
        Ok(Ok((job, ids))) => (
            StatusCode::ACCEPTED,
            Json(json!({
                "job": job.0,
                "tasks": ids.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            })),
        )
            .into_response(),
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
    let messages: Vec<LmToGm> = match codec::decode(&body) {
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
    match codec::encode(&()) {
        Ok(b) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], b).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
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

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsQuery {
    state: Option<String>,
    limit: Option<usize>,
    after: Option<u64>,
    queue: Option<String>,
    user: Option<String>,
}

/// The largest page of `GET /v1/jobs`.
const MAX_JOBS_PAGE: usize = 1000;

/// `GET /v1/jobs?state=finished|failed|active&limit=N&after=ID`: this GM's jobs in
/// submission order, a page at a time (`next` is the `after` of the next page).
async fn list_jobs(
    State(s): State<ApiState>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(ApiError::new(400, "query", e.body_text())),
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
                user: q.user,
            },
        })
        .await
    {
        Ok(page) => Json(page).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn job(
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
async fn cancel(
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

async fn task(
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

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    stream: Option<String>,
    tail: Option<usize>,
    follow: Option<bool>,
}

async fn task_logs(
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
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(ApiError::new(400, "query", e.body_text())),
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

#[derive(serde::Deserialize)]
struct PendingQuery {
    limit: Option<usize>,
}

async fn pending(State(s): State<ApiState>, Query(q): Query<PendingQuery>) -> Response {
    let limit = q.limit.unwrap_or(100).min(10_000);
    match s.gm.send(GetPending { limit }).await {
        Ok(list) => Json(list).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NodesQuery {
    summary: Option<bool>,
}

async fn nodes(
    State(s): State<ApiState>,
    query: Result<Query<NodesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(ApiError::new(400, "query", e.body_text())),
    };
    let summary = q.summary.unwrap_or(false);
    match s.gm.send(super::nodes::GetNodes { summary }).await {
        Ok(view) => Json(view).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn healthz(State(s): State<ApiState>) -> Response {
    match s.gm.send(GetLoad).await {
        Ok(load) => Json(json!({
            // Degraded: some LM's state not taken for a while (see `silent_lms`).
            "status": if load.silent_lms.is_empty() { "ok" } else { "degraded" },
            "silent_lms": load.silent_lms,
            "ready": load.full_view,
            "queued": load.queued,
            "outstanding": load.outstanding,
            "nodes": load.nodes,
            "capacity": load.capacity,
            "broker_connected": s.broker.as_ref().map(|b| b.is_connected()),
        }))
        .into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn metrics(State(s): State<ApiState>) -> Response {
    match s.gm.send(RenderMetrics).await {
        Ok(mut text) => {
            if let Some(b) = &s.broker {
                service_kit::metrics::single(
                    &mut text,
                    "megha_broker_connected",
                    "gauge",
                    "1 while the state subscription is connected.",
                    f64::from(u8::from(b.is_connected())),
                );
                service_kit::metrics::single(
                    &mut text,
                    "megha_broker_reconnects_total",
                    "counter",
                    "Broker reconnections of the state subscription.",
                    b.reconnects.load(std::sync::atomic::Ordering::Relaxed) as f64,
                );
            }
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}
