//! The worker's HTTP API: `POST /v1/messages` (bincode `Vec<LmToWorker>` -> `()`,
//! from its LM: start, kill and promote orders, in the order the LM decided them),
//! `GET /v1/tasks/{job}/{index}/logs?stream=
//! stdout|stderr&tail=N|from=BYTES` (an exec task's log, text; `from`: from that
//! byte on, with the log's size in `x-megha-log-size`; 404 for a task with none here),
//! `GET /healthz`, `GET /metrics`. Every route but the last two needs the cluster
//! credential (`service_kit::auth`): with per-role credentials, an LM's ([`callers`]).
//!
//! Each start order names its dispatch (its LM's life and a number): a dispatch runs
//! once here; a resent or replayed start order is dropped, counted
//! (`megha_worker_replayed_starts_total`) and logged ([`StartedRuns`]).

use super::actor::metrics::RenderMetrics;
use super::actor::{FromLm, GetContainment, GetLoad, LogsRoot, WorkerActor};
use crate::exec::logs::{self, LogError, Stream};
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;
use common::messages::Dispatch;
use common::protocol::LmToWorker;
use service_kit::auth::ClusterGuard;
use service_kit::cluster::Cluster;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use worker_core::orders::OrderFilter;

/// The routes; every one but `/healthz` and `/metrics` needs the cluster credential
/// of `guard` (401 otherwise, nothing applied); a call of another cluster than
/// `cluster` is refused (421).
pub fn router(worker: Addr<WorkerActor>, guard: ClusterGuard, cluster: Cluster) -> Router {
    router_with_order_key(worker, guard, cluster, None, ItsLm::default())
}

/// What this worker's registrations told it, for its HTTP layer: the LM it
/// registered with (its number; unknown before the first registration's answer),
/// and the start orders it takes ([`StartedRuns`]). With per-process credentials,
/// a call signed by another LM is refused (issue 32): only its own LM orders it or
/// reads its logs.
#[derive(Clone, Debug, Default)]
pub struct ItsLm {
    lm: Arc<std::sync::OnceLock<u16>>,
    runs: Arc<StartedRuns>,
}

impl ItsLm {
    /// Takes a registration's answer: its LM (the first: a worker registers again
    /// with the same LM only), and the first start order meant for this
    /// registration (those of the LM's life numbered below are refused).
    pub fn assigned(&self, a: &common::messages::WorkerAssignment) {
        let _ = self.lm.set(a.lm.0);
        self.runs.floor(a.incarnation, a.orders_from);
    }

    fn get(&self) -> Option<u16> {
        self.lm.get().copied()
    }
}

/// Refuses a call signed by an LM of another number than this worker's (403
/// naming `x-megha-signature`, counted); a call signed for any LM (`lm.toml`), or
/// before the worker knows its LM, passes.
async fn only_its_lm(
    axum::extract::State((its, guard)): axum::extract::State<(ItsLm, ClusterGuard)>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let signer = req
        .extensions()
        .get::<service_kit::auth::signed::Identity>()
        .and_then(|i| i.id);
    match (signer, its.get()) {
        (Some(signer), Some(mine)) if signer != mine => {
            guard.counters.forbidden.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                signer,
                lm = mine,
                path = req.uri().path(),
                "call refused: signed by another LM than this worker's"
            );
            service_kit::auth::forbidden(
                service_kit::auth::SIGNATURE_HEADER,
                &format!("signed by lm {signer}; this worker registered with lm {mine}"),
            )
        }
        _ => next.run(req).await,
    }
}

/// The key under which the LM signs its orders (`None`: no signature asked).
#[derive(Clone)]
struct OrderKey(Option<Arc<[u8]>>);

impl std::fmt::Debug for OrderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OrderKey(<redacted>)")
    }
}

