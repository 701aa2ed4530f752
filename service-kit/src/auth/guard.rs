//! Checking the cluster credential of internal calls: [`ClusterGuard`], the axum
//! layer [`require_cluster`] over a whole router, the refusals, their counters and
//! their answers.

use super::secret::{ClusterSecret, Presented, CLUSTER_HEADER, OPEN_PATHS};
use super::signed::{self, SignatureRefusal, SIGNATURE_HEADER};
use crate::roles::Role;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credential presented.
    Missing,
    /// A credential that is not the cluster secret.
    Wrong,
    /// A valid credential of a role that may not call this endpoint (403).
    Role(Role),
    /// A signed request whose signature does not hold (see [`signed`]).
    Signature(SignatureRefusal),
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Wrong => "wrong",
            Refusal::Role(_) => "role",
            Refusal::Signature(SignatureRefusal::Stale(_)) => "stale",
            Refusal::Signature(SignatureRefusal::Replayed) => "replayed",
            Refusal::Signature(SignatureRefusal::Busy) => "busy",
            Refusal::Signature(_) => "signature",
        }
    }
}

/// The largest signed request body a callee reads to check its signature (the
/// services' own body limit).
pub const SIGNED_BODY_MAX: usize = 64 * 1024 * 1024;

/// Refusal counters of one process, rendered on `/metrics`.
#[derive(Debug, Default)]
pub struct AuthCounters {
    pub missing: AtomicU64,
    pub wrong: AtomicU64,
    /// Authenticated but not allowed (a user's queue, a worker's callback network).
    pub forbidden: AtomicU64,
    /// A signed request: malformed, or its signature does not hold.
    pub signature: AtomicU64,
    /// A signed request out of the time window.
    pub stale: AtomicU64,
    /// A signed request whose nonce was seen already.
    pub replayed: AtomicU64,
}

