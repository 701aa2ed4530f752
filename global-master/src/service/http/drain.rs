//! `POST /v1/lms/{lm}/nodes/{node}/drain` (drain) and `DELETE` on the same path
//! (undrain): an admin takes node `node` of LM `lm` out of service (no new work
//! lands there, running work finishes; like `scontrol update state=drain` or `nomad
//! node drain`) or puts it back.
//!
//! The LM is the authority: the GM checks the caller (an admin; 403 otherwise) and
//! the LM number (404 naming `lm`), then forwards the call to that LM's
//! `/v1/nodes/{node}/drain` with the cluster credential and relays its answer: the
//! node's state after the call (`changed: false` for a repeat), 404 naming an unknown
//! node. The LM refuses every launch onto a drained node (`node is drained`) and
//! offers it to no GM, so every GM's view stops placing there.

use super::answers::Refusal;
use super::state::{caller_of, error, unavailable, ApiState};
use crate::service::admission::api::ApiError;
use crate::service::admission::users::Caller;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;

#[utoipa::path(post, path = "/v1/lms/{lm}/nodes/{node}/drain", tag = "scheduler",
    params(("lm" = u16, Path, description = "The LM"), ("node" = u32, Path, description = "The node, numbered within its LM")),
    responses(
        (status = 200, description = "Drained (or already was): no new work lands on the node; running work finishes", body = common::messages::NodeDrain),
        (status = 400, description = "`lm` or `node` is not a number", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "The caller is not an admin", body = Refusal),
        (status = 404, description = "No such LM (`lm`) or node (`node`)", body = Refusal),
        (status = 502, description = "The LM did not answer", body = Refusal),
    ))]
pub(crate) async fn drain(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    Path((lm, node)): Path<(String, String)>,
) -> Response {
    forward(&s, caller_of(caller), &lm, &node, reqwest::Method::POST).await
}

#[utoipa::path(delete, path = "/v1/lms/{lm}/nodes/{node}/drain", tag = "scheduler",
    params(("lm" = u16, Path, description = "The LM"), ("node" = u32, Path, description = "The node, numbered within its LM")),
    responses(
        (status = 200, description = "Undrained (or was not drained): the node takes work again", body = common::messages::NodeDrain),
        (status = 400, description = "`lm` or `node` is not a number", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "The caller is not an admin", body = Refusal),
        (status = 404, description = "No such LM (`lm`) or node (`node`)", body = Refusal),
        (status = 502, description = "The LM did not answer", body = Refusal),
    ))]
pub(crate) async fn undrain(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    Path((lm, node)): Path<(String, String)>,
) -> Response {
    forward(&s, caller_of(caller), &lm, &node, reqwest::Method::DELETE).await
}

async fn forward(
    s: &ApiState,
    caller: Caller,
    lm: &str,
    node: &str,
    method: reqwest::Method,
) -> Response {
    if !caller.admin {
        tracing::warn!(user = %caller.user, lm, node, "node drain refused: not an admin");
        return error(ApiError::new(
            403,
            "lm",
            format!(
                "only an admin may drain or undrain a node ({} is not one)",
                caller.user
            ),
        ));
    }
    let lm: u16 = match crate::service::admission::api::parse_id("lm", lm) {
        Ok(lm) => lm,
        Err(e) => return error(e),
    };
    let node: u32 = match crate::service::admission::api::parse_id("node", node) {
        Ok(node) => node,
        Err(e) => return error(e),
    };
    let urls = match s.gm.send(super::cluster::GetLmUrls).await {
        Ok(urls) => urls,
        Err(e) => return unavailable(&e.to_string()),
    };
    let Some(base) = urls.get(lm as usize) else {
        let why = if urls.is_empty() {
            "this GM does not know its LMs' URLs (embedded mode): nodes cannot be drained here"
                .to_owned()
        } else {
            format!("lm {lm} is not one of the {} LMs", urls.len())
        };
        return error(ApiError::new(404, "lm", why));
    };
    let url = format!("{}/v1/nodes/{node}/drain", base.trim_end_matches('/'));
    let request = super::logs::client().request(method.clone(), &url);
    let answer =
        match service_kit::auth::send(super::logs::client(), request, super::logs::signing()).await
        {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(lm, node, %url, error = %e, "node drain not delivered to its LM");
                return error(ApiError::new(
                    502,
                    "lm",
                    format!("lm {lm} did not answer: {e}"),
                ));
            }
        };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = answer.bytes().await.unwrap_or_default();
    tracing::info!(user = %caller.user, lm, node, %method, %status, "node drain forwarded to its LM");
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
