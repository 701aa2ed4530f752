//! The GM's public HTTP API (axum, JSON).
//!
//! - `POST /v1/jobs`: submit a job (see [`super::api`]); 202 with the ids, 4xx naming
//!   the field at fault, 429 with `Retry-After` when the GM is full.
//! - `GET /v1/jobs/{id}`, `GET /v1/tasks/{job}/{index}`: what the GM knows.
//! - `GET /v1/pending?limit=N`: queued tasks with the reason each is pending.
//! - `GET /healthz`, `GET /metrics` (Prometheus text).

use super::actor::{GetJob, GetLoad, GetTask, GmActor, Submit, SubmitRefused};
use super::api::{parse_job, ApiError};
use super::report::{GetPending, RenderMetrics};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::{JobId, TaskId};
use serde_json::json;
use service_kit::amqp::LinkStatus;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct ApiState {
    pub gm: Addr<GmActor>,
    pub max_job_tasks: usize,
    pub broker: Option<Arc<LinkStatus>>,
}

pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/v1/jobs", post(submit))
        .route("/v1/jobs/{id}", get(job))
        .route("/v1/tasks/{job}/{index}", get(task))
        .route("/v1/pending", get(pending))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state)
}

fn error(e: ApiError) -> Response {
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

async fn submit(State(s): State<ApiState>, body: Bytes) -> Response {
    let tasks = match parse_job(&body, s.max_job_tasks) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    match s.gm.send(Submit(tasks)).await {
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
        Err(e) => unavailable(&e.to_string()),
    }
}

fn parse_id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::new(400, field, format!("`{raw}` is not a valid {field}")))
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": what}))).into_response()
}

async fn job(State(s): State<ApiState>, Path(id): Path<String>) -> Response {
    let id: u64 = match parse_id("job", &id) {
        Ok(v) => v,
        Err(e) => return error(e),
    };
    match s.gm.send(GetJob(JobId(id))).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => not_found(format!("job {id} is unknown to this GM")),
        Err(e) => unavailable(&e.to_string()),
    }
}

async fn task(State(s): State<ApiState>, Path((job, index)): Path<(String, String)>) -> Response {
    let (job, index): (u64, u32) = match (parse_id("job", &job), parse_id("index", &index)) {
        (Ok(j), Ok(i)) => (j, i),
        (Err(e), _) | (_, Err(e)) => return error(e),
    };
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

async fn healthz(State(s): State<ApiState>) -> Response {
    match s.gm.send(GetLoad).await {
        Ok(load) => Json(json!({
            "status": "ok",
            "ready": load.full_view,
            "queued": load.queued,
            "outstanding": load.outstanding,
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
