//! The state every handler of the GM's API gets ([`ApiState`]), and the helpers the
//! handlers share: the caller, error answers, query parsing, jobs of other GMs.

use crate::service::actor::GmActor;
use crate::service::admission::api::{ApiError, QueueTable};
use crate::service::admission::users::{Caller, GmAuth};
use actix::Addr;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use service_kit::amqp::LinkStatus;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct ApiState {
    pub gm: Addr<GmActor>,
    pub max_job_tasks: usize,
    pub queues: QueueTable,
    /// Priority classes: a job's `priority_class` is resolved here.
    pub priorities: Arc<common::priority::PriorityClasses>,
    pub broker: Option<Arc<LinkStatus>>,
    /// Which broker user may publish which LM's state, and the refusals.
    pub senders: Option<Arc<crate::service::actor::mq::SnapshotSenders>>,
    /// Operator-defined node groups LRA constraints may name.
    pub lra_groups: Arc<Vec<crate::lra::NodeGroupSpec>>,
    /// Forwarding to the designated GM; `None` handles everything here.
    pub route: Option<Arc<crate::service::admission::route::Route>>,
    /// Who may call (a layer over every route, see [`crate::service::admission::users`]).
    pub auth: Arc<GmAuth>,
    /// This GM's cluster: calls and messages of another are refused (421).
    pub cluster: service_kit::cluster::Cluster,
    /// `Idempotency-Key` of submissions (see [`crate::service::durable::idempotency`]).
    pub idempotency: Arc<crate::service::durable::idempotency::Idempotency>,
    /// A standby's status after it took over (`None`: started as the primary).
    pub standby: Option<Arc<crate::service::durable::standby::StandbyStatus>>,
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

/// The caller the auth layer put on the request (an admin when there is none: a
/// router served without the layer is the embedded, open one).
pub(crate) fn caller_of(c: Option<Extension<Caller>>) -> Caller {
    c.map_or_else(Caller::anonymous, |Extension(c)| c)
}

pub(crate) fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(e)).into_response()
}

pub(crate) fn unavailable(what: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": format!("global master unavailable: {what}")})),
    )
        .into_response()
}

/// A route's query parameters, or the 400 naming `query` and why they do not parse.
pub(crate) fn query_of<T>(
    query: Result<Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::new(400, "query", e.body_text()))
}

/// The answer of the GM that owns `job` (the GM number in its top bits) when that
/// is another GM, or `None` to answer here (see
/// [`crate::service::admission::route::owner`]). `stream` for followed logs.
pub(crate) async fn at_owner(
    s: &ApiState,
    headers: &axum::http::HeaderMap,
    job: u64,
    method: reqwest::Method,
    path: &str,
    stream: bool,
) -> Option<Response> {
    let request = crate::service::admission::route::ForOwner {
        job,
        method,
        path,
        body: None,
        stream,
    };
    crate::service::admission::route::to_owner(s.route.as_deref(), headers, request).await
}

/// The job a route names (`raw`, as axum decoded it) when this GM answers for it;
/// otherwise the answer: a 400 for a bad id, or the answer of the job's GM for
/// `method path(id)` (see [`at_owner`]).
pub(crate) async fn job_here(
    s: &ApiState,
    headers: &axum::http::HeaderMap,
    raw: &str,
    method: reqwest::Method,
    path: impl FnOnce(u64) -> String,
) -> Result<u64, Response> {
    let id: u64 = crate::service::admission::api::parse_id("job", raw).map_err(error)?;
    match at_owner(s, headers, id, method, &path(id), false).await {
        Some(answer) => Err(answer),
        None => Ok(id),
    }
}

pub(crate) fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": what}))).into_response()
}
