//! The LM's internal HTTP API. Bodies are bincode via `common::codec`
//! (content type `common::codec::CONTENT_TYPE`).
//!
//! - `POST /v1/launch`: `LaunchBatch` -> `LaunchResponse` (from GMs).
//! - `POST /v1/report`: `Vec<WorkerReport>` -> `()` (from workers).
//! - `POST /v1/register`: `WorkerRegistration` -> `WorkerAssignment` (from workers).
//! - `GET /healthz`, `GET /metrics`.

use super::actor::{GetLoad, Launch, LmActor, Register, Reports};
use super::metrics::RenderMetrics;
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;
use common::messages::{LaunchBatch, WorkerRegistration, WorkerReport};
use serde::Serialize;
use service_kit::links::{http_client, HttpLink};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LmApi {
    pub lm: Addr<LmActor>,
    pub client: reqwest::Client,
}

pub fn router(state: LmApi) -> Router {
    Router::new()
        .route("/v1/launch", post(launch))
        .route("/v1/report", post(report))
        .route("/v1/register", post(register))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state)
}

/// A new client for the LM's calls to workers.
pub fn worker_client() -> reqwest::Client {
    http_client(Duration::from_secs(10))
}

fn bincode_ok<T: Serialize>(value: &T) -> Response {
    match codec::encode(value) {
        Ok(body) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad(status: StatusCode, msg: String) -> Response {
    (status, Json(serde_json::json!({"error": msg}))).into_response()
}

async fn launch(State(s): State<LmApi>, body: Bytes) -> Response {
    let batch: LaunchBatch = match codec::decode(&body) {
        Ok(b) => b,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    match s.lm.send(Launch(batch)).await {
        Ok(Ok(response)) => bincode_ok(&response),
        Ok(Err(e)) => bad(StatusCode::UNPROCESSABLE_ENTITY, e),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn report(State(s): State<LmApi>, body: Bytes) -> Response {
    let reports: Vec<WorkerReport> = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    match s.lm.send(Reports(reports)).await {
        Ok(()) => bincode_ok(&()),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn register(State(s): State<LmApi>, body: Bytes) -> Response {
    let reg: WorkerRegistration = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    let link = Arc::new(HttpLink {
        client: s.client.clone(),
        url: format!("{}/v1/start", reg.url.trim_end_matches('/')),
        retries: 3,
    });
    match s
        .lm
        .send(Register {
            slot: reg.slot,
            url: reg.url,
            link,
        })
        .await
    {
        Ok(Ok(assignment)) => bincode_ok(&assignment),
        Ok(Err(e)) => bad(StatusCode::UNPROCESSABLE_ENTITY, e),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn healthz(State(s): State<LmApi>) -> Response {
    match s.lm.send(GetLoad).await {
        Ok((undelivered, running, ready)) => Json(serde_json::json!({
            "status": "ok", "ready": ready, "running": running, "undelivered_starts": undelivered,
        }))
        .into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn metrics(State(s): State<LmApi>) -> Response {
    match s.lm.send(RenderMetrics).await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
