//! Any GM answers for any job of the cluster: a request naming a job of another GM
//! (the GM number in the id's top 16 bits) is forwarded to that GM, its owner, which
//! checks the caller's token and the job's user itself, and its answer relayed.

use super::peers::{job_owner, Route, FORWARDED_BY};
use super::relay::{relay, Request};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::GmId;
use serde_json::json;

/// A request naming a job, to forward to the job's owner when that is another GM.
#[derive(Debug)]
pub struct ForOwner<'a> {
    pub job: u64,
    pub method: reqwest::Method,
    /// Path and query, as this GM got them.
    pub path: &'a str,
    pub body: Option<Bytes>,
    /// Stream the answer (followed logs).
    pub stream: bool,
}

/// The owner's answer to `req` when its job belongs to another GM; `None` when
/// this GM answers (its own job, or no cluster configured). A request forwarded
/// here for a job of a third GM is a 421 (the GMs' `--gm-url` lists disagree),
/// never forwarded again; a job id naming no GM of the cluster a 404.
pub async fn to_owner(
    route: Option<&Route>,
    headers: &HeaderMap,
    req: ForOwner<'_>,
) -> Option<Response> {
    if !Route::is_forwarded_job(route, req.job) {
        return None;
    }
    let r = route?;
    let owner = GmId(job_owner(req.job));
    if let Some(from) = headers.get(FORWARDED_BY) {
        let from = from.to_str().unwrap_or("?");
        tracing::warn!(gm = %r.me, owner = %owner, from, job = req.job, "a request forwarded here names a job of another GM");
        return Some(refusal(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "forwarded here by GM {from}, but job {} belongs to GM {} and this is GM {}; every GM needs the same --gm-url list, in GM-id order",
                req.job, owner.0, r.me.0
            ),
        ));
    }
    let Some(base) = r.url_of(owner) else {
        let error = if r.gm_urls.is_empty() {
            format!(
                "job {} belongs to GM {}, whose URL this GM does not know; set --gm-url",
                req.job, owner.0
            )
        } else {
            format!(
                "job {} is unknown: it names GM {}, and this cluster has {} GMs",
                req.job,
                owner.0,
                r.gm_urls.len()
            )
        };
        let status = if r.gm_urls.is_empty() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::NOT_FOUND
        };
        return Some(refusal(status, error));
    };
    let request = Request {
        method: req.method,
        path: req.path,
        body: req.body,
        stream: req.stream,
    };
    Some(relay(r, owner, base, headers, request).await)
}

fn refusal(status: StatusCode, error: String) -> Response {
    (status, Json(json!({"field": "gm", "error": error}))).into_response()
}
