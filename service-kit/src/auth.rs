//! The cluster credential: what every role presents on its internal calls (GM -> LM,
//! LM -> worker, worker -> LM, LM -> GM, GM -> GM forwarding) and requires on its
//! internal endpoints: one shared secret (simple mode), or a token per role (see
//! [`crate::roles`]: then each endpoint names the roles that may call it).
//!
//! - [`ClusterSecret`]: read from `--cluster-secret-file` / `MEGHA_CLUSTER_SECRET_FILE`
//!   or `MEGHA_CLUSTER_SECRET` (never a flag: a command line is visible to every
//!   local user); compared in constant time (`subtle`); its `Debug` hides it.
//! - [`ClusterGuard`]: checks the [`CLUSTER_HEADER`] of a request, counts and logs
//!   refusals (never the presented value), renders its counters for `/metrics`.
//! - [`require_cluster`]: an axum layer over a whole router, so that every route a
//!   role adds later is guarded by default; only [`OPEN_PATHS`] stay open.
//! - [`open_mode_allowed`]: without a secret a role runs open (a loud warning) only
//!   when it listens on loopback.
//! - [`WorkerNetworks`]: the networks a worker may name as its callback URL.

use crate::roles::{Role, RoleCredential, RoleDigests};
use anyhow::{bail, Context as _, Result};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use subtle::ConstantTimeEq as _;

/// The header carrying the cluster credential on internal calls.
pub const CLUSTER_HEADER: &str = "x-megha-cluster-token";
/// Environment variable holding the secret itself (the file variant is preferred).
pub const SECRET_ENV: &str = "MEGHA_CLUSTER_SECRET";
/// Paths no credential guards: they reveal no secret and no user's work.
pub const OPEN_PATHS: &[&str] = &["/healthz", "/metrics"];
/// The shortest secret accepted (bytes after trimming whitespace).
pub const MIN_SECRET_LEN: usize = 16;

/// This process's cluster credential: the shared secret, or its role's token with
/// every role's digest.
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>, Option<Arc<RoleCredentialInfo>>);

/// What a presented credential is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presented {
    /// Not a credential of this cluster.
    Unknown,
    /// The shared secret (any role).
    Shared,
    /// This role's token.
    Role(Role),
}

/// The public part of a role credential: whose token, and who is who.
#[derive(Debug)]
pub struct RoleCredentialInfo {
    pub role: Role,
    pub digests: RoleDigests,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(<redacted>)")
    }
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
        Ok(ClusterSecret(text.into(), None))
    }

    /// The role whose token this is; `None` for the shared secret.
    pub fn role(&self) -> Option<Role> {
        self.1.as_ref().map(|r| r.role)
    }

    /// Who a caller presenting `presented` is.
    pub fn caller(&self, presented: &[u8]) -> Presented {
        match &self.1 {
            None if self.matches(presented) => Presented::Shared,
            None => Presented::Unknown,
            Some(r) => r
                .digests
                .role_of(presented)
                .map_or(Presented::Unknown, Presented::Role),
        }
    }

    /// The secret of `file` if given, else of `MEGHA_CLUSTER_SECRET`, else none.
    pub fn load(file: Option<&Path>) -> Result<Option<Self>> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--cluster-secret-file {}", path.display()))?;
            let origin = format!("--cluster-secret-file {}", path.display());
            if RoleCredential::looks_like(&text) {
                let c = RoleCredential::parse(&text, &origin)?;
                let mut secret = Self::new(&c.token, &origin)?;
                secret.1 = Some(Arc::new(RoleCredentialInfo {
                    role: c.role,
                    digests: c.digests,
                }));
                return Ok(Some(secret));
            }
            return Self::new(&text, &origin).map(Some);
        }
        match std::env::var(SECRET_ENV) {
            Ok(text) => Self::new(&text, SECRET_ENV).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// True when `presented` is the secret (constant time in the secret's content).
    pub fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented))
    }

    /// The header value to send (marked sensitive: never printed by the HTTP stack).
    pub fn header_value(&self) -> HeaderValue {
        let mut v = HeaderValue::from_str(&self.0).unwrap_or_else(|_| HeaderValue::from_static(""));
        v.set_sensitive(true);
        v
    }
}

