//! Routing to the designated GM: LRA submissions and jobs with GUARANTEED (or
//! long_running) tasks are placed by the designated GM; any other GM forwards the
//! request there over HTTP and relays the answer as it came.
//!
//! No loops: a GM that believes itself designated never forwards, and a forwarded
//! request (it carries [`FORWARDED_BY`]) is never forwarded again; a GM that gets one
//! without being designated answers 421 naming the misconfiguration.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::GmId;
use serde_json::json;

/// Header a forwarding GM sets to its own id.
pub const FORWARDED_BY: &str = "x-megha-forwarded-by";

#[derive(Clone, Debug)]
pub struct Route {
    pub me: GmId,
    pub designated: GmId,
    /// Base URL of the designated GM (from `--designated-url` or `--gm-url`).
    pub designated_url: Option<String>,
    pub client: reqwest::Client,
}

/// What to do with a request for the designated GM.
#[derive(Debug)]
pub enum Routed {
    /// Handle it here.
    Local,
    /// Already answered (forwarded and relayed, or refused).
    Answered(Response),
}

/// The GM number a job id carries in its top 16 bits.
pub fn job_owner(job: u64) -> u16 {
    (job >> 48) as u16
}

impl Route {
    /// True when `job` was accepted by the designated GM and this GM is another one
    /// (a forwarded GUARANTEED job): its status lives there.
    pub fn is_forwarded_job(route: Option<&Route>, job: u64) -> bool {
        route.is_some_and(|r| r.me != r.designated && job_owner(job) == r.designated.0)
    }

    /// Handles the request here when this GM is the designated one; otherwise
    /// forwards `method path` with `body` and relays the answer.
    pub async fn route(
        route: Option<&Route>,
        headers: &HeaderMap,
        method: reqwest::Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Routed {
        let Some(r) = route else {
            return Routed::Local;
        };
        if r.me == r.designated {
            return Routed::Local;
        }
        if let Some(from) = headers.get(FORWARDED_BY) {
            let from = from.to_str().unwrap_or("?");
            tracing::warn!(gm = %r.me, designated = %r.designated, from, "forwarded request reached a GM that is not designated");
            return Routed::Answered(
                (
                    StatusCode::MISDIRECTED_REQUEST,
                    Json(json!({
                        "field": "designated_gm",
                        "error": format!(
                            "forwarded here by GM {from}, but this GM ({}) is not the designated GM (it believes {} is); every GM needs the same --designated-gm",
                            r.me, r.designated
                        ),
                    })),
                )
                    .into_response(),
            );
        }
        let Some(base) = &r.designated_url else {
            return Routed::Answered(
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({
                        "field": "designated_gm",
                        "error": format!(
                            "this GM ({}) is not the designated GM ({}) and knows no URL for it; set --gm-url or --designated-url",
                            r.me, r.designated
                        ),
                    })),
                )
                    .into_response(),
            );
        };
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let mut request = r
            .client
            .request(method, &url)
            .header(FORWARDED_BY, r.me.0.to_string());
        // The user's token goes along: the designated GM authenticates the user and
        // checks the job's owner itself; the client adds the cluster credential.
        if let Some(user) = headers.get(header::AUTHORIZATION) {
            request = request.header(header::AUTHORIZATION, user.clone());
        }
        if let Some(body) = body {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        tracing::debug!(gm = %r.me, designated = %r.designated, %url, "forwarding to the designated GM");
        let answer = match request.send().await {
            Ok(a) => a,
            Err(e) => return Routed::Answered(bad_gateway(&url, &e.to_string())),
        };
        let status =
            StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let retry_after = answer.headers().get(header::RETRY_AFTER).cloned();
        match answer.bytes().await {
            Ok(bytes) => {
                let mut response =
                    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response();
                if let Some(v) = retry_after {
                    response.headers_mut().insert(header::RETRY_AFTER, v);
                }
                Routed::Answered(response)
            }
            Err(e) => Routed::Answered(bad_gateway(&url, &e.to_string())),
        }
    }
}

fn bad_gateway(url: &str, error: &str) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({
            "field": "designated_gm",
            "error": format!("the designated GM at {url} did not answer: {error}"),
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt as _;

    fn route(me: u16, url: Option<&str>) -> Route {
        Route {
            me: GmId(me),
            designated: GmId(0),
            designated_url: url.map(Into::into),
            client: reqwest::Client::new(),
        }
    }

    /// The status of the answer, for decisions taken without any I/O.
    fn decide(r: Option<&Route>, headers: &HeaderMap) -> Option<u16> {
        let routed = Route::route(r, headers, reqwest::Method::GET, "/v1/lras/1", None)
            .now_or_never()
            .expect("decided without I/O");
        match routed {
            Routed::Local => None,
            Routed::Answered(response) => Some(response.status().as_u16()),
        }
    }

    #[test]
    fn the_designated_gm_never_forwards_and_loops_and_missing_urls_are_refused() {
        let plain = HeaderMap::new();
        let mut forwarded = HeaderMap::new();
        forwarded.insert(FORWARDED_BY, "2".parse().expect("header"));
        assert_eq!(decide(None, &plain), None, "no routing configured");
        assert_eq!(decide(Some(&route(0, None)), &plain), None);
        assert_eq!(
            decide(Some(&route(0, None)), &forwarded),
            None,
            "designated"
        );
        assert_eq!(
            decide(Some(&route(1, Some("http://gm0"))), &forwarded),
            Some(421)
        );
        assert_eq!(decide(Some(&route(1, None)), &plain), Some(503));
        assert!(Route::is_forwarded_job(Some(&route(1, None)), 5));
        assert!(!Route::is_forwarded_job(
            Some(&route(1, None)),
            (1 << 48) | 5
        ));
        assert!(!Route::is_forwarded_job(Some(&route(0, None)), 5));
    }
}
