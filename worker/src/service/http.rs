//! The worker's HTTP API: `POST /v1/start` (bincode `Vec<StartTask>` -> `()`, from
//! its LM), `POST /v1/kill` (bincode `Vec<KillTask>` -> `()`, from its LM: preempted
//! tasks), `POST /v1/promote` (bincode `Vec<PromoteTask>` -> `()`, from its LM:
//! QUEUEABLE tasks made GUARANTEED), `GET /healthz`, `GET /metrics`.

use super::actor::{GetLoad, Kill, Promote, RenderMetrics, Start, WorkerActor};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;

pub fn router(worker: Addr<WorkerActor>) -> Router {
    Router::new()
        .route("/v1/start", post(start))
        .route("/v1/kill", post(kill))
        .route("/v1/promote", post(promote))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(worker)
}

fn bad(status: StatusCode, msg: String) -> Response {
    (status, Json(serde_json::json!({"error": msg}))).into_response()
}

async fn start(State(w): State<Addr<WorkerActor>>, body: Bytes) -> Response {
    deliver(&w, &body, Start).await
}

async fn kill(State(w): State<Addr<WorkerActor>>, body: Bytes) -> Response {
    deliver(&w, &body, Kill).await
}

async fn promote(State(w): State<Addr<WorkerActor>>, body: Bytes) -> Response {
    deliver(&w, &body, Promote).await
}

/// Decodes a bincode list of orders and hands it to the actor as `wrap(orders)`.
async fn deliver<T, M>(w: &Addr<WorkerActor>, body: &[u8], wrap: fn(Vec<T>) -> M) -> Response
where
    T: serde::de::DeserializeOwned,
    M: actix::Message<Result = ()> + Send + 'static,
    WorkerActor: actix::Handler<M>,
{
    let orders: Vec<T> = match codec::decode(body) {
        Ok(o) => o,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    done(w.send(wrap(orders)).await)
}

/// The empty bincode answer once the actor took the orders.
fn done(sent: Result<(), actix::MailboxError>) -> Response {
    match sent {
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
