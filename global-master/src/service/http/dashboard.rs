//! The live web dashboard every GM serves at `/`: one HTML page, a stylesheet and
//! a script, written by hand (no framework, no CDN) and compiled into the binary.
//! The page holds no data: its script polls this GM's JSON API (`/v1/overview`,
//! `/v1/nodes`, `/v1/cluster`, `/v1/pending`) every few seconds. These three routes
//! need no token ([`PAGE_PATHS`]: they are static); the API calls the script makes do, when the GM
//! has a tokens file: the page asks for one and keeps it in the tab's
//! `sessionStorage`. See `docs/dashboard.md`.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

/// The page's paths: open (the auth layer lets them through like `/healthz`), since
/// they carry no data.
pub use crate::service::admission::users::PAGE_PATHS;

/// The page's routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route(
            "/dashboard.js",
            get(|| asset("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route(
            "/dashboard.css",
            get(|| asset("text/css; charset=utf-8", STYLE)),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
