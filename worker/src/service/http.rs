//! The worker's HTTP API: `POST /v1/messages` (bincode `Vec<LmToWorker>` -> `()`,
//! from its LM: start, kill and promote orders, in the order the LM decided them),
//! `GET /v1/tasks/{job}/{index}/logs?stream=
//! stdout|stderr&tail=N|from=BYTES` (an exec task's log, text; `from`: from that
//! byte on, with the log's size in `x-megha-log-size`; 404 for a task with none here),
//! `GET /healthz`, `GET /metrics`. Every route but the last two needs the cluster
//! credential (`service_kit::auth`): with per-role credentials, an LM's ([`callers`]).

use super::actor::{FromLm, GetLoad, LogsRoot, WorkerActor};
use super::metrics::RenderMetrics;
use crate::exec::logs::{self, LogError, Stream};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;
use common::protocol::LmToWorker;
use service_kit::auth::ClusterGuard;
use service_kit::cluster::Cluster;

/// The routes; every one but `/healthz` and `/metrics` needs the cluster credential
/// of `guard` (401 otherwise, nothing applied); a call of another cluster than
/// `cluster` is refused (421).
pub fn router(worker: Addr<WorkerActor>, guard: ClusterGuard, cluster: Cluster) -> Router {
    let routes = Router::new()
        .route("/v1/messages", post(from_lm))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(axum::Extension(guard.clone()))
        .layer(axum::Extension(cluster.clone()))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(worker);
    let guarded = service_kit::auth::require_cluster(routes, guard);
    service_kit::cluster::require_same_cluster(guarded, cluster)
}

/// Who may call the worker (with per-role credentials): its LM only.
pub fn callers(_path: &str) -> &'static [service_kit::roles::Role] {
    &[service_kit::roles::Role::Lm]
}

fn bad(status: StatusCode, msg: String) -> Response {
    (status, Json(serde_json::json!({"error": msg}))).into_response()
}

/// Decodes a bincode list of orders and hands it to the actor.
async fn from_lm(
    State(w): State<Addr<WorkerActor>>,
    axum::Extension(cluster): axum::Extension<Cluster>,
    body: Bytes,
) -> Response {
    let orders: Vec<LmToWorker> = match cluster.decode(&body, "/v1/messages") {
        Ok(o) => o,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    done(&cluster, w.send(FromLm(orders)).await)
}

/// The empty bincode answer once the actor took the orders.
fn done(cluster: &Cluster, sent: Result<(), actix::MailboxError>) -> Response {
    match sent {
        Ok(()) => match cluster.encode(&()) {
            Ok(b) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], b).into_response(),
            Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    /// stdout (default) or stderr.
    stream: Option<String>,
    /// The last N lines only.
    tail: Option<usize>,
    /// The log from this byte offset on (following a log); the answer's
    /// `x-megha-log-size` header is the log's size.
    from: Option<u64>,
}

async fn task_logs(
    State(w): State<Addr<WorkerActor>>,
    Path((job, index)): Path<(u64, u32)>,
    Query(q): Query<LogQuery>,
) -> Response {
    let task = common::TaskId::new(job, index);
    let stream: Stream = match q.stream.as_deref().unwrap_or("stdout").parse() {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("stream: {e}")),
    };
    let root = match w.send(LogsRoot).await {
        Ok(Some(root)) => root,
        Ok(None) => {
            return bad(
                StatusCode::NOT_FOUND,
                format!("no logs for task {task}: this worker runs no exec tasks"),
            )
        }
        Err(e) => return bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    if let Some(from) = q.from {
        let read =
            tokio::task::spawn_blocking(move || logs::read_from(&root, task, stream, from)).await;
        return match read {
            Ok(Ok((bytes, size))) => (
                [
                    (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
                    (
                        header::HeaderName::from_static("x-megha-log-size"),
                        size.to_string(),
                    ),
                ],
                bytes,
            )
                .into_response(),
            Ok(Err(e @ LogError::Unknown { .. })) => bad(StatusCode::NOT_FOUND, e.to_string()),
            Ok(Err(e)) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
    }
    let read = tokio::task::spawn_blocking(move || logs::tail(&root, task, stream, q.tail)).await;
    match read {
        Ok(Ok(text)) => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
        }
        Ok(Err(e @ LogError::Unknown { .. })) => bad(StatusCode::NOT_FOUND, e.to_string()),
        Ok(Err(e)) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
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

async fn metrics(
    State(w): State<Addr<WorkerActor>>,
    axum::Extension(guard): axum::Extension<ClusterGuard>,
    axum::Extension(cluster): axum::Extension<Cluster>,
) -> Response {
    match w.send(RenderMetrics).await {
        Ok(mut page) => {
            guard.render(&mut page);
            cluster.render(&mut page);
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
