//! The credential itself: the shared secret or a role's key ([`ClusterSecret`]), the
//! headers internal calls carry, signing a request, and a worker's session and order key.

use super::signed;
use crate::roles::{Role, RoleCredential};
use anyhow::{bail, Context as _, Result};
use axum::http::HeaderValue;
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq as _;

/// The header carrying the cluster credential on internal calls.
pub const CLUSTER_HEADER: &str = "x-megha-cluster-token";
/// The header carrying a worker's session on its calls to the LM that issued it
/// (see [`WorkerSession`]).
pub const WORKER_SESSION_HEADER: &str = "x-megha-worker-session";
/// The header on a worker's registration carrying the key its LM must present on
/// every order to it (as [`WORKER_SESSION_HEADER`]): the worker's half of the
/// binding (see [`WorkerSession`]).
pub const ORDER_KEY_HEADER: &str = "x-megha-order-key";
/// The header on an LM's order to a worker: the HMAC-SHA256 of the request body
/// under the worker's order key (hex), so the key itself never travels on orders
/// and a relay that reads orders cannot make new ones ([`order_mac`]).
pub const ORDER_MAC_HEADER: &str = "x-megha-order-mac";

/// HMAC-SHA256 of `body` under `key`, hex: what an LM presents on an order to the
/// worker whose order key is `key`.
pub fn order_mac(key: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    crate::roles::hex(ring::hmac::sign(&key, body).as_ref())
}

/// True when `headers` carry the [`order_mac`] of `body` under `key` (compared in
/// constant time).
pub fn order_mac_valid(key: &[u8], body: &[u8], headers: &axum::http::HeaderMap) -> bool {
    let Some(presented) = headers
        .get(ORDER_MAC_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| unhex(t.trim()))
    else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    ring::hmac::verify(&key, body, &presented).is_ok()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
/// Environment variable holding the secret itself (the file variant is preferred).
pub const SECRET_ENV: &str = "MEGHA_CLUSTER_SECRET";
/// Paths no credential guards: they reveal no secret and no user's work.
pub const OPEN_PATHS: &[&str] = &["/healthz", "/metrics"];
/// The shortest secret accepted (bytes after trimming whitespace).
pub const MIN_SECRET_LEN: usize = 16;

/// This process's cluster credential: the shared secret, or its role's signing key
/// with every role's public key.
#[derive(Clone)]
pub struct ClusterSecret(Arc<Credential>);

enum Credential {
    /// Simple mode: one secret every role presents and accepts.
    Shared(Box<str>),
    /// Per-role keys: requests are signed, nothing is presented.
    Role(Box<RoleCredential>),
}

/// What a presented bearer credential is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presented {
    /// Not a credential of this cluster.
    Unknown,
    /// The shared secret (any role).
    Shared,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(<redacted>)")
    }
}

/// Who a process's internal calls on one link go to, when they are signed: the
/// role credential and the callee's role (see [`signed`]).
#[derive(Clone, Debug)]
pub struct Signing {
    secret: ClusterSecret,
    callee: Role,
}

impl Signing {
    /// Signing for calls to `callee`, when `secret` is a role credential (the shared
    /// secret is a default header of the client instead: nothing to sign).
    pub fn new(secret: Option<&ClusterSecret>, callee: Role) -> Option<Self> {
        let secret = secret?;
        secret.signer()?;
        Some(Signing {
            secret: secret.clone(),
            callee,
        })
    }

    /// Adds the signature header to `request` (built, not yet sent). A request that
    /// cannot be signed (a streaming body) goes unsigned, logged: the callee refuses it.
    pub fn sign(&self, request: &mut reqwest::Request) {
        if let Some(signer) = self.secret.signer() {
            if let Err(e) = signer.sign_request(request, self.callee) {
                tracing::error!(error = %e, url = %request.url(), "internal request not signed; its callee will refuse it");
            }
        }
    }
}

/// Sends `request` on `client`, signed for `signing`'s callee when given.
pub async fn send(
    client: &reqwest::Client,
    request: reqwest::RequestBuilder,
    signing: Option<&Signing>,
) -> reqwest::Result<reqwest::Response> {
    let mut request = request.build()?;
    if let Some(s) = signing {
        s.sign(&mut request);
    }
    client.execute(request).await
}

impl ClusterSecret {
    /// A secret from its text (surrounding whitespace dropped). `origin` names where
    /// it came from in the error.
    pub fn new(text: &str, origin: &str) -> Result<Self> {
        let text = text.trim();
        if text.len() < MIN_SECRET_LEN {
            bail!("{origin}: the cluster secret must be at least {MIN_SECRET_LEN} characters");
        }
        if HeaderValue::from_str(text).is_err() {
            bail!("{origin}: the cluster secret must be printable ASCII (e.g. base64)");
        }
        Ok(ClusterSecret(Arc::new(Credential::Shared(text.into()))))
    }

    /// A role credential (per-role keys).
    pub fn from_role(c: RoleCredential) -> Self {
        ClusterSecret(Arc::new(Credential::Role(Box::new(c))))
    }

    /// The role whose key this is; `None` for the shared secret.
    pub fn role(&self) -> Option<Role> {
        match &*self.0 {
            Credential::Shared(_) => None,
            Credential::Role(c) => Some(c.role),
        }
    }

    /// The process's number in its role its credential names (`None`: the shared
    /// secret, or a file for any process of the role).
    pub fn id(&self) -> Option<u16> {
        match &*self.0 {
            Credential::Shared(_) => None,
            Credential::Role(c) => c.id,
        }
    }

    /// This role's signing key (`None` for the shared secret).
    pub fn signer(&self) -> Option<&signed::Signer> {
        match &*self.0 {
            Credential::Shared(_) => None,
            Credential::Role(c) => Some(&c.signer),
        }
    }

