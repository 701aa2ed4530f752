//! LRA routes of the public API (see [`crate::service::admission::lra_api`] for the body).
//!
//! - `POST /v1/lras`: 202 with the LRA id (also the job id of its container tasks)
//!   and the container task ids; 4xx naming the field at fault. On a GM that is not
//!   the designated one, forwarded there ([`crate::service::admission::route`]).
//! - `GET /v1/lras/{id}`: `pending` (with the reason), `launching`, `running` or
//!   `finished`, with the node of every container.

use super::answers::{LraAccepted, Refusal};
use super::state::{error, ApiState};
use crate::core::lra_path::LraRefused;
use crate::core::lra_path::LraStatus;
use crate::lra::LraId;
use crate::service::actor::lra_actor::{GetLra, SubmitLra};
use crate::service::admission::lra_api::parse_lra;
use crate::service::admission::lra_api::LraBody;
use crate::service::admission::route::{to_designated, Routed};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/v1/lras", post(submit_lra))
        .route("/v1/lras/{id}", get(lra))
}

fn refusal(status: StatusCode, field: &str, error: String) -> Response {
    (status, Json(json!({"field": field, "error": error}))).into_response()
}

#[utoipa::path(post, path = "/v1/lras", tag = "lras",
    request_body = LraBody,
    responses(
        (status = 202, description = "Accepted: the LRA's id and its containers' task ids", body = LraAccepted,
            links(
                ("lra" = (operation_id = "lra", parameters(("id" = "$response.body#/lra")))),
                ("job" = (operation_id = "job", parameters(("id" = "$response.body#/job")))),
            )),
        (status = 400, description = "Not JSON of this shape; `field` is the JSON path", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "A queue the user may not use", body = Refusal),
        (status = 413, description = "More containers than --max-job-tasks", body = Refusal),
        (status = 421, description = "Not the designated GM, and no forwarding", body = Refusal),
        (status = 422, description = "A value out of range, or constraints that cannot hold; `field` names it", body = Refusal),
        (status = 502, description = "The designated GM did not answer", body = Refusal),
        (status = 503, description = "The GM's actor does not answer", body = Refusal),
    ))]
pub(crate) async fn submit_lra(
    State(s): State<ApiState>,
    caller: Option<axum::Extension<crate::service::admission::users::Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = super::state::caller_of(caller);
    let lra = match parse_lra(&body, s.max_job_tasks, &s.queues, &s.lra_groups) {
        Ok(l) => l,
        Err(e) => return error(e),
    };
    if let Some(refused) = crate::service::admission::users::check_queue(
        &s.auth, &caller, &s.queues, lra.queue, "queue",
    ) {
        return refused;
    }
    let routed = to_designated(
        s.route.as_deref(),
        &headers,
        reqwest::Method::POST,
        "/v1/lras",
        Some(body),
    )
    .await;
    if let Routed::Answered(r) = routed {
        return r;
    }
    match s.gm.send(SubmitLra(lra)).await {
        Ok(Ok((id, tasks))) => {
            s.auth.record_owner(id.0, &caller);
            (
                StatusCode::ACCEPTED,
                Json(LraAccepted {
                    lra: id.0,
                    job: id.0,
                    tasks: tasks.iter().map(|t| t.to_string()).collect(),
                }),
            )
                .into_response()
        }
        Ok(Err(e @ LraRefused::NotDesignated { .. })) => refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "designated_gm",
            e.to_string(),
        ),
        Ok(Err(e)) => refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "constraints",
            e.to_string(),
        ),
        Err(e) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "gm",
            format!("global master unavailable: {e}"),
        ),
    }
}

#[utoipa::path(get, path = "/v1/lras/{id}", tag = "lras",
    params(("id" = u64, Path, description = "The LRA id")),
    responses(
        (status = 200, description = "The LRA's state and where each container is", body = LraStatus),
        (status = 400, description = "Not an LRA id", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 404, description = "Unknown here, or another user's LRA (the same answer)", body = Refusal),
        (status = 502, description = "The designated GM did not answer", body = Refusal),
    ))]
pub(crate) async fn lra(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "lra",
            format!("`{id}` is not a valid lra id"),
        );
    };
    let path = format!("/v1/lras/{id}");
    if let Routed::Answered(r) = to_designated(
        s.route.as_deref(),
        &headers,
        reqwest::Method::GET,
        &path,
        None,
    )
    .await
    {
        return r;
    }
    match s.gm.send(GetLra(LraId(id))).await {
        Ok(Some(status)) => Json(status).into_response(),
        Ok(None) => refusal(
            StatusCode::NOT_FOUND,
            "lra",
            format!("lra {id} is unknown to this GM"),
        ),
        Err(e) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "gm",
            format!("global master unavailable: {e}"),
        ),
    }
}
