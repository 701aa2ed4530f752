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
    /// Base URL of the designated GM (from `--designated-url` or `--gm-url`);
    /// `URL|URL` for a GM and its standby.
    pub designated_url: Option<String>,
    pub client: reqwest::Client,
    /// With a role credential: each forwarded request is signed for the GM role.
    pub signing: Option<service_kit::auth::Signing>,
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
        // A designated GM with a standby has two addresses (`URL|URL`): the request
        // goes to the first that serves (unreachable: nothing delivered; 503: the
        // standby not in charge, nothing done).
        let bases = service_kit::links::alternatives(base);
        let mut answered = None;
        for (i, base) in bases.iter().enumerate() {
            let url = format!("{base}{path}");
            let mut request = r
                .client
                .request(method.clone(), &url)
                .header(FORWARDED_BY, r.me.0.to_string());
            // The user's token goes along: the designated GM authenticates the user
            // and checks the job's owner itself; the client adds the cluster credential.
            if let Some(user) = headers.get(header::AUTHORIZATION) {
                request = request.header(header::AUTHORIZATION, user.clone());
            }
            if let Some(body) = &body {
                request = request
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
            }
            tracing::debug!(gm = %r.me, designated = %r.designated, %url, "forwarding to the designated GM");
            let last = i + 1 == bases.len();
            match service_kit::auth::send(&r.client, request, r.signing.as_ref()).await {
                Ok(a) if a.status().as_u16() == 503 && !last => {}
                Ok(a) => {
                    answered = Some((url, a));
                    break;
                }
                Err(e) if e.is_connect() && !last => {}
                Err(e) => return Routed::Answered(bad_gateway(&url, &e.to_string())),
            }
        }
        let Some((url, answer)) = answered else {
            return Routed::Answered(bad_gateway(base, "no address"));
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
            signing: None,
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

    /// A loopback address answering every request with `status`.
    fn fake_gm(status: &'static str) -> String {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.read(&mut [0u8; 4096]);
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        url
    }

    #[tokio::test]
    async fn a_designated_gm_with_a_standby_is_reached_where_it_serves() {
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}", listener.local_addr().expect("addr"))
        };
        let forward = |urls: String| async move {
            let r = route(1, Some(&urls));
            match Route::route(
                Some(&r),
                &HeaderMap::new(),
                reqwest::Method::GET,
                "/v1/lras/1",
                None,
            )
            .await
            {
                Routed::Answered(response) => response.status().as_u16(),
                Routed::Local => 0,
            }
        };
        // The primary dead: its standby answers.
        assert_eq!(
            forward(format!("{closed}|{}", fake_gm("200 OK"))).await,
            200
        );
        // The standby not in charge (503): the primary answers.
        let waiting = fake_gm("503 Service Unavailable");
        assert_eq!(
            forward(format!("{waiting}|{}", fake_gm("202 Accepted"))).await,
            202
        );
        // Neither serves: the last answer is relayed.
        assert_eq!(forward(format!("{closed}|{waiting}")).await, 503);
    }
}
