//! `POST /v1/nodes/{node}/drain` (drain) and `DELETE /v1/nodes/{node}/drain`
//! (undrain): from a GM, on an admin's behalf (the GM checks the admin; here the
//! cluster credential of a GM). JSON: the node's state after the call
//! ([`common::messages::NodeDrain`]); 404 naming an unknown node, 400 a
//! node that is not a number; a repeat answers 200 with `changed: false`.

use crate::service::actor::drain::{Drain, DrainRefused};
use crate::service::actor::LmActor;
use actix::Addr;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::NodeId;

pub(super) async fn drain(State(lm): State<Addr<LmActor>>, Path(node): Path<String>) -> Response {
    set(&lm, &node, true).await
}

pub(super) async fn undrain(State(lm): State<Addr<LmActor>>, Path(node): Path<String>) -> Response {
    set(&lm, &node, false).await
}

async fn set(lm: &Addr<LmActor>, node: &str, drained: bool) -> Response {
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
    let error = |status: StatusCode, field: Option<&str>, e: String| {
        (
            status,
            Json(serde_json::json!({"field": field, "error": e})),
        )
            .into_response()
    };
    match lm.send(msg).await {
        Ok(Ok(answer)) => Json(answer).into_response(),
        Ok(Err(e @ DrainRefused::UnknownNode(_))) => {
            error(StatusCode::NOT_FOUND, Some("node"), e.to_string())
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, None, e.to_string()),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, None, e.to_string()),
    }
}
