//! What the scheduler sees: `GET /v1/pending` (queued tasks and why each waits) and
//! `GET /v1/nodes` (the GM's view of the nodes).

use super::state::{caller_of, error, query_of, unavailable, ApiState};
use crate::service::admission::users::Caller;
use crate::service::http::answers::Refusal;
use crate::service::observe::nodes::NodesView;
use crate::service::observe::report::{GetPending, PendingList};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PendingQuery {
    /// Tasks shown at most (default 100, at most 10,000).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/v1/pending", tag = "scheduler",
    params(PendingQuery),
    responses(
        (status = 200, description = "Queued tasks (the caller's; an admin's: all) with why each waits", body = PendingList),
        (status = 400, description = "A bad query parameter", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn pending(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<PendingQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = caller_of(caller);
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let limit = q.limit.unwrap_or(100).min(10_000);
    // A user sees their own pending tasks only (among the first 10,000 queued), and
    // their count as `total`.
    let asked = if caller.admin { limit } else { 10_000 };
    match s.gm.send(GetPending { limit: asked }).await {
        Ok(mut list) => {
            if !caller.admin {
                list.shown.retain(|p| s.auth.may_see(&caller, p.job));
                list.total = list.shown.len();
                list.shown.truncate(limit);
            }
            Json(list).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct NodesQuery {
    /// Leave out the per-node lists.
    summary: Option<bool>,
}

#[utoipa::path(get, path = "/v1/nodes", tag = "scheduler",
    params(NodesQuery),
    responses(
        (status = 200, description = "This GM's (eventually consistent) view of the nodes", body = NodesView),
        (status = 400, description = "A bad query parameter", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
    ))]
pub(crate) async fn nodes(
    State(s): State<ApiState>,
    query: Result<Query<NodesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query_of(query) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let summary = q.summary.unwrap_or(false);
    match s
        .gm
        .send(crate::service::observe::nodes::GetNodes { summary })
        .await
    {
        Ok(view) => Json(view).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}
