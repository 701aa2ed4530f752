//! The LM's internal HTTP API. Bodies are bincode via `common::codec`
//! (content type `common::codec::CONTENT_TYPE`).
//!
//! - `POST /v1/messages`: any GM request (`common::protocol::GmToLm`: launch batch,
//!   preemption) -> its answer (`LmToGm`); "busy" (503 with `Retry-After`,
//!   nothing applied) until every worker has registered or is down, and for a
//!   launch batch or preemption while too many events wait for the broker (see
//!   [`super::backpressure`]), 422 if it is not for this LM.
//! - `POST /v1/worker/messages`: `Vec<WorkerToLm>` -> `()` (from workers: reports, in
//!   order); 409 while the reporting worker has not registered with this life of the
//!   LM.
//! - `POST /v1/register`: `WorkerRegistration` -> `WorkerAssignment` (from workers);
//!   403 naming the reason when its callback URL is outside `--worker-networks`.
//! - `POST /v1/worker/alive`: `WorkerAlive` -> `WorkerAliveAnswer` (a worker's
//!   periodic check-in: keeps it from being declared lost, tells it to register again).
//! - `GET /v1/nodes`: the LM's authoritative state per node (JSON; see
//!   [`super::nodes`]).
//! - `POST`/`DELETE /v1/nodes/{node}/drain`: drain or undrain a node (from a GM,
//!   on an admin's behalf; see [`drain`]).
//! - `GET /v1/tasks/{job}/{index}/logs?node=N&stream=&tail=&from=`: a task's log,
//!   proxied to the worker that runs node `N` (without `node`: the node where the
//!   task runs now). The GM's logs endpoint comes through here.
//! - `GET /healthz` (JSON, with the LM's `incarnation`), `GET /metrics`.
//!
//! Every route but `/healthz` and `/metrics` needs the cluster credential
//! (`service_kit::auth`): 401 without it or with a wrong one, nothing applied; with
//! per-role credentials, 403 for a role that may not call it ([`callers`]).

mod drain;

use super::actor::gm::{AnsweredBusy, FromGm, GmRequestError};
use super::actor::metrics::RenderMetrics;
use super::actor::workers::{Alive, BindSession, FromSessionWorker, Register, ReportRefused};
use super::actor::{GetLoad, LmActor};
use super::orders::WorkerLink;
use actix::Addr;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::codec;
use common::messages::{WorkerAlive, WorkerRegistration};
use common::protocol::{GmToLm, WorkerToLm};
use serde::Serialize;
use service_kit::links::{http_client_with, HttpLink};
use service_kit::roles::Role;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LmApi {
    pub lm: Addr<LmActor>,
    pub client: reqwest::Client,
    /// This life of the LM (see [`LmActor::incarnation`]), on `/healthz`.
    pub incarnation: u64,
    /// The broker publisher: a report is answered once the events it caused are
    /// confirmed, so that an LM crash cannot lose the end of a task whose worker
    /// already forgot it (the worker sends the report again to the next LM).
    pub publisher: Option<service_kit::amqp::Publisher>,
    /// Launch batches and preemptions wait (503) while the publisher's backlog is
    /// over its limit; `None`: never.
    pub backpressure: Option<Arc<super::backpressure::BrokerBackpressure>>,
    /// Every route but `/healthz` and `/metrics` needs the cluster credential.
    pub guard: service_kit::auth::ClusterGuard,
    /// Where a registering worker may ask to be called back.
    pub worker_networks: Arc<service_kit::auth::WorkerNetworks>,
    /// This LM's cluster: calls and messages of another are refused (421).
    pub cluster: service_kit::cluster::Cluster,
}

/// The drain routes ([`drain`]) need the actor only.
impl axum::extract::FromRef<LmApi> for Addr<LmActor> {
    fn from_ref(api: &LmApi) -> Self {
        api.lm.clone()
    }
}

/// How long a report's answer waits for the broker to confirm its events.
const REPORT_CONFIRM_WAIT: Duration = Duration::from_secs(2);

