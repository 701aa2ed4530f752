//! Request bodies bounded per request and in total across concurrent requests, so
//! that many large bodies at once cannot take a service to hundreds of MB.
//!
//! A request declares its size (`Content-Length`; one without is counted at the
//! per-request cap). Over the per-request cap it is refused with 413; when the bytes
//! of the bodies being handled would pass the total, with 503 and `Retry-After: 1`.
//! The bytes are held until the answer is made. Refusals are counted
//! (`megha_<role>_body_budget_refused_total{reason}`) and logged at debug level.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The caps of one service.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    per_request: usize,
    total: usize,
    permits: Arc<Semaphore>,
    role: &'static str,
    too_large: Arc<AtomicU64>,
    busy: Arc<AtomicU64>,
}

impl BodyBudget {
    /// `per_request` and `total` in bytes (`total` at least `per_request`).
    pub fn new(per_request: usize, total: usize, role: &'static str) -> Self {
        let total = total.max(per_request).min(Semaphore::MAX_PERMITS);
        BodyBudget {
            per_request,
            total,
            permits: Arc::new(Semaphore::new(total)),
            role,
            too_large: Arc::default(),
            busy: Arc::default(),
        }
    }

    /// Body bytes of requests being handled now.
    pub fn in_use(&self) -> usize {
        self.total - self.permits.available_permits()
    }

    /// The `/metrics` lines.
    pub fn render(&self, text: &mut crate::metrics::Page) {
        crate::metrics::family(
            text,
            &format!("megha_{}_body_budget_refused_total", self.role),
            "counter",
            "Requests refused for their body: too large (413), or too many bytes of bodies at once (503).",
            "reason",
            &[
                ("too_large".into(), self.too_large.load(Ordering::Relaxed) as f64),
                ("busy".into(), self.busy.load(Ordering::Relaxed) as f64),
            ],
        );
        crate::metrics::single(
            text,
            &format!("megha_{}_body_bytes_in_use", self.role),
            "gauge",
            "Body bytes of the requests being handled.",
            self.in_use() as f64,
        );
    }
}

fn refuse(status: StatusCode, why: String) -> Response {
    let mut resp = (
        status,
        Json(serde_json::json!({ "field": "body", "error": why })),
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

async fn budget_layer(State(b): State<BodyBudget>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let size = match declared {
        Some(n) => n,
        None if req.method() == axum::http::Method::GET => 0,
        None => b.per_request,
    };
    if size == 0 {
        return next.run(req).await;
    }
    if size > b.per_request {
        b.too_large.fetch_add(1, Ordering::Relaxed);
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body is {size} bytes; at most {} are accepted",
                b.per_request
            ),
        );
    }
    let Ok(permit) = b.permits.clone().try_acquire_many_owned(size as u32) else {
        b.busy.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            size,
            in_use = b.in_use(),
            total = b.total,
            "request body refused: budget in use"
        );
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many request bytes at once ({} of {} in use); retry later",
                b.in_use(),
                b.total
            ),
        );
    };
    let resp = next.run(req).await;
    drop(permit);
    resp
}

/// Applies `budget` to every route of `router` (and the per-request cap to the body
/// extractors, which stop reading past it).
pub fn limit_bodies<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    budget: BodyBudget,
) -> Router<S> {
    let per_request = budget.per_request;
    router
        .layer(axum::extract::DefaultBodyLimit::max(per_request))
        .layer(axum::middleware::from_fn_with_state(budget, budget_layer))
}
