//! The GM's public HTTP API (axum, JSON).
//!
//! - `POST /v1/jobs`: submit a job (see [`crate::service::admission::api`]); 202 with the ids, 4xx naming
//!   the field at fault, 429 with `Retry-After` when the GM is full. With an
//!   `Idempotency-Key` header a retry gets the first answer ([`crate::service::durable::idempotency`]).
//! - `GET /v1/jobs?state=&queue=&user=&limit=&after=&order=&all_gms=`: the cluster's
//!   jobs (every GM's, merged; see [`crate::service::http::cluster_jobs`]) or this
//!   GM's (`all_gms=false`), newest first (or oldest), paged, filtered.
//! - `GET /v1/jobs/{id}`, `GET /v1/tasks/{job}/{index}`: what the job's GM knows;
//!   `GET /v1/jobs/{id}/spec`: the job's spec as submitted.
//!   Every route naming a job answers for a job of any GM: one of another GM is
//!   forwarded there with the caller's token (see
//!   [`crate::service::admission::route`]), 503 naming that GM when it is down.
//! - `GET /v1/tasks/{job}/{index}/logs?stream=stdout|stderr&tail=N&follow=true`:
//!   the task's output, through its LM from its worker (see [`crate::service::http::logs`]).
//! - `DELETE /v1/jobs/{id}`: cancel a job (202 with its status, again on a repeat;
//!   404 for an unknown job).
//! - `GET /v1/pending?limit=N`: queued tasks with the reason each is pending.
//! - `GET /v1/nodes?summary=true|false`: the GM's view: per LM, its partitions and
//!   nodes with capacity, free and used resources, and the age of its last state.
//! - `POST /v1/internal/messages`: messages from an LM (bincode
//!   `Vec<common::protocol::LmToGm>` -> `()`, like the LM's internal API): preempted
//!   tasks of this GM's queues, ends of tasks it launched; 422 (nothing applied) if
//!   one is addressed to another GM.
//! - `GET /v1/internal/jobs/{id}`: whether a job of this GM ended, for another GM
//!   (its jobs run after it; see [`crate::service::actor::remote_after`]).
//! - `GET /v1/overview`: what the dashboard needs beyond the rest (see
//!   [`crate::service::observe::overview`]); `GET /v1/cluster`: the LMs' own node lists, with down
//!   nodes and lent resources (see [`crate::service::http::cluster`]).
//! - `POST`/`DELETE /v1/lms/{lm}/nodes/{node}/drain`: an admin drains or undrains a
//!   node, through its LM (see [`crate::service::http::drain`]).
//! - `GET /v1/usage?user=&queue=&since=&until=`: runs, wall time and reserved CPU
//!   and memory per user and queue (see [`crate::service::http::usage`]).
//! - `GET /healthz`, `GET /metrics` (Prometheus text), `GET /openapi.json` (this API
//!   as OpenAPI 3, see [`crate::service::http::openapi`]).
//! - `GET /`: the web dashboard (see [`crate::service::http::dashboard`]): static files, open like
//!   `/healthz` (they hold no data; unknown paths still answer 401).
//!
//! Every route but `/healthz` and `/metrics` is guarded ([`crate::service::admission::users`]): a user's
//! bearer token (401 without or with a bad one; 403 naming `tasks[i].queue` for a
//! queue the user may not use; another user's job answers 404 like a missing one),
//! or the cluster credential for `/v1/internal/*` and forwarded requests.
//! - `POST /v1/lras`, `GET /v1/lras/{id}`: see [`crate::service::http::lra_http`]. A job with
//!   GUARANTEED or long_running tasks, like an LRA, goes to the designated GM.
//!
//! Layout: the state, the router and the helpers the handlers share (here); the
//! handlers by route: `intake` (`POST /v1/jobs`, `POST /v1/internal/messages`),
//! `jobs` (jobs and tasks), `task_logs`, `scheduler` (pending, nodes).

pub mod answers;
pub mod cluster;
pub mod cluster_jobs;
pub mod dashboard;
pub(crate) mod drain;
pub(crate) mod intake;
pub(crate) mod jobs;
pub mod logs;
pub mod lra_http;
pub mod openapi;
pub mod overview;
pub mod probes;
pub(crate) mod scheduler;
pub mod state;
pub(crate) mod task_logs;
pub(crate) mod usage;

pub use state::{ApiState, Limits};

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

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
        .route("/v1/jobs/{id}/spec", get(jobs::spec))
        .route("/v1/tasks/{job}/{index}", get(jobs::task))
        .route("/v1/tasks/{job}/{index}/logs", get(task_logs::task_logs))
        .route("/v1/pending", get(scheduler::pending))
        .route("/v1/nodes", get(scheduler::nodes))
        .route("/v1/overview", get(overview::serve))
        .route("/v1/cluster", get(cluster::serve))
        .route(
            "/v1/lms/{lm}/nodes/{node}/drain",
            post(drain::drain).delete(drain::undrain),
        )
        .route("/v1/usage", get(usage::serve))
        .route("/v1/internal/messages", post(intake::from_lm))
        .route("/v1/internal/jobs/{id}", get(jobs::job_outcome))
        .route("/healthz", get(probes::healthz))
        .merge(lra_http::routes())
        .route("/metrics", get(probes::metrics))
        .route(openapi::PATH, get(openapi::openapi_json))
        .merge(dashboard::routes())
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
}
