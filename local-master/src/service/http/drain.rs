//! `POST /v1/nodes/{node}/drain` (drain) and `DELETE /v1/nodes/{node}/drain`
//! (undrain): from a GM, on an admin's behalf (the GM checks the admin; here the
//! cluster credential of a GM). JSON: the node's state after the call
//! ([`common::messages::NodeDrain`]); 404 naming an unknown node, 400 a
//! node that is not a number; a repeat answers 200 with `changed: false`.

use super::{bad, LmApi};
use crate::service::actor::drain::{Drain, DrainRefused};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::NodeId;

pub(super) async fn drain(State(s): State<LmApi>, Path(node): Path<String>) -> Response {
    set(&s, &node, true).await
}

pub(super) async fn undrain(State(s): State<LmApi>, Path(node): Path<String>) -> Response {
    set(&s, &node, false).await
}

async fn set(s: &LmApi, node: &str, drained: bool) -> Response {
    let Ok(node) = node.parse::<u32>() else {
        return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"field": "node", "error": format!("node: {node:?} is not a node number")})),
        )
            .into_response();
    };
    let msg = Drain {
        node: NodeId(node),
        drained,
    };
    match s.lm.send(msg).await {
        Ok(Ok(answer)) => Json(answer).into_response(),
        Ok(Err(e @ DrainRefused::UnknownNode(_))) => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({"field": "node", "error": e.to_string()})),
        )
            .into_response(),
        Ok(Err(e)) => bad(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => bad(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