/// [`router`] taking orders (`POST /v1/messages`) only when they carry the
/// HMAC-SHA256 of their body under `order_key` (in `x-megha-order-mac`): the key
/// this worker gave its LM at registration, which never travels on orders. An
/// order without it, or signed with another key, or altered, is refused 403 naming
/// the header, counted and logged (issue 32: neither another holder of the LM
/// role's key nor a relay reading orders can order a worker).
pub fn router_with_order_key(
    worker: Addr<WorkerActor>,
    guard: ClusterGuard,
    cluster: Cluster,
    order_key: Option<Vec<u8>>,
    its_lm: ItsLm,
) -> Router {
    let runs = its_lm.runs.clone();
    let routes = Router::new()
        .route("/v1/messages", post(from_lm))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(axum::Extension(guard.clone()))
        .layer(axum::Extension(cluster.clone()))
        .layer(axum::Extension(runs))
        .layer(axum::Extension(OrderKey(order_key.map(Arc::from))))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(worker)
        // Inside the guard: runs once the signer is known.
        .layer(axum::middleware::from_fn_with_state(
            (its_lm, guard.clone()),
            only_its_lm,
        ));
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

/// The start orders this worker took in this life ([`OrderFilter`]: each dispatch
/// runs once, none of a replaced LM life or sent before this worker's current
/// registration); what it refuses is dropped, counted and logged.
#[derive(Debug, Default)]
pub struct StartedRuns {
    filter: Mutex<OrderFilter>,
    /// Start orders dropped so.
    pub replayed: AtomicU64,
}

impl StartedRuns {
    /// This worker registered (again): [`OrderFilter::floor`].
    pub fn floor(&self, life: u64, from: u64) {
        self.lock().floor(life, from);
    }

    /// [`OrderFilter::first`].
    pub fn first(&self, dispatch: Dispatch) -> bool {
        self.lock().first(dispatch)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OrderFilter> {
        self.filter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops from `orders` the starts that may not run (see the type), counting
    /// and logging each.
    pub fn drop_repeats(&self, orders: &mut Vec<LmToWorker>) {
        orders.retain(|order| {
            let LmToWorker::Start(s) = order else {
                return true;
            };
            if self.first(s.dispatch) {
                return true;
            }
            self.replayed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(task = %s.task.id, job = s.task.id.job.0, attempt = s.task.attempt, node = %s.node, lm_life = s.dispatch.lm_life, dispatch = s.dispatch.seq, "start order dropped: this dispatch already ran here, is of an LM life since replaced, or was sent before this worker registered again (a resent, replayed or abandoned order)");
            false
        });
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
    if let Some(key) = order_key {
        if !service_kit::auth::order_mac_valid(&key, &body, &headers) {
            guard.counters.forbidden.fetch_add(1, Ordering::Relaxed);
            let why = if headers.contains_key(service_kit::auth::ORDER_MAC_HEADER) {
                "not signed with this worker's order key (or altered)"
            } else {
                "missing"
            };
            tracing::warn!(
                why,
                "order refused: it does not carry the MAC under the key this worker gave its LM"
            );
            return service_kit::auth::forbidden(
                service_kit::auth::ORDER_MAC_HEADER,
                &format!("{why}: this worker takes orders only from the LM it registered with (signed with the key it gave at registration)"),
            );
        }
    }
    let mut orders: Vec<LmToWorker> = match cluster.decode(&body, "/v1/messages") {
        Ok(o) => o,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    runs.drop_repeats(&mut orders);
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
    /// An attempt's log (its current one by default).
    attempt: Option<u32>,
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
    let log = logs::Log {
        task,
        stream,
        attempt: q.attempt,
    };
    if let Some(from) = q.from {
        let read = tokio::task::spawn_blocking(move || logs::read_from(&root, log, from)).await;
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
            Ok(Err(e @ (LogError::Unknown { .. } | LogError::NoAttempt { .. }))) => {
                bad(StatusCode::NOT_FOUND, e.to_string())
            }
            Ok(Err(e)) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
    }
    let read = tokio::task::spawn_blocking(move || logs::tail(&root, log, q.tail)).await;
    match read {
        Ok(Ok(text)) => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
        }
        Ok(Err(e @ (LogError::Unknown { .. } | LogError::NoAttempt { .. }))) => {
            bad(StatusCode::NOT_FOUND, e.to_string())
        }
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
                "Start orders dropped: their dispatch (LM life, number) already ran here, is of an LM life since replaced, or was sent before this worker registered again (a resent, replayed or abandoned order).",
                runs.replayed.load(Ordering::Relaxed) as f64,
            );
            cluster.render(&mut page);
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