impl AuthCounters {
    pub fn count(&self, r: Refusal) {
        match r {
            Refusal::Missing => &self.missing,
            Refusal::Wrong => &self.wrong,
            Refusal::Role(_) => &self.forbidden,
            Refusal::Signature(SignatureRefusal::Stale(_)) => &self.stale,
            Refusal::Signature(SignatureRefusal::Replayed | SignatureRefusal::Busy) => {
                &self.replayed
            }
            Refusal::Signature(_) => &self.signature,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

/// Checks the cluster credential of internal calls.
#[derive(Clone, Debug)]
pub struct ClusterGuard {
    /// `None`: open mode (loopback only, see [`open_mode_allowed`](super::open_mode_allowed)).
    pub secret: Option<ClusterSecret>,
    /// The role, in log lines (`gm`, `lm`, `worker`).
    pub role: &'static str,
    pub counters: Arc<AuthCounters>,
    /// The roles that may call a path (with per-role credentials; the shared secret
    /// lets any holder call anything). Default: every role.
    pub callers: fn(&str) -> &'static [Role],
}

/// What a signature header alone refuses: a time out of the window, a role not
/// allowed on the path (the signature itself needs the body).
fn precheck(p: &signed::Presented, allowed: &[Role], now_ms: u64) -> Result<(), Refusal> {
    p.fresh(now_ms).map_err(Refusal::Signature)?;
    let claimed = p.claimed().role;
    if allowed.contains(&claimed) {
        Ok(())
    } else {
        Err(Refusal::Role(claimed))
    }
}

/// Every role may call every path (the default of [`ClusterGuard::callers`]).
pub fn any_role(_: &str) -> &'static [Role] {
    Role::ALL
}

impl ClusterGuard {
    pub fn new(secret: Option<ClusterSecret>, role: &'static str) -> Self {
        ClusterGuard {
            secret,
            role,
            counters: Arc::default(),
            callers: any_role,
        }
    }

    /// The same guard, letting only `callers(path)` call each path.
    pub fn with_callers(mut self, callers: fn(&str) -> &'static [Role]) -> Self {
        self.callers = callers;
        self
    }

    /// Accepts a call carrying a valid credential of any role (anything in open
    /// mode).
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_role(headers, Role::ALL)
    }

    /// Accepts a call carrying the shared secret (anything in open mode), judging by
    /// its headers alone. With a role credential no header alone suffices: use
    /// [`Self::authenticate`], which checks the signature over the body too.
    pub fn check_role(&self, headers: &HeaderMap, allowed: &[Role]) -> Result<(), Refusal> {
        let Some(secret) = &self.secret else {
            return Ok(());
        };
        if secret.verifier().is_some() {
            let Some(v) = headers.get(SIGNATURE_HEADER) else {
                return Err(Refusal::Missing);
            };
            let p = signed::Presented::parse(v.as_bytes()).map_err(Refusal::Signature)?;
            return precheck(&p, allowed, signed::now_ms());
        }
        let Some(v) = headers.get(CLUSTER_HEADER) else {
            return Err(Refusal::Missing);
        };
        match secret.caller(v.as_bytes()) {
            Presented::Unknown => Err(Refusal::Wrong),
            Presented::Shared => Ok(()),
        }
    }

    /// Accepts a call that one of `allowed` signed for this role (with a role
    /// credential: fresh, its certificate the cluster authority's, its signature
    /// over method, target and body valid, its nonce new), or that carries the
    /// shared secret; anything in open mode. Returns the request to pass on (its
    /// body read once to check it, and put back), carrying the signer's
    /// [`signed::Identity`] as an extension when it was signed.
    pub async fn authenticate(&self, req: Request, allowed: &[Role]) -> Result<Request, Refusal> {
        let Some(verifier) = self.secret.as_ref().and_then(ClusterSecret::verifier) else {
            self.check_role(req.headers(), allowed)?;
            return Ok(req);
        };
        let Some(me) = Role::ALL.iter().copied().find(|r| r.name() == self.role) else {
            return Err(Refusal::Signature(SignatureRefusal::Bad));
        };
        let (parts, body) = req.into_parts();
        let header = parts
            .headers
            .get(SIGNATURE_HEADER)
            .ok_or(Refusal::Missing)?;
        let p = signed::Presented::parse(header.as_bytes()).map_err(Refusal::Signature)?;
        let now = signed::now_ms();
        // What the header alone refuses is refused before the body is read.
        precheck(&p, allowed, now)?;
        let Ok(body) = axum::body::to_bytes(body, SIGNED_BODY_MAX).await else {
            return Err(Refusal::Signature(SignatureRefusal::Malformed));
        };
        let target = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |pq| pq.as_str());
        let signer = verifier
            .verify(
                &p,
                &signed::Signed {
                    callee: me,
                    method: parts.method.as_str(),
                    target,
                    body: &body,
                },
                now,
            )
            .map_err(Refusal::Signature)?;
        let mut req = Request::from_parts(parts, axum::body::Body::from(body));
        req.extensions_mut().insert(signer);
        Ok(req)
    }

    /// Counts and logs a refusal (method, path and peer; never the credential) and
    /// makes the 401 answer.
    pub fn refuse(
        &self,
        r: Refusal,
        method: &str,
        path: &str,
        peer: Option<SocketAddr>,
    ) -> Response {
        self.counters.count(r);
        let peer = peer.map(|p| p.to_string());
        if let Refusal::Role(caller) = r {
            tracing::warn!(
                role = self.role,
                method,
                path,
                peer = peer.as_deref().unwrap_or("?"),
                caller = caller.name(),
                "internal call refused: this role's credential may not call this endpoint"
            );
            let signs = self.secret.as_ref().is_some_and(|s| s.verifier().is_some());
            return forbidden(
                if signs {
                    SIGNATURE_HEADER
                } else {
                    CLUSTER_HEADER
                },
                &format!("the {caller} credential may not call {method} {path}"),
            );
        }
        tracing::warn!(
            role = self.role,
            method,
            path,
            peer = peer.as_deref().unwrap_or("?"),
            credential = r.label(),
            "internal call refused: no valid cluster credential"
        );
        let signs = self.secret.as_ref().is_some_and(|s| s.verifier().is_some());
        let needs = if signs {
            format!("a request signed by a role's key ({SIGNATURE_HEADER})")
        } else {
            format!("the cluster credential ({CLUSTER_HEADER})")
        };
        let what = match r {
            Refusal::Missing => "missing credential".to_owned(),
            Refusal::Signature(SignatureRefusal::Stale(off)) => format!(
                "stale signature: its time is {off} s from this host's clock (at most {} s allowed; synchronise the hosts' clocks)",
                signed::MAX_SKEW.as_secs()
            ),
            Refusal::Signature(SignatureRefusal::Replayed) => {
                "replayed request: this signature's nonce was seen already".to_owned()
            }
            Refusal::Signature(SignatureRefusal::Busy) => {
                "too many signed requests within the time window".to_owned()
            }
            Refusal::Signature(_) => {
                "bad signature: not signed by a role's key for this method, path, body and callee"
                    .to_owned()
            }
            _ => "wrong credential".to_owned(),
        };
        unauthorized(&format!("{what}: this endpoint needs {needs}"))
    }

