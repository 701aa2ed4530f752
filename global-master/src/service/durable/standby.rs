//! A standby GM (`--standby`): a second process for the same GM id that waits for
//! the primary's journal and takes it over when the primary dies.
//!
//! The arbiter is the journal file itself: redb holds an exclusive OS lock
//! (`flock`) on `journal.redb` while a process has it open, and `Database::create`
//! on a locked file fails at once with `DatabaseAlreadyOpen`. The standby tries
//! every `--standby-poll-ms`; the kernel releases the lock when the primary's
//! process ends, however it ends (-9 included), and not before. So on one host (or
//! a volume whose locks every host honours) two processes never hold the journal:
//! no split brain. The limits: a frozen primary (SIGSTOP, a hung disk) keeps the
//! lock, so no takeover happens until it is killed; and hosts that do not share the
//! volume cannot use this (RabbitMQ's single-active-consumer would elect one
//! consumer among hosts, but the journal would then have to live in the broker,
//! not on a disk only one host sees). For network volumes whose locks are leases
//! (a primary cut off may still run after its lease expired), the LMs are the
//! second fence: the taker starts a newer life than the journal's last
//! ([`crate::service::durable::journal::Journal::begin_life`]), and an LM that saw it refuses the
//! older life's launch batches and preemptions (counted there as
//! `megha_lm_older_gm_life_refused_total`).
//!
//! While it waits, the standby serves its HTTP port through [`Front`]: `/healthz`
//! answers 503 `{"status":"standby","ready":false}` (not ready for Kubernetes and
//! compose health checks), `/metrics` shows `megha_gm_standby 1`, and every other
//! route 503 with `Retry-After` and the error `standby`. After the takeover the
//! same listener serves the full API.
//!
//! The other side of the fence ([`Fence`]): a GM whose launch or preemption an LM
//! refuses because it saw a newer life of this GM (409) was replaced; it stops at
//! once, without draining (its queued work belongs to the newer life, which has it
//! in its journal), and exits with an error.

use crate::service::durable::journal::{Journal, JournalError, Recovered};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use common::ClusterName;
use serde_json::json;
use service_kit::links::LinkError;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tower::ServiceExt as _;

/// Whether this process is (still) a standby, and its takeovers, for `/metrics`.
#[derive(Debug, Default)]
pub struct StandbyStatus {
    waiting: AtomicBool,
    takeovers: AtomicU64,
}

impl StandbyStatus {
    /// Adds `megha_gm_standby` and `megha_gm_takeovers_total` to a scrape.
    pub fn render(status: Option<&StandbyStatus>, page: &mut service_kit::metrics::Page) {
        let (waiting, takeovers) = status.map_or((false, 0), |s| {
            (
                s.waiting.load(Ordering::Relaxed),
                s.takeovers.load(Ordering::Relaxed),
            )
        });
        service_kit::metrics::single(
            page,
            "megha_gm_standby",
            "gauge",
            "1 while this process is a standby waiting for its GM's journal.",
            f64::from(u8::from(waiting)),
        );
        service_kit::metrics::single(
            page,
            "megha_gm_takeovers_total",
            "counter",
            "Journals this process took over as a standby (0 or 1).",
            takeovers as f64,
        );
    }
}

/// What a standby's listener serves: its own answers until [`Front::take_over`],
/// then the full API's.
#[derive(Clone, Debug)]
pub struct Front {
    pub status: Arc<StandbyStatus>,
    app: Arc<OnceLock<Router>>,
    /// The GM id (shown on `/healthz`; the journal's path is not: an open page
    /// shows no data path, issue 32).
    gm: u16,
}

impl Front {
    pub fn new(gm: u16, journal: &Path) -> Front {
        tracing::info!(gm, journal = %journal.display(), "standby: waiting for the journal");
        let status = StandbyStatus::default();
        status.waiting.store(true, Ordering::Relaxed);
        Front {
            status: Arc::new(status),
            app: Arc::new(OnceLock::new()),
            gm,
        }
    }

    /// The router to serve.
    pub fn router(&self) -> Router {
        Router::new().fallback(front).with_state(self.clone())
    }