pub fn router(state: LmApi) -> Router {
    let guard = state.guard.clone();
    let cluster = state.cluster.clone();
    let routes = Router::new()
        .route("/v1/messages", post(from_gm))
        .route("/v1/worker/messages", post(from_worker))
        .route("/v1/register", post(register))
        .route("/v1/worker/alive", post(alive))
        .route("/v1/nodes", get(nodes))
        .route(
            "/v1/nodes/{node}/drain",
            post(drain::drain).delete(drain::undrain),
        )
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state);
    let guarded = service_kit::auth::require_cluster(routes, guard);
    service_kit::cluster::require_same_cluster(guarded, cluster)
}

/// Who may call each path (with per-role credentials; the shared secret lets any
/// holder call anything): workers report, register and check in; GMs send requests
/// and read logs, and drain nodes; any role may read `/v1/nodes`, and unknown paths (they answer 404).
pub fn callers(path: &str) -> &'static [Role] {
    match path {
        "/v1/messages" => &[Role::Gm],
        "/v1/worker/messages" | "/v1/register" | "/v1/worker/alive" => &[Role::Worker],
        p if p.starts_with("/v1/tasks/") => &[Role::Gm],
        p if p.starts_with("/v1/nodes/") => &[Role::Gm],
        _ => Role::ALL,
    }
}

/// A new client for the LM's calls to workers (carrying the cluster credential and
/// the cluster's name).
pub fn worker_client(
    secret: Option<&service_kit::auth::ClusterSecret>,
    cluster: &common::ClusterName,
) -> reqwest::Client {
    http_client_with(WORKER_CALL_TIMEOUT, secret, Some(cluster))
}

