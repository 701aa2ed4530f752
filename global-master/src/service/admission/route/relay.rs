//! One forwarded request and its answer: sent to the first address of the GM that
//! serves (a GM and its standby: `URL|URL`), with the caller's token and this GM's
//! signature, and the answer relayed as it came (status, content type,
//! `Retry-After`, body; streamed for followed logs).

use super::peers::{Route, FORWARDED_BY};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::GmId;
use serde_json::json;
use std::sync::atomic::Ordering;

/// What to forward.
pub(super) struct Request<'a> {
    pub method: reqwest::Method,
    /// Path and query, as this GM got them.
    pub path: &'a str,
    pub body: Option<Bytes>,
    /// Stream the answer as it comes, without a total timeout (followed logs).
    pub stream: bool,
}

/// Forwards `req` to GM `to` at `base` (`URL|URL`: the first that serves) and
/// relays its answer. An unreachable GM (nothing delivered) is a 503 naming it; a
/// GM that failed after the request went out (timeout, broken answer) a 502.
pub(super) async fn relay(
    r: &Route,
    to: GmId,
    base: &str,
    headers: &HeaderMap,
    req: Request<'_>,
) -> Response {
    let stream = req.stream;
    match send(r, to, base, headers, req).await {
        Ok((answer, url)) => relayed(answer, stream, to, &url).await,
        Err((status, error)) => failed(status, to, error),
    }
}

/// Sends `req` to GM `to` at `base`: its answer and the URL that gave it, or the
/// status to answer (503: unreachable; 502: failed after sending) and why.
pub(super) async fn send(
    r: &Route,
    to: GmId,
    base: &str,
    headers: &HeaderMap,
    req: Request<'_>,
) -> Result<(reqwest::Response, String), (StatusCode, String)> {
    let n = to.0;
    let client = if req.stream { &r.streaming } else { &r.client };
    // A GM with a standby has two addresses: the request goes to the first that
    // serves (unreachable: nothing delivered; 503: the standby not in charge,
    // nothing done).
    let bases = service_kit::links::alternatives(base);
    let mut last_error = format!("no address in `{base}`");
    for (i, base) in bases.iter().enumerate() {
        let url = format!("{base}{}", req.path);
        let mut request = client
            .request(req.method.clone(), &url)
            .header(FORWARDED_BY, r.me.0.to_string());
        // The user's token goes along: the other GM authenticates the user and
        // checks the job's owner itself; the client adds the cluster credential.
        if let Some(user) = headers.get(header::AUTHORIZATION) {
            request = request.header(header::AUTHORIZATION, user.clone());
        }
        if let Some(body) = &req.body {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        tracing::debug!(gm = %r.me, to = %to, %url, "forwarding");
        let last = i + 1 == bases.len();
        match service_kit::auth::send(client, request, r.signing.as_ref()).await {
            Ok(a) if a.status().as_u16() == 503 && !last => {}
            Ok(answer) => {
                r.counters.answered.fetch_add(1, Ordering::Relaxed);
                return Ok((answer, url));
            }
            Err(e) if e.is_connect() => {
                tracing::warn!(gm = %r.me, to = %to, %url, error = %e, "forwarding: the GM is unreachable");
                last_error = format!("GM {n} at {url} is unreachable: {e}");
            }
            Err(e) => {
                r.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(gm = %r.me, to = %to, %url, error = %e, "forwarding: the GM did not answer");
                return Err((
                    StatusCode::BAD_GATEWAY,
                    format!("GM {n} at {url} did not answer: {e}"),
                ));
            }
        }
    }
    r.counters.unreachable.fetch_add(1, Ordering::Relaxed);
    Err((StatusCode::SERVICE_UNAVAILABLE, last_error))
}

/// Why [`get_json`] has no answer: the other GM's status when it answered
/// (e.g. 404), `None` when it did not; and the words for a log line or a caller.
#[derive(Debug)]
pub struct NoAnswer {
    pub status: Option<u16>,
    pub error: String,
}

/// `GET path` at GM `to` through `route`, as the caller (their token in `headers`
/// goes along; none: as this GM, e.g. on `/v1/internal/*`): its JSON answer when it
/// is a success, else why not.
pub async fn get_json(
    route: &Route,
    to: GmId,
    headers: &HeaderMap,
    path: &str,
) -> Result<serde_json::Value, NoAnswer> {
    let n = to.0;
    let fail = |status, error| NoAnswer { status, error };
    let base = route
        .url_of(to)
        .ok_or_else(|| fail(None, format!("no URL for GM {n} (--gm-url)")))?;
    let req = Request {
        method: reqwest::Method::GET,
        path,
        body: None,
        stream: false,
    };
    let (answer, url) = send(route, to, base, headers, req)
        .await
        .map_err(|(_, e)| fail(None, e))?;
    let status = answer.status();
    let text = answer
        .text()
        .await
        .map_err(|e| fail(None, format!("GM {n} at {url} broke off its answer: {e}")))?;
    if !status.is_success() {
        return Err(fail(
            Some(status.as_u16()),
            format!("GM {n} at {url} answered {status}: {text}"),
        ));
    }
    serde_json::from_str(&text).map_err(|e| {
        fail(
            Some(status.as_u16()),
            format!("GM {n} at {url}: not JSON: {e}"),
        )
    })
}

async fn relayed(answer: reqwest::Response, stream: bool, to: GmId, url: &str) -> Response {
    let n = to.0;
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut kept = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(v) = answer.headers().get(&name) {
            kept.insert(name, v.clone());
        }
    }
    let mut response = if stream {
        // Chunk by chunk as they come (a followed log), until the end or an error.
        let chunks = futures_util::stream::unfold(Some(answer), |answer| async move {
            let mut answer = answer?;
            match answer.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(answer))),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            }
        });
        (status, Body::from_stream(chunks)).into_response()
    } else {
        match answer.bytes().await {
            Ok(bytes) => (status, bytes).into_response(),
            Err(e) => {
                return failed(
                    StatusCode::BAD_GATEWAY,
                    to,
                    format!("GM {n} at {url} broke off its answer: {e}"),
                )
            }
        }
    };
    response.headers_mut().extend(kept);
    response
}

/// The refusal when the other GM did not answer: names it (`gm`) and why.
fn failed(status: StatusCode, to: GmId, error: String) -> Response {
    (
        status,
        Json(json!({"field": "gm", "gm": to.0, "error": error})),
    )
        .into_response()
}
