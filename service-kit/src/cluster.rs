//! Which cluster a process belongs to, and the refusal of everything of another.
//!
//! Every internal message carries its sender's cluster name: in the codec's envelope
//! (`common::codec`), in the [`CLUSTER_NAME_HEADER`] of every internal HTTP call and
//! answer, and in the `app_id` of every broker message, whose exchanges and queues are
//! named after the cluster too (see [`crate::topology`]). A message of another cluster
//! is never applied: it is refused, counted in
//! `megha_<role>_foreign_cluster_messages_total` and logged (at most once per
//! [`LOG_EVERY`], with how many were refused since).
//!
//! - [`Cluster`]: the name and the refusal counter of one process (cheap to clone).
//! - [`require_same_cluster`]: an axum layer answering 421 to a call of another
//!   cluster (naming both) and stamping every answer with this cluster's name.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use common::codec::CodecError;
use common::ClusterName;
use serde::{de::DeserializeOwned, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The header naming the sender's cluster on internal calls and their answers.
pub const CLUSTER_NAME_HEADER: &str = "x-megha-cluster";
/// Refusals are logged at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Refusals {
    total: AtomicU64,
    /// When the last log line was written, and refusals since.
    log: Mutex<(Option<Instant>, u64)>,
}

/// The cluster of this process and its count of refused foreign messages.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub name: ClusterName,
    /// The role in metric names and log lines (`gm`, `lm`, `worker`, `loadgen`).
    pub role: &'static str,
    refusals: Arc<Refusals>,
}

impl Cluster {
    pub fn new(name: ClusterName, role: &'static str) -> Self {
        Cluster {
            name,
            role,
            refusals: Arc::default(),
        }
    }

    /// Messages of another cluster refused so far.
    pub fn foreign_messages(&self) -> u64 {
        self.refusals.total.load(Ordering::Relaxed)
    }

    /// Counts a refused message of cluster `theirs` that came through `via` (an HTTP
    /// path, an exchange) and logs it, rate-limited.
    pub fn refused(&self, via: &str, theirs: &str) {
        self.refusals.total.fetch_add(1, Ordering::Relaxed);
        let mut log = self.refusals.log.lock().unwrap_or_else(|p| p.into_inner());
        log.1 += 1;
        if log.0.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            return;
        }
        let refused = std::mem::take(&mut log.1);
        log.0 = Some(Instant::now());
        tracing::warn!(
            role = self.role,
            via,
            ours = %self.name,
            theirs,
            refused_since_last_log = refused,
            "message of another cluster refused (not applied); check --cluster-name / MEGHA_CLUSTER_NAME and the URLs of peers"
        );
    }

    /// `msg` in this cluster's envelope.
    pub fn encode<T: Serialize>(&self, msg: &T) -> Result<Vec<u8>, CodecError> {
        common::codec::encode(&self.name, msg)
    }

    /// Decodes a message received through `via`, counting and logging it when it is
    /// another cluster's.
    pub fn decode<T: DeserializeOwned>(&self, bytes: &[u8], via: &str) -> Result<T, CodecError> {
        let r = common::codec::decode(&self.name, bytes);
        if let Err(CodecError::ForeignCluster { found, .. }) = &r {
            self.refused(via, found);
        }
        r
    }

    /// The `/metrics` lines: `megha_<role>_foreign_cluster_messages_total`.
    pub fn render(&self, text: &mut crate::metrics::Page) {
        crate::metrics::single(
            text,
            &format!("megha_{}_foreign_cluster_messages_total", self.role),
            "counter",
            "Messages of another cluster refused (HTTP calls, broker messages), never applied.",
            self.foreign_messages() as f64,
        );
    }

    fn header_value(&self) -> HeaderValue {
        HeaderValue::from_str(self.name.as_str()).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The 421 answer to a call of cluster `theirs` (names both).
pub fn misdirected(ours: &ClusterName, role: &str, theirs: &str) -> Response {
    (
        StatusCode::MISDIRECTED_REQUEST,
        Json(serde_json::json!({
            "field": CLUSTER_NAME_HEADER,
            "error": format!("this {role} belongs to cluster `{ours}`, the caller to cluster `{theirs}`: give both the same --cluster-name (MEGHA_CLUSTER_NAME) or point the caller at a peer of its own cluster"),
        })),
    )
        .into_response()
}

async fn cluster_layer(State(cluster): State<Cluster>, req: Request, next: Next) -> Response {
    let theirs = req
        .headers()
        .get(CLUSTER_NAME_HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut resp = match theirs {
        Some(t) if t != cluster.name.as_str() => {
            cluster.refused(req.uri().path(), &t);
            misdirected(&cluster.name, cluster.role, &t)
        }
        _ => next.run(req).await,
    };
    resp.headers_mut()
        .insert(CLUSTER_NAME_HEADER, cluster.header_value());
    resp
}

/// Refuses (421) every call that names another cluster in [`CLUSTER_NAME_HEADER`];
/// calls naming none (a user's `curl`) pass, and internal bodies are checked again
/// by the codec. Every answer names this cluster.
pub fn require_same_cluster<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    cluster: Cluster,
) -> Router<S> {
    router.layer(axum::middleware::from_fn_with_state(cluster, cluster_layer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_envelopes_are_counted_and_never_decoded() {
        let blue = Cluster::new(ClusterName::new("blue").unwrap(), "gm");
        let green = Cluster::new(ClusterName::new("green").unwrap(), "gm");
        let bytes = green.encode(&7u32).unwrap();
        assert!(blue.decode::<u32>(&bytes, "test").unwrap_err().is_foreign());
        assert!(blue.decode::<u32>(&bytes, "test").is_err());
        assert_eq!(
            blue.decode::<u32>(&blue.encode(&8u32).unwrap(), "t")
                .unwrap(),
            8
        );
        assert_eq!(blue.foreign_messages(), 2);
        let mut page = crate::metrics::Page::new();
        blue.render(&mut page);
        let text = page.encode();
        assert!(
            text.contains("megha_gm_foreign_cluster_messages_total 2"),
            "{text}"
        );
    }
}
