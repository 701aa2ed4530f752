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
//!
//! Layout: the state, the router and the helpers the handlers share (here); the
//! handlers by route: `intake` (`POST /v1/jobs`, `POST /v1/internal/messages`),
//! `jobs` (jobs and tasks), `task_logs`, `scheduler` (pending, nodes).

pub(crate) mod intake;
pub(crate) mod jobs;
pub(crate) mod scheduler;
pub(crate) mod task_logs;

use super::actor::GmActor;
use super::api::{ApiError, QueueTable};
use super::users::{Caller, GmAuth};
use actix::Addr;
use axum::extract::{DefaultBodyLimit, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::json;
use service_kit::amqp::LinkStatus;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct ApiState {
    pub gm: Addr<GmActor>,
    pub max_job_tasks: usize,
    pub queues: QueueTable,
    pub broker: Option<Arc<LinkStatus>>,
    /// Which broker user may publish which LM's state, and the refusals.
    pub senders: Option<Arc<super::mq::SnapshotSenders>>,
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
        .route("/v1/jobs", post(intake::submit).get(jobs::list_jobs))
        .route("/v1/jobs/{id}", get(jobs::job).delete(jobs::cancel))
        .route("/v1/tasks/{job}/{index}", get(jobs::task))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs::task_logs))
        .route("/v1/pending", get(scheduler::pending))
        .route("/v1/nodes", get(scheduler::nodes))
        .route("/v1/overview", get(super::overview::serve))
        .route("/v1/cluster", get(super::cluster::serve))
        .route("/v1/internal/messages", post(intake::from_lm))
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

/// A route's query parameters, or the 400 naming `query` and why they do not parse.
fn query_of<T>(
    query: Result<Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::new(400, "query", e.body_text()))
}

/// A path parameter as a number: the handlers and the ownership check
/// ([`super::users`]) read ids with this one function.
pub(super) fn parse_id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T, ApiError> {
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