/// How long one call to a worker may take.
const WORKER_CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn bincode_ok<T: Serialize>(cluster: &service_kit::cluster::Cluster, value: &T) -> Response {
    match cluster.encode(value) {
        Ok(body) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad(status: StatusCode, msg: String) -> Response {
    (status, Json(serde_json::json!({"error": msg}))).into_response()
}

async fn from_gm(
    State(s): State<LmApi>,
    signer: Option<axum::Extension<service_kit::auth::signed::Identity>>,
    body: Bytes,
) -> Response {
    let message: GmToLm = match s.cluster.decode(&body, "/v1/messages") {
        Ok(m) => m,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    // A GM with a credential of its own speaks only for itself (issue 32).
    if let Some(id) = signer.and_then(|e| e.0.id) {
        if message.gm().0 != id {
            s.guard
                .counters
                .forbidden
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(signer = id, names = %message.gm(), kind = message.kind(), "GM request refused: signed by one GM, naming another");
            return (
                StatusCode::FORBIDDEN,
                Json(serde_json::json!({
                    "field": "gm",
                    "error": format!("signed by gm {id}, the {} names {}", message.kind(), message.gm()),
                })),
            )
                .into_response();
        }
    }
    if let Some(refusal) = s.backpressure.as_ref().and_then(|b| b.refuse(&message)) {
        if let GmToLm::Launch(b) = &message {
            s.lm.do_send(AnsweredBusy {
                gm: b.gm,
                seq: b.seq,
            });
        }
        return refusal;
    }
    match s.lm.send(FromGm(message)).await {
        Ok(Ok(answer)) => bincode_ok(&s.cluster, &answer),
        // Nothing applied: the GM places elsewhere for a second (a resend of a
        // batch in doubt is sent again after it).
        Ok(Err(e @ (GmRequestError::NotReady { .. } | GmRequestError::AnsweredBusy { .. }))) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::RETRY_AFTER, "1")],
            Json(serde_json::json!({"error": e.to_string()})),
        )
            .into_response(),
        Ok(Err(e @ GmRequestError::Superseded(_))) => bad(StatusCode::CONFLICT, e.to_string()),
        Ok(Err(e)) => bad(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn from_worker(
    State(s): State<LmApi>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let messages: Vec<WorkerToLm> = match s.cluster.decode(&body, "/v1/worker/messages") {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    let session = service_kit::auth::WorkerSession::presented(&headers);
    match s.lm.send(FromSessionWorker { messages, session }).await {
        Ok(Ok(())) => {
            if let Some(publisher) = &s.publisher {
                if !publisher.flush(REPORT_CONFIRM_WAIT).await {
                    tracing::warn!("events of a worker report not yet confirmed by the broker; answering anyway");
                }
            }
            bincode_ok(&s.cluster, &())
        }
        Ok(Err(ReportRefused::NotRegistered(e))) => bad(StatusCode::CONFLICT, e),
        Ok(Err(ReportRefused::NotItsNode(why))) => {
            s.guard
                .counters
                .forbidden
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(%why, "worker report refused: not on the nodes of the presenting worker");
            service_kit::auth::forbidden(service_kit::auth::WORKER_SESSION_HEADER, &why)
        }
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn register(State(s): State<LmApi>, headers: axum::http::HeaderMap, body: Bytes) -> Response {
    let reg: WorkerRegistration = match s.cluster.decode(&body, "/v1/register") {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    // The LM will send start orders (with the cluster credential) to this URL: only
    // within the configured networks, or a registration could aim them anywhere.
    let checked = match s.worker_networks.check_url(&reg.url).await {
        Ok(checked) => checked,
        Err(why) => {
            s.guard
                .counters
                .forbidden
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(slot = ?reg.slot, %why, "worker registration refused");
            return bad(StatusCode::FORBIDDEN, why);
        }
    };
    // A name is pinned to the addresses just checked: the orders go there even if
    // the name resolves elsewhere later (DNS rebinding).
    let client = if checked.is_name() {
        service_kit::links::http_client_pinned(
            WORKER_CALL_TIMEOUT,
            s.guard.secret.as_ref(),
            Some(&s.cluster.name),
            &checked,
        )
    } else {
        s.client.clone()
    };
    let link: WorkerLink = Arc::new(HttpLink {
        client,
        url: format!("{}/v1/messages", reg.url.trim_end_matches('/')),
        retries: 3,
        cluster: s.cluster.clone(),
        // The worker's order key: each order to it carries the MAC of its body
        // under the key (never the key itself).
        session: headers
            .get(service_kit::auth::ORDER_KEY_HEADER)
            .cloned()
            .map(service_kit::auth::WorkerSession::signing),
        signing: service_kit::auth::Signing::new(
            s.guard.secret.as_ref(),
            service_kit::roles::Role::Worker,
        ),
    });
    // The worker's session: bound to the slot it gets, sent back in the answer only.
    let (session, digest) = match service_kit::auth::WorkerSession::issue() {
        Ok(issued) => issued,
        Err(e) => return bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    match s
        .lm
        .send(Register {
            slot: reg.slot,
            url: reg.url,
            link,
            holding: reg.holding,
            ended: reg.ended,
            process: headers
                .get(service_kit::auth::ORDER_KEY_HEADER)
                .map(|key| service_kit::roles::digest(key.as_bytes())),
        })
        .await
    {
        Ok(Ok(assignment)) => {
            if let Err(e) =
                s.lm.send(BindSession {
                    slot: assignment.slot,
                    digest,
                })
                .await
            {
                return bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
            }
            let mut answer = bincode_ok(&s.cluster, &assignment);
            answer
                .headers_mut()
                .insert(service_kit::auth::WORKER_SESSION_HEADER, session);
            answer
        }
        Ok(Err(e)) => bad(StatusCode::UNPROCESSABLE_ENTITY, e),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn alive(State(s): State<LmApi>, headers: axum::http::HeaderMap, body: Bytes) -> Response {
    let alive: WorkerAlive = match s.cluster.decode(&body, "/v1/worker/alive") {
        Ok(a) => a,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("body: {e}")),
    };
    let session = service_kit::auth::WorkerSession::presented(&headers);
    match s.lm.send(Alive(alive, session)).await {
        Ok(answer) => bincode_ok(&s.cluster, &answer),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn nodes(State(s): State<LmApi>) -> Response {
    match s.lm.send(super::actor::nodes::GetNodes).await {
        Ok(view) => Json(view).into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    node: Option<u32>,
    stream: Option<String>,
    tail: Option<usize>,
    from: Option<u64>,
    attempt: Option<u32>,
}

/// A task's log from the worker that runs its node (see the module documentation).
async fn task_logs(
    State(s): State<LmApi>,
    axum::extract::Path((job, index)): axum::extract::Path<(u64, u32)>,
    query: Result<axum::extract::Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let axum::extract::Query(q) = match query {
        Ok(q) => q,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("query: {}", e.body_text())),
    };
    let task = common::TaskId::new(job, index);
    let target = super::actor::nodes::WorkerUrl {
        node: q.node.map(common::NodeId),
        task,
    };
    let worker = match s.lm.send(target).await {
        Ok(Ok(url)) => url,
        Ok(Err(e)) => return bad(StatusCode::NOT_FOUND, e),
        Err(e) => return bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let mut params: Vec<(&str, String)> = Vec::new();
    if let Some(stream) = q.stream {
        params.push(("stream", stream));
    }
    if let Some(tail) = q.tail {
        params.push(("tail", tail.to_string()));
    }
    if let Some(from) = q.from {
        params.push(("from", from.to_string()));
    }
    if let Some(attempt) = q.attempt {
        params.push(("attempt", attempt.to_string()));
    }
    let url = format!(
        "{}/v1/tasks/{job}/{index}/logs",
        worker.trim_end_matches('/')
    );
    // The call carries the LM's credential: checked against --worker-networks again
    // and sent to the addresses just checked, so a registered name that now resolves
    // elsewhere (DNS rebinding) gets nothing.
    let client = match s.worker_networks.check_url(&worker).await {
        Ok(checked) if checked.is_name() => service_kit::links::http_client_pinned(
            WORKER_CALL_TIMEOUT,
            s.guard.secret.as_ref(),
            Some(&s.cluster.name),
            &checked,
        ),
        Ok(_) => s.client.clone(),
        Err(why) => {
            tracing::warn!(%task, %why, "log read refused: the worker's callback left --worker-networks");
            return bad(StatusCode::BAD_GATEWAY, why);
        }
    };
    let signing =
        service_kit::auth::Signing::new(s.guard.secret.as_ref(), service_kit::roles::Role::Worker);
    proxy(&client, client.get(url).query(&params), signing.as_ref()).await
}

/// Sends `request` (signed when `signing` is given) and answers with its status,
/// body and log headers.
pub async fn proxy(
    client: &reqwest::Client,
    request: reqwest::RequestBuilder,
    signing: Option<&service_kit::auth::Signing>,
) -> Response {
    let answer = match service_kit::auth::send(client, request, signing).await {
        Ok(a) => a,
        Err(e) => return bad(StatusCode::BAD_GATEWAY, format!("worker: {e}")),
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = axum::http::HeaderMap::new();
    for name in [header::CONTENT_TYPE.as_str(), "x-megha-log-size"] {
        if let Some(v) = answer.headers().get(name) {
            if let (Ok(n), Ok(v)) = (
                header::HeaderName::from_bytes(name.as_bytes()),
                header::HeaderValue::from_bytes(v.as_bytes()),
            ) {
                headers.insert(n, v);
            }
        }
    }
    match answer.bytes().await {
        Ok(body) => (status, headers, body).into_response(),
        Err(e) => bad(StatusCode::BAD_GATEWAY, format!("worker: {e}")),
    }
}

async fn healthz(State(s): State<LmApi>) -> Response {
    match s.lm.send(GetLoad).await {
        Ok((undelivered, running, ready)) => Json(serde_json::json!({
            "status": "ok", "ready": ready, "running": running, "undelivered_starts": undelivered,
            "incarnation": s.incarnation,
        }))
        .into_response(),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn metrics(State(s): State<LmApi>) -> Response {
    match s.lm.send(RenderMetrics).await {
        Ok(mut page) => {
            s.guard.render(&mut page);
            s.cluster.render(&mut page);
            if let Some(b) = &s.backpressure {
                b.render(&mut page);
            }
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