/// Headers every internal call of a role carries (none without a secret); give them
/// to `reqwest::ClientBuilder::default_headers`.
pub fn client_headers(secret: Option<&ClusterSecret>) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(s) = secret {
        headers.insert(CLUSTER_HEADER, s.header_value());
    }
    headers
}

/// Environment variable holding a user's API token (the GM's `--tokens-file` maps it
/// to a user); `--token-file` / `MEGHA_TOKEN_FILE` name a file holding it instead.
pub const TOKEN_ENV: &str = "MEGHA_TOKEN";

/// A user's API token: from `file` if given, else `MEGHA_TOKEN`, else none.
pub fn user_token(file: Option<&Path>) -> Result<Option<String>> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--token-file {}", path.display()))?,
        None => match std::env::var(TOKEN_ENV) {
            Ok(t) => t,
            Err(_) => return Ok(None),
        },
    };
    let token = token.trim().to_owned();
    if token.is_empty() || HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
        bail!("the API token (--token-file or {TOKEN_ENV}) is empty or not printable ASCII");
    }
    Ok(Some(token))
}

/// An HTTP client for the GM API whose every request carries `token` as a bearer
/// token (marked sensitive); `timeout` bounds each request (`None`: no bound).
pub fn user_client(timeout: Option<std::time::Duration>, token: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(t) = token {
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {t}")) {
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
    }
    let mut b = crate::tls::client_builder().default_headers(headers);
    if let Some(t) = timeout {
        b = b.timeout(t);
    }
    b.connect_timeout(std::time::Duration::from_secs(2))
        .pool_idle_timeout(std::time::Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default()
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credential presented.
    Missing,
    /// A credential that is not the cluster secret.
    Wrong,
    /// A valid credential of a role that may not call this endpoint (403).
    Role(Role),
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Wrong => "wrong",
            Refusal::Role(_) => "role",
        }
    }
}

/// Refusal counters of one process, rendered on `/metrics`.
#[derive(Debug, Default)]
pub struct AuthCounters {
    pub missing: AtomicU64,
    pub wrong: AtomicU64,
    /// Authenticated but not allowed (a user's queue, a worker's callback network).
    pub forbidden: AtomicU64,
}