    /// The cluster authority's public key and the nonces seen (`None` for the shared
    /// secret).
    pub fn verifier(&self) -> Option<&signed::Verifier> {
        match &*self.0 {
            Credential::Shared(_) => None,
            Credential::Role(c) => Some(&c.verifier),
        }
    }

    /// Who a caller presenting the bearer credential `presented` is (a role
    /// credential accepts no bearer credential: every role signs).
    pub fn caller(&self, presented: &[u8]) -> Presented {
        if self.matches(presented) {
            Presented::Shared
        } else {
            Presented::Unknown
        }
    }

    /// The secret of `file` if given, else of `MEGHA_CLUSTER_SECRET`, else none.
    pub fn load(file: Option<&Path>) -> Result<Option<Self>> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--cluster-secret-file {}", path.display()))?;
            let origin = format!("--cluster-secret-file {}", path.display());
            if RoleCredential::looks_like(&text) {
                return Ok(Some(Self::from_role(RoleCredential::parse(
                    &text, &origin,
                )?)));
            }
            return Self::new(&text, &origin).map(Some);
        }
        match std::env::var(SECRET_ENV) {
            Ok(text) => Self::new(&text, SECRET_ENV).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// True when `presented` is the shared secret (constant time in the secret's
    /// content); never for a role credential.
    pub fn matches(&self, presented: &[u8]) -> bool {
        match &*self.0 {
            Credential::Shared(s) => bool::from(s.as_bytes().ct_eq(presented)),
            Credential::Role(_) => false,
        }
    }

    /// The bearer header value to send: the shared secret (marked sensitive: never
    /// printed by the HTTP stack); `None` for a role credential, which signs instead.
    pub fn header_value(&self) -> Option<HeaderValue> {
        let Credential::Shared(s) = &*self.0 else {
            return None;
        };
        let mut v = HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static(""));
        v.set_sensitive(true);
        Some(v)
    }
}

/// Headers every internal call of a role carries: the shared secret in simple mode;
/// none without a secret or with a role credential (whose calls are signed one by
/// one, [`Signing`]). Give them to `reqwest::ClientBuilder::default_headers`.
pub fn client_headers(secret: Option<&ClusterSecret>) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(v) = secret.and_then(ClusterSecret::header_value) {
        headers.insert(CLUSTER_HEADER, v);
    }
    headers
}

/// A per-link key issued by a callee (issue 32), in both directions between a
/// worker and its LM. Worker -> LM: a random value the LM issues at each
/// registration (in the answer's [`WORKER_SESSION_HEADER`]) and binds to the slot it
/// assigned; the worker presents it on its reports and check-ins to that LM only,
/// and the LM takes a report only for the nodes of the slot whose session it
/// carries. So the worker role's credential, which every worker holds, no longer
/// lets one worker report on another's tasks. LM -> worker: the worker draws an
/// order key at start and gives it to its LM at registration
/// ([`ORDER_KEY_HEADER`]); it takes orders only carrying it, so the LM's role token
/// read at one worker orders no other worker. The LM keeps only its SHA-256; the
/// value is sent back to its issuer only (never to a callee that could reuse it).
///
/// Shared between a worker's links (registration stores it, reports and check-ins
/// send it); `Debug` hides it.
#[derive(Clone, Default)]
pub struct WorkerSession(Arc<std::sync::RwLock<Option<HeaderValue>>>, bool);

impl std::fmt::Debug for WorkerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerSession(<redacted>)")
    }
}

impl WorkerSession {
    /// An order key known beforehand (an LM's link to a worker: the key the worker
    /// gave at registration): never sent, each call carries the [`order_mac`] of
    /// its body under it instead.
    pub fn signing(value: HeaderValue) -> Self {
        let mut value = value;
        value.set_sensitive(true);
        WorkerSession(Arc::new(std::sync::RwLock::new(Some(value))), true)
    }

    /// The header a call with `body` carries: the session itself, or for a signing
    /// key the body's [`order_mac`].
    pub fn header_for(&self, body: &[u8]) -> Option<(&'static str, HeaderValue)> {
        let value = self.get()?;
        if !self.1 {
            return Some((WORKER_SESSION_HEADER, value));
        }
        let mac = HeaderValue::from_str(&order_mac(value.as_bytes(), body)).ok()?;
        Some((ORDER_MAC_HEADER, mac))
    }

    /// The session to present, if one was issued.
    pub fn get(&self) -> Option<HeaderValue> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Keeps the session an answer carries (a registration's), if any.
    pub fn take_from(&self, headers: &reqwest::header::HeaderMap) {
        if let Some(v) = headers.get(WORKER_SESSION_HEADER) {
            let mut v = v.clone();
            v.set_sensitive(true);
            *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(v);
        }
    }

    /// A new session for a registration: the value to send the worker (as a
    /// header, marked sensitive) and the SHA-256 the LM keeps.
    pub fn issue() -> Result<(HeaderValue, [u8; 32])> {
        use ring::rand::SecureRandom as _;
        let mut bytes = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("no randomness for a worker session"))?;
        let text = crate::roles::hex(&bytes);
        let digest = crate::roles::digest(text.as_bytes());
        let mut v = HeaderValue::from_str(&text)?;
        v.set_sensitive(true);
        Ok((v, digest))
    }

    /// The SHA-256 of the session a request presents, if any.
    pub fn presented(headers: &axum::http::HeaderMap) -> Option<[u8; 32]> {
        headers
            .get(WORKER_SESSION_HEADER)
            .map(|v| crate::roles::digest(v.as_bytes()))
    }
}
