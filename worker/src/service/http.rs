//! The worker's HTTP API: `POST /v1/start` (bincode `Vec<StartTask>` -> `()`, from
//! its LM), `GET /healthz`, `GET /metrics`.

use super::actor::{GetLoad, RenderMetrics, Start, WorkerActor};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;
use common::messages::StartTask;

pub fn router(worker: Addr<WorkerActor>) -> Router {
    Router::new()
        .route("/v1/start", post(start))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(worker)
}

fn bad(status: StatusCode, msg: String) -> Response {
    (status, Json(serde_json::json!({"error": msg}))).into_response()
}

async fn start(State(w): State<Addr<WorkerActor>>, body: Bytes) -> Response {
    let orders: Vec<StartTask> = match codec::decode(&body) {
        Ok(o) => o,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    match w.send(Start(orders)).await {
        Ok(()) => match codec::encode(&()) {
            Ok(b) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], b).into_response(),
            Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn healthz(State(w): State<Addr<WorkerActor>>) -> Response {
    match w.send(GetLoad).await {
        Ok((running, undelivered)) => Json(serde_json::json!({
            "status": "ok", "running": running, "undelivered_reports": undelivered,
        }))
        .into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn metrics(State(w): State<Addr<WorkerActor>>) -> Response {
    match w.send(RenderMetrics).await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