impl AuthCounters {
    pub fn count(&self, r: Refusal) {
        match r {
            Refusal::Missing => &self.missing,
            Refusal::Wrong => &self.wrong,
            Refusal::Role(_) => &self.forbidden,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

/// Checks the cluster credential of internal calls.
#[derive(Clone, Debug)]
pub struct ClusterGuard {
    /// `None`: open mode (loopback only, see [`open_mode_allowed`]).
    pub secret: Option<ClusterSecret>,
    /// The role, in log lines (`gm`, `lm`, `worker`).
    pub role: &'static str,
    pub counters: Arc<AuthCounters>,
    /// The roles that may call a path (with per-role credentials; the shared secret
    /// lets any holder call anything). Default: every role.
    pub callers: fn(&str) -> &'static [Role],
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

    /// Accepts a call carrying the shared secret, or the token of one of `allowed`
    /// (anything in open mode).
    pub fn check_role(&self, headers: &HeaderMap, allowed: &[Role]) -> Result<(), Refusal> {
        let Some(secret) = &self.secret else {
            return Ok(());
        };
        let Some(v) = headers.get(CLUSTER_HEADER) else {
            return Err(Refusal::Missing);
        };
        match secret.caller(v.as_bytes()) {
            Presented::Unknown => Err(Refusal::Wrong),
            Presented::Shared => Ok(()),
            Presented::Role(role) if allowed.contains(&role) => Ok(()),
            Presented::Role(role) => Err(Refusal::Role(role)),
        }
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
            return forbidden(
                CLUSTER_HEADER,
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
        unauthorized(&format!(
            "{}: this endpoint needs the cluster credential ({CLUSTER_HEADER})",
            match r {
                Refusal::Missing => "missing credential",
                _ => "wrong credential",
            }
        ))
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
    ]
    .map(|(reason, c)| (reason.to_owned(), c.load(Ordering::Relaxed) as f64));
    crate::metrics::family(
        text,
        "megha_auth_refused_total",
        "counter",
        "Calls refused: missing or wrong credential (401), not allowed (403).",
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
    match guard.check_role(req.headers(), (guard.callers)(req.uri().path())) {
        Ok(()) => next.run(req).await,
        Err(r) => guard.refuse(r, req.method().as_str(), req.uri().path(), peer(&req)),
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

/// True when `listen` (host:port) binds only loopback.
pub fn is_loopback_listen(listen: &str) -> bool {
    let host = listen
        .rsplit_once(':')
        .map_or(listen, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Open mode (no credential) is allowed only on a loopback `listen`: an error naming
/// `how` (the flags that set the credential) otherwise; a loud warning when allowed.
pub fn open_mode_allowed(missing: &str, how: &str, listen: &str) -> Result<()> {
    if !is_loopback_listen(listen) {
        bail!("no {missing} configured and --listen {listen} is not loopback: set {how} (running without credentials is allowed only on a loopback address)");
    }
    tracing::warn!(
        listen,
        "OPEN MODE: no {missing} configured ({how}); any local process can call this service. Allowed only because it listens on loopback"
    );
    Ok(())
}

/// What every role checks before it starts: the extra CA its calls trust (if any) is
/// loaded, a role credential is this role's, and running without the cluster secret is allowed only on a loopback
/// `listen` (see [`open_mode_allowed`]).
pub fn check_start(
    ca: Option<&std::path::Path>,
    secret: Option<&ClusterSecret>,
    listen: &str,
    role: Role,
) -> Result<()> {
    if let Some(ca) = ca {
        crate::tls::trust_ca(ca)?;
    }
    if let Some(theirs) = secret.and_then(ClusterSecret::role) {
        if theirs != role {
            bail!("--cluster-secret-file: the credential of the {theirs} role given to a {role}: each role needs its own file (see scripts/make-role-credentials.sh)");
        }
    }
    if secret.is_none() {
        open_mode_allowed(
            "cluster secret",
            "--cluster-secret-file, MEGHA_CLUSTER_SECRET_FILE or MEGHA_CLUSTER_SECRET",
            listen,
        )?;
    }
    Ok(())
}

/// The networks a worker's callback URL may lie in (`--worker-networks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerNetworks(pub Vec<ipnet::IpNet>);

impl WorkerNetworks {
    /// Parses a list of CIDRs (`10.0.0.0/8`) or single addresses.
    pub fn parse(items: &[String]) -> Result<Self> {
        let mut nets = Vec::new();
        for item in items {
            let net = item
                .parse::<ipnet::IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    anyhow::anyhow!("--worker-networks: `{item}` is not a CIDR network or address")
                })?;
            nets.push(net);
        }
        Ok(WorkerNetworks(nets))
    }

    /// Loopback, plus the network of `listen` when it names one address that is not
    /// loopback or unspecified (its /24, or /64 for IPv6).
    pub fn default_for(listen: &str) -> Self {
        let mut nets: Vec<ipnet::IpNet> = vec![
            "127.0.0.0/8".parse().expect("literal"),
            "::1/128".parse().expect("literal"),
        ];
        if let Ok(addr) = listen.parse::<SocketAddr>() {
            let ip = addr.ip();
            if !ip.is_loopback() && !ip.is_unspecified() {
                let prefix = if ip.is_ipv4() { 24 } else { 64 };
                if let Ok(net) = ipnet::IpNet::new(ip, prefix) {
                    nets.push(net.trunc());
                }
            }
        }
        WorkerNetworks(nets)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// Checks a callback URL: http(s), and every address its host resolves to lies
    /// in these networks. The error says why. Returns the host and the addresses
    /// checked, for a client pinned to them ([`crate::links::http_client_pinned`]):
    /// a name resolving elsewhere later (DNS rebinding) then changes nothing.
    pub async fn check_url(&self, url: &str) -> Result<CheckedHost, String> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| format!("callback url `{url}` must be http:// or https://"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Err(format!(
                "callback url `{url}` must not carry user information"
            ));
        }
        let default_port = if url.starts_with("https://") { 443 } else { 80 };
        let target = if authority.rsplit_once(':').is_some_and(|(h, p)| {
            !h.is_empty() && p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']'))
        }) {
            authority.to_owned()
        } else {
            format!("{authority}:{default_port}")
        };
        let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(target.as_str()).await {
            Ok(a) => a.collect(),
            Err(e) => {
                return Err(format!(
                    "callback url `{url}`: cannot resolve its host: {e}"
                ))
            }
        };
        if addrs.is_empty() {
            return Err(format!(
                "callback url `{url}`: its host resolves to no address"
            ));
        }
        if let Some(bad) = addrs.iter().find(|a| !self.contains(a.ip())) {
            return Err(format!(
                "callback url `{url}`: {} is not in the LM's --worker-networks ({})",
                bad.ip(),
                self.0
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        let host = target
            .rsplit_once(':')
            .map_or(target.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(CheckedHost { host, addrs })
    }
}

/// A callback URL's host and the addresses it resolved to when checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedHost {
    pub host: String,
    pub addrs: Vec<SocketAddr>,
}

impl CheckedHost {
    /// True when the host is a name (an IP literal needs no pinning).
    pub fn is_name(&self) -> bool {
        self.host.parse::<IpAddr>().is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn open_mode_only_on_loopback() {
        for l in ["127.0.0.1:0", "[::1]:80", "localhost:9100"] {
            assert!(is_loopback_listen(l), "{l}");
            assert!(open_mode_allowed("secret", "--x", l).is_ok());
        }
        for l in ["0.0.0.0:8080", "10.1.2.3:80", "[::]:80", "example.org:80"] {
            assert!(!is_loopback_listen(l), "{l}");
            let err = open_mode_allowed("cluster secret", "--cluster-secret-file", l)
                .expect_err("refused");
            assert!(err.to_string().contains("--cluster-secret-file"), "{err}");
        }
    }

    #[tokio::test]
    async fn callbacks_must_lie_in_the_worker_networks() {
        let nets = WorkerNetworks::default_for("10.1.2.3:9100");
        assert!(nets.check_url("http://127.0.0.1:9200").await.is_ok());
        assert!(nets.check_url("http://10.1.2.77:9200/").await.is_ok());
        assert!(nets.check_url("http://[::1]:9200").await.is_ok());
        for bad in [
            "http://10.1.3.1:9200",
            "http://8.8.8.8",
            "ftp://127.0.0.1",
            "http://user@127.0.0.1:80",
        ] {
            assert!(nets.check_url(bad).await.is_err(), "{bad}");
        }
        let checked = nets
            .check_url("http://localhost:9200/")
            .await
            .expect("loopback name");
        assert_eq!(checked.host, "localhost");
        assert!(checked.is_name() && !checked.addrs.is_empty());
        assert!(checked
            .addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 9200));
        let literal = nets.check_url("http://[::1]:9200").await.expect("literal");
        assert!(!literal.is_name(), "{literal:?}");
        let only =
            WorkerNetworks::parse(&["192.168.0.0/16".into(), "10.0.0.1".into()]).expect("valid");
        assert!(only.contains("10.0.0.1".parse().expect("ip")));
        assert!(!only.contains("127.0.0.1".parse().expect("ip")));
        assert!(WorkerNetworks::parse(&["10.0.0.0/33".into()]).is_err());
        assert_eq!(
            WorkerNetworks::default_for("0.0.0.0:9100").0.len(),
            2,
            "an unspecified listen adds no network"
        );
    }
}
