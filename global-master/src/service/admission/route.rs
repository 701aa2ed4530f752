//! Requests another GM answers, forwarded over HTTP with the caller's token and
//! relayed as they came:
//!
//! - to the designated GM: LRA submissions and jobs with GUARANTEED (or
//!   long_running) tasks, which it places ([`to_designated`]);
//! - to a job's owner, the GM whose number the job id carries in its top 16 bits:
//!   every request naming a job of another GM (its status, tasks, logs, cancel),
//!   so that any GM answers for any job of the cluster ([`to_owner`]).
//!
//! No loops: a GM never forwards a request it was forwarded (it carries
//! [`FORWARDED_BY`]); it answers 421 naming the misconfiguration when such a request
//! is not its own to answer. An owner that does not answer is a 503 naming it.
//! Layout: the designated GM's routing (here), the owner's ([`owner`]), whom a GM
//! forwards to ([`peers`]), the relay of a request and its answer ([`relay`]).

mod owner;
mod peers;
mod relay;

pub use owner::{to_owner, ForOwner};
pub use peers::{job_owner, ForwardCounters, PollCounters, Route, FORWARDED_BY};
pub use relay::{get_json, NoAnswer};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// What to do with a request for the designated GM.
#[derive(Debug)]
pub enum Routed {
    /// Handle it here.
    Local,
    /// Already answered (forwarded and relayed, or refused).
    Answered(Response),
}

/// Handles the request here when this GM is the designated one; otherwise
/// forwards `method path` with `body` to it and relays the answer.
pub async fn to_designated(
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
    let request = relay::Request {
        method,
        path,
        body,
        stream: false,
    };
    Routed::Answered(relay::relay(r, r.designated, base, headers, request).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::GmId;
    use futures_util::FutureExt as _;

    fn route(me: u16, url: Option<&str>) -> Route {
        Route {
            me: GmId(me),
            designated: GmId(0),
            designated_url: url.map(Into::into),
            gm_urls: Vec::new(),
            client: reqwest::Client::new(),
            streaming: reqwest::Client::new(),
            signing: None,
            counters: Default::default(),
        }
    }

    /// The status of the answer, for decisions taken without any I/O.
    fn decide(r: Option<&Route>, headers: &HeaderMap) -> Option<u16> {
        let routed = to_designated(r, headers, reqwest::Method::GET, "/v1/lras/1", None)
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
            match to_designated(
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