    /// Appends the refusal counters and the open-mode gauge to a metrics page.
    pub fn render(&self, text: &mut crate::metrics::Page) {
        render_counters(&self.counters, self.secret.is_none(), text);
    }
}

/// The `/metrics` lines of `counters`: `megha_auth_refused_total{reason=...}` and
/// `megha_auth_open_mode`.
pub fn render_counters(counters: &AuthCounters, open: bool, text: &mut crate::metrics::Page) {
    let refused = [
        ("missing", &counters.missing),
        ("wrong", &counters.wrong),
        ("forbidden", &counters.forbidden),
        ("signature", &counters.signature),
        ("stale", &counters.stale),
        ("replayed", &counters.replayed),
    ]
    .map(|(reason, c)| (reason.to_owned(), c.load(Ordering::Relaxed) as f64));
    crate::metrics::family(
        text,
        "megha_auth_refused_total",
        "counter",
        "Calls refused: missing or wrong credential, bad, stale or replayed signature (401), not allowed (403).",
        "reason",
        &refused,
    );
    crate::metrics::single(
        text,
        "megha_auth_open_mode",
        "gauge",
        "1 when this process runs without credentials (loopback only).",
        f64::from(u8::from(open)),
    );
}

/// A 401 with a JSON reason.
pub fn unauthorized(why: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
        Json(serde_json::json!({"error": why})),
    )
        .into_response()
}

/// A 403 with a JSON reason naming the field at fault.
pub fn forbidden(field: &str, why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(serde_json::json!({"field": field, "error": why})),
    )
        .into_response()
}

/// The peer address of a request, when the server was started with connect info.
pub fn peer(req: &Request) -> Option<SocketAddr> {
    req.extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
}

async fn guard_layer(State(guard): State<ClusterGuard>, req: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let (method, path, from) = (
        req.method().clone(),
        req.uri().path().to_owned(),
        peer(&req),
    );
    match guard.authenticate(req, (guard.callers)(&path)).await {
        Ok(req) => next.run(req).await,
        Err(r) => guard.refuse(r, method.as_str(), &path, from),
    }
}

/// Guards every route of `router` (present and future) with the cluster credential,
/// except [`OPEN_PATHS`]; unknown paths answer 401 too, revealing nothing.
pub fn require_cluster<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    guard: ClusterGuard,
) -> Router<S> {
    router.layer(axum::middleware::from_fn_with_state(guard, guard_layer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn secrets_are_checked_and_never_printed() {
        let s = ClusterSecret::new(" 0123456789abcdef\n", "test").expect("valid");
        assert!(s.matches(b"0123456789abcdef"));
        assert!(!s.matches(b"0123456789abcdeg"));
        assert!(!s.matches(b"0123456789abcde"));
        assert!(!format!("{s:?}").contains("0123"));
        let err = ClusterSecret::new("short", "MEGHA_CLUSTER_SECRET").expect_err("short");
        assert!(err.to_string().contains("MEGHA_CLUSTER_SECRET"), "{err}");
        let guard = ClusterGuard::new(Some(s), "lm");
        let mut h = HeaderMap::new();
        assert_eq!(guard.check(&h), Err(Refusal::Missing));
        h.insert(
            CLUSTER_HEADER,
            HeaderValue::from_static("nope-nope-nope-nope"),
        );
        assert_eq!(guard.check(&h), Err(Refusal::Wrong));
        h.insert(CLUSTER_HEADER, HeaderValue::from_static("0123456789abcdef"));
        assert_eq!(guard.check(&h), Ok(()));
        assert_eq!(
            ClusterGuard::new(None, "lm").check(&HeaderMap::new()),
            Ok(())
        );
    }
}
