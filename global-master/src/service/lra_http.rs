//! LRA routes of the public API (see [`super::lra_api`] for the body).
//!
//! - `POST /v1/lras`: 202 with the LRA id (also the job id of its container tasks)
//!   and the container task ids; 4xx naming the field at fault. On a GM that is not
//!   the designated one, forwarded there ([`super::route`]).
//! - `GET /v1/lras/{id}`: `pending` (with the reason), `launching`, `running` or
//!   `finished`, with the node of every container.

use super::http::{error, ApiState};
use super::lra_actor::{GetLra, SubmitLra};
use super::lra_api::parse_lra;
use super::route::{Route, Routed};
use crate::core::lra_path::LraRefused;
use crate::lra::LraId;
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

async fn submit_lra(
    State(s): State<ApiState>,
    caller: Option<axum::Extension<super::users::Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = super::http::caller_of(caller);
    let lra = match parse_lra(&body, s.max_job_tasks, &s.queues, &s.lra_groups) {
        Ok(l) => l,
        Err(e) => return error(e),
    };
    if let Some(refused) =
        super::users::check_queue(&s.auth, &caller, &s.queues, lra.queue, "queue")
    {
        return refused;
    }
    let routed = Route::route(
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
                Json(json!({
                    "lra": id.0,
                    "job": id.0,
                    "tasks": tasks.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                })),
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

async fn lra(State(s): State<ApiState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "lra",
            format!("`{id}` is not a valid lra id"),
        );
    };
    let path = format!("/v1/lras/{id}");
    if let Routed::Answered(r) = Route::route(
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
