//! The worker's HTTP API: `POST /v1/messages` (bincode `Vec<LmToWorker>` -> `()`,
//! from its LM: start, kill and promote orders, in the order the LM decided them),
//! `GET /v1/tasks/{job}/{index}/logs?stream=
//! stdout|stderr&tail=N|from=BYTES` (an exec task's log, text; `from`: from that
//! byte on, with the log's size in `x-megha-log-size`; 404 for a task with none here),
//! `GET /healthz`, `GET /metrics`. Every route but the last two needs the cluster
//! credential (`service_kit::auth`): with per-role credentials, an LM's ([`callers`]).
//!
//! A start order for a run (task, attempt) this worker was already ordered to start
//! in this life is counted (`megha_worker_replayed_starts_total`) and logged
//! ([`StartedRuns`]), and run: a preempted task is requeued with the same attempt,
//! so (task, attempt) does not name one run and refusing a repeat stalled preempted
//! tasks. Refusing replays needs a run identity of its own in start orders (issue 32).

use super::actor::{FromLm, GetContainment, GetLoad, LogsRoot, WorkerActor};
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
use common::TaskId;
use service_kit::auth::ClusterGuard;
use service_kit::cluster::Cluster;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The routes; every one but `/healthz` and `/metrics` needs the cluster credential
/// of `guard` (401 otherwise, nothing applied); a call of another cluster than
/// `cluster` is refused (421).
pub fn router(worker: Addr<WorkerActor>, guard: ClusterGuard, cluster: Cluster) -> Router {
    router_with_order_key(worker, guard, cluster, None)
}

/// The SHA-256 of the key the LM must present on orders (`None`: none asked).
#[derive(Clone, Copy, Debug)]
struct OrderKey(Option<[u8; 32]>);

/// [`router`] taking orders (`POST /v1/messages`) only when they carry the key
/// whose SHA-256 is `order_key` (in `x-megha-worker-session`): the key this worker
/// gave its LM at registration. An order without it, or with another worker's, is
/// refused 403 naming the header, counted and logged (issue 32: the LM's role token
/// read at one worker orders no other worker).
pub fn router_with_order_key(
    worker: Addr<WorkerActor>,
    guard: ClusterGuard,
    cluster: Cluster,
    order_key: Option<[u8; 32]>,
) -> Router {
    let runs = Arc::new(StartedRuns::default());
    let routes = Router::new()
        .route("/v1/messages", post(from_lm))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(axum::Extension(guard.clone()))
        .layer(axum::Extension(cluster.clone()))
        .layer(axum::Extension(runs))
        .layer(axum::Extension(OrderKey(order_key)))
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

/// A run: a task and its attempt.
type Run = (TaskId, u32);
/// The runs remembered, and their order (oldest first).
type RunSet = (HashSet<Run>, VecDeque<Run>);

/// How many started runs a worker remembers (the newest; about 2 MB).
pub const RUNS_KEPT: usize = 100_000;

/// The runs (task, attempt) this worker was ordered to start in this life, the
/// newest [`RUNS_KEPT`]: repeats are counted and logged (see the module's doc).
#[derive(Debug, Default)]
pub struct StartedRuns {
    runs: Mutex<RunSet>,
    /// Start orders for a run already ordered here.
    pub replayed: AtomicU64,
}

impl StartedRuns {
    /// True the first time `run` is seen (it is remembered), false afterwards.
    pub fn first(&self, run: (TaskId, u32)) -> bool {
        let mut guard = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let (set, order) = &mut *guard;
        if !set.insert(run) {
            return false;
        }
        order.push_back(run);
        if order.len() > RUNS_KEPT {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
        true
    }

    /// Counts and logs the starts in `orders` of runs already ordered here.
    pub fn note_repeats(&self, orders: &[LmToWorker]) {
        for order in orders {
            let LmToWorker::Start(s) = order else {
                continue;
            };
            let run = (s.task.id, s.task.attempt);
            if !self.first(run) {
                self.replayed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(task = %run.0, job = run.0.job.0, attempt = run.1, node = %s.node, "start order for a run already ordered here (a preempted task's restart, a retried or a replayed order): run, not refused");
            }
        }
    }
}

/// Decodes a bincode list of orders and hands it to the actor.
async fn from_lm(
    State(w): State<Addr<WorkerActor>>,
    axum::Extension(cluster): axum::Extension<Cluster>,
    axum::Extension(runs): axum::Extension<Arc<StartedRuns>>,
    axum::Extension(guard): axum::Extension<ClusterGuard>,
    axum::Extension(OrderKey(order_key)): axum::Extension<OrderKey>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(expected) = order_key {
        let presented = service_kit::auth::WorkerSession::presented(&headers);
        if presented != Some(expected) {
            guard.counters.forbidden.fetch_add(1, Ordering::Relaxed);
            let why = if presented.is_none() {
                "missing"
            } else {
                "not this worker's order key"
            };
            tracing::warn!(
                why,
                "order refused: it does not carry the key this worker gave its LM"
            );
            return service_kit::auth::forbidden(
                service_kit::auth::WORKER_SESSION_HEADER,
                &format!("{why}: this worker takes orders only from the LM it registered with (the key it gave at registration)"),
            );
        }
    }
    let orders: Vec<LmToWorker> = match cluster.decode(&body, "/v1/messages") {
        Ok(o) => o,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    runs.note_repeats(&orders);
    if orders.is_empty() {
        return done(&cluster, Ok(()));
    }
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
    let exec = w.send(GetContainment).await.ok().flatten();
    // Said loudly: tasks that can read the worker's credentials, or none at all.
    let warnings: Vec<String> = exec
        .iter()
        .filter(|e| matches!(e.identity, "worker_user" | "refused") || e.limits == "rlimit")
        .flat_map(|e| {
            let mut w = Vec::new();
            if matches!(e.identity, "worker_user" | "refused") {
                w.push(e.identity_detail.clone());
            }
            if e.limits == "rlimit" {
                w.push(format!(
                    "exec tasks are not in cgroups: {}",
                    e.limits_detail
                ));
            }
            w
        })
        .collect();
    match w.send(GetLoad).await {
        Ok((running, undelivered)) => Json(serde_json::json!({
            "status": "ok", "running": running, "undelivered_reports": undelivered,
            "exec": exec, "warnings": warnings,
        }))
        .into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn metrics(
    State(w): State<Addr<WorkerActor>>,
    axum::Extension(guard): axum::Extension<ClusterGuard>,
    axum::Extension(cluster): axum::Extension<Cluster>,
    axum::Extension(runs): axum::Extension<Arc<StartedRuns>>,
) -> Response {
    match w.send(RenderMetrics).await {
        Ok(mut page) => {
            guard.render(&mut page);
            service_kit::metrics::single(
                &mut page,
                "megha_worker_replayed_starts_total",
                "counter",
                "Start orders for a run (task, attempt) already ordered here; run anyway (a preempted task restarts with the same attempt).",
                runs.replayed.load(Ordering::Relaxed) as f64,
            );
            cluster.render(&mut page);
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_started_once_and_the_memory_is_bounded() {
        let runs = StartedRuns::default();
        let run = (TaskId::new(7, 0), 1);
        assert!(runs.first(run));
        assert!(!runs.first(run));
        assert!(
            runs.first((TaskId::new(7, 0), 2)),
            "another attempt is another run"
        );
        for i in 0..RUNS_KEPT as u64 {
            runs.first((TaskId::new(1_000 + i, 0), 1));
        }
        assert!(
            runs.first(run),
            "the oldest run is forgotten past RUNS_KEPT"
        );
    }
}