    /// From now on, every request goes to `app`.
    pub fn take_over(&self, app: Router) {
        if self.app.set(app).is_ok() {
            self.status.waiting.store(false, Ordering::Relaxed);
            self.status.takeovers.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn front(State(f): State<Front>, request: Request) -> Response {
    if let Some(app) = f.app.get() {
        return match app.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    match request.uri().path() {
        "/healthz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "standby",
                "ready": false,
                "gm": f.gm,
            })),
        )
            .into_response(),
        "/metrics" => {
            let mut page = service_kit::metrics::Page::new();
            StandbyStatus::render(Some(&f.status), &mut page);
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            Json(json!({
                "error": format!("standby: this process stands by for GM {} and serves nothing until the primary dies; send to the primary", f.gm),
            })),
        )
            .into_response(),
    }
}

/// Tries to open the journal in `dir` every `poll` until no other process holds
/// it; any other error ends the wait. Returns it with what it held and the time
/// waited.
pub async fn wait_for_journal(
    dir: &Path,
    cluster: &ClusterName,
    poll: Duration,
) -> Result<(Journal, Vec<Recovered>, Duration), JournalError> {
    let started = Instant::now();
    let mut tries: u64 = 0;
    loop {
        let dir = dir.to_path_buf();
        let cluster = cluster.clone();
        // redb reads (and may repair) the file: off the runtime's threads.
        let opened = tokio::task::spawn_blocking(move || Journal::open(&dir, &cluster))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        match opened {
            Ok((journal, recovered)) => return Ok((journal, recovered, started.elapsed())),
            Err(e) if e.is_locked() => {
                tries += 1;
                if tries == 1 {
                    tracing::info!(error = %e, "standby: the journal is held by the primary; waiting for it");
                }
                tokio::time::sleep(poll).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Trips when an LM says a newer life of this GM took over (see the module
/// documentation); the service then stops without draining.
#[derive(Debug)]
pub struct Fence {
    tripped: tokio::sync::watch::Sender<bool>,
}

impl Default for Fence {
    fn default() -> Self {
        Fence {
            tripped: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Fence {
    /// Trips the fence if `error` is an LM's refusal of an older life of this GM
    /// (HTTP 409 naming the fence); true if it did.
    pub fn check(&self, error: &LinkError) -> bool {
        let LinkError::Refused(what) = error else {
            return false;
        };
        if !(what.contains("409") && what.contains("fenced")) {
            return false;
        }
        if !self.tripped.send_replace(true) {
            tracing::error!(refusal = %what, "fenced: an LM has seen a newer life of this GM (a standby took over, or another process runs this GM id); stopping without draining");
        }
        true
    }

    pub fn is_tripped(&self) -> bool {
        *self.tripped.borrow()
    }

    /// Resolves once the fence trips.
    pub async fn tripped(&self) {
        let mut seen = self.tripped.subscribe();
        let _ = seen.wait_for(|t| *t).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_lms_refusal_of_an_older_life_trips_the_fence() {
        let fence = Fence::default();
        assert!(!fence.check(&LinkError::Refused(
            "lm: 422 Unprocessable Entity: launch batch is addressed to lm1".into()
        )));
        assert!(!fence.check(&LinkError::Failed("lm: 503: not ready".into())));
        assert!(!fence.is_tripped());
        let refusal = "http://lm/v1/messages: 409 Conflict: {\"error\":\"request of gm0 life 5 refused: this LM has seen its newer life 9 (the sender was replaced and is fenced)\"}";
        assert!(fence.check(&LinkError::Refused(refusal.into())));
        assert!(fence.is_tripped());
        // Resolves at once once tripped.
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(fence.tripped());
    }

    /// Issue 32: a standby's open `/healthz` says it stands by, never where its
    /// data lives.
    #[test]
    fn a_standbys_healthz_shows_no_data_path() {
        let front = Front::new(3, Path::new("/secret/place/gm3-data"));
        let answer = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(async {
                let request = Request::builder()
                    .uri("/healthz")
                    .body(axum::body::Body::empty())
                    .expect("request");
                let response = front.router().oneshot(request).await.expect("answer");
                axum::body::to_bytes(response.into_body(), 1 << 16)
                    .await
                    .expect("body")
            });
        let text = String::from_utf8_lossy(&answer);
        assert!(text.contains("standby"), "{text}");
        assert!(!text.contains("/secret/place"), "{text}");
    }
}
