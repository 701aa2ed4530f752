//! Who may call the GM: users by bearer token, peers by the cluster credential.
//!
//! - The tokens file (`--tokens-file`, TOML, or JSON when it ends in `.json`) maps
//!   each token to a user, the queues that user may submit to (`"*"`: any), the
//!   preempting priority classes that user may name (`priority_classes`, `"*"`:
//!   any; [`check_class`]) and an admin flag. It is read again on SIGHUP and when its modification time or size
//!   changes (checked every 2 s); a file that no longer parses keeps the previous
//!   table (logged, counted).
//! - [`GmAuth::layer`] guards the whole router, so routes added later are guarded by
//!   default: `/healthz`, `/metrics` and `/openapi.json` are open; `/v1/internal/*` needs the cluster
//!   credential; every other path needs a user's token (401 without or with a bad
//!   one). A request carrying `x-megha-forwarded-by` must also carry the cluster
//!   credential: only a peer GM may claim to forward. With per-role credentials
//!   ([`service_kit::roles`]) `/v1/internal/*` takes an LM's, forwarding a GM's (403
//!   for another role's).
//! - A user sees only their own jobs: a path naming a job (`/v1/jobs/{id}...`,
//!   `/v1/tasks/{job}/...`, `/v1/lras/{id}`) of another user answers 404 exactly like
//!   a missing one (the owner: the job's user in the GM's journaled records, which is
//!   the caller for a non-admin submission). An admin sees everything.
//! - No tokens file: open mode (every caller is an admin), allowed only on a
//!   loopback `--listen` with a loud warning (see [`service_kit::auth`]).

use crate::service::admission::route::{job_owner, FORWARDED_BY};
use axum::extract::{FromRequestParts as _, RawPathParams, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use common::GmId;
use service_kit::auth::{ClusterGuard, Refusal, OPEN_PATHS};
use service_kit::roles::Role;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub mod preempting;
mod tokens;
pub use tokens::{Caller, UserTable, Users, MIN_TOKEN_LEN};

/// The GM's guard: users, the cluster credential, and who submitted which job.
#[derive(Debug)]
pub struct GmAuth {
    /// `None`: open mode (loopback only).
    pub users: Option<Arc<UserTable>>,
    pub guard: ClusterGuard,
    pub me: GmId,
    pub designated: GmId,
    /// This GM forwards requests naming another GM's job to that GM (it knows the
    /// cluster's GMs), which checks the caller there.
    forwards_to_owners: bool,
    /// The user who submitted each job accepted in this life (a fast path).
    owners: Mutex<HashMap<u64, Arc<str>>>,
    /// The GM, whose job records (journaled) name each job's user: how a job of an
    /// earlier life is recognised. `None` (embedded routers): the map only.
    gm: Option<actix::Addr<crate::service::actor::GmActor>>,
    /// Requests naming another user's job, answered 404 like a missing one.
    pub hidden_total: AtomicU64,
    /// Each user's recent jobs of a preempting class, and the jobs refused over the
    /// cap ([`preempting`]).
    preempting: Mutex<preempting::PreemptingCap>,
    pub preempting_capped_total: AtomicU64,
}

impl GmAuth {
    pub fn new(
        users: Option<Arc<UserTable>>,
        guard: ClusterGuard,
        me: GmId,
        designated: GmId,
    ) -> Self {
        GmAuth {
            users,
            guard,
            me,
            designated,
            forwards_to_owners: false,
            owners: Mutex::default(),
            gm: None,
            hidden_total: AtomicU64::new(0),
            preempting: Mutex::default(),
            preempting_capped_total: AtomicU64::new(0),
        }
    }

    /// Also asks the GM's job records for a job's user (durable across restarts).
    pub fn with_gm(mut self, gm: actix::Addr<crate::service::actor::GmActor>) -> Self {
        self.gm = Some(gm);
        self
    }

    /// Requests naming another GM's job are forwarded to it (see
    /// [`crate::service::admission::route`]): the owner checks the caller, not this GM.
    pub fn forwarding_to_owners(mut self, forwards: bool) -> Self {
        self.forwards_to_owners = forwards;
        self
    }

    /// Open mode without a cluster secret (tests, embedded clusters on loopback).
    pub fn open(me: GmId, designated: GmId) -> Self {
        Self::new(None, ClusterGuard::new(None, "gm"), me, designated)
    }

    /// Records that `caller` submitted `job`.
    pub fn record_owner(&self, job: u64, caller: &Caller) {
        self.owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(job, caller.user.clone());
    }

    /// Whether `caller` may see `job` here (its owner, or an admin).
    pub fn may_see(&self, caller: &Caller, job: u64) -> bool {
        caller.admin
            || self
                .owners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&job)
                .is_some_and(|u| *u == caller.user)
    }

    /// Guards every route of `router` (present and future); see the module doc.
    pub fn layer<S: Clone + Send + Sync + 'static>(
        self: &Arc<Self>,
        router: Router<S>,
    ) -> Router<S> {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), gm_layer))
    }

    fn refuse_user(&self, r: Refusal, req: &Request) -> Response {
        self.guard.counters.count(r);
        tracing::warn!(
            method = req.method().as_str(),
            path = req.uri().path(),
            peer = service_kit::auth::peer(req)
                .map(|p| p.to_string())
                .as_deref()
                .unwrap_or("?"),
            credential = r.label(),
            "API call refused: no valid user token"
        );
        service_kit::auth::unauthorized(match r {
            Refusal::Missing => "missing credential: send Authorization: Bearer <token>",
            Refusal::Wrong | Refusal::Role(_) | Refusal::Signature(_) => "unknown token",
        })
    }

    /// The 404 a route naming a job of another user answers, the same as for a job
    /// this GM does not know; `None` when the caller may see it (or the route names
    /// no job, or the designated GM decides).
    ///
    /// `route` is the request's raw path (routes match on it, so its literal
    /// prefix, `/v1/lras/`, is the route's) and `params` the matched route's
    /// parameters as the handlers get them (percent-decoded by axum):
    /// the job is read from them with the handlers' own parser
    /// ([`super::api::parse_id`]), so `%31`, `01` or `+1` name job 1 here exactly as
    /// in the handler. Any route parameter called `id` or `job` names a job (an LRA's
    /// id is its containers' job id), so a route added later is covered too.
    fn hidden_target(route: &str, params: &[(String, String)]) -> Option<(u64, serde_json::Value)> {
        let param = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let raw = param("job").or_else(|| param("id"))?;
        let job: u64 = super::api::parse_id("job", raw).ok()?;
        let index = param("index").and_then(|i| super::api::parse_id::<u32>("index", i).ok());
        let body = if route.starts_with("/v1/lras/") {
            serde_json::json!({"field": "lra", "error": format!("lra {job} is unknown to this GM")})
        } else if let (true, Some(index)) = (route.starts_with("/v1/tasks/"), index) {
            serde_json::json!({"error": format!("task {job}.{index} is unknown to this GM")})
        } else {
            serde_json::json!({"error": format!("job {job} is unknown to this GM")})
        };
        Some((job, body))
    }

    async fn hidden(
        &self,
        caller: &Caller,
        route: &str,
        params: &[(String, String)],
    ) -> Option<Response> {
        if caller.admin {
            return None;
        }
        let (job, body) = Self::hidden_target(route, params)?;
        // Requests this GM forwards to the designated GM, or to the job's owner, are
        // checked there (with the user's token, which the forwarding carries).
        let owner = job_owner(job);
        let forwarded = self.me != self.designated
            && (route.starts_with("/v1/lras/") || owner == self.designated.0)
            || owner != self.me.0 && self.forwards_to_owners;
        if forwarded || self.may_see(caller, job) || self.recorded_user_is(caller, job).await {
            return None;
        }
        self.hidden_total.fetch_add(1, Ordering::Relaxed);
        Some((StatusCode::NOT_FOUND, Json(body)).into_response())
    }

    /// Whether `caller` may see `job`: an admin, the user who submitted it in this
    /// life, or the user the GM's (journaled) record names.
    pub async fn owns(&self, caller: &Caller, job: u64) -> bool {
        self.may_see(caller, job) || self.recorded_user_is(caller, job).await
    }

    /// True when the GM's record of `job` names the caller as its user (its job
    /// records, or the spec its journal keeps after the job ended).
    async fn recorded_user_is(&self, caller: &Caller, job: u64) -> bool {
        let Some(gm) = &self.gm else {
            return false;
        };
        match gm
            .send(crate::service::actor::queries::JobUser(common::JobId(job)))
            .await
        {
            Ok(Some(user)) => user.as_deref() == Some(&*caller.user),
            _ => false,
        }
    }
}

/// Where the OpenAPI document is served (see [`crate::service::http::openapi`]):
/// open to every caller.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// The dashboard's static page, script and style sheet (see
/// [`crate::service::http::dashboard`]): open, since they carry no data.
pub const PAGE_PATHS: &[&str] = &["/", "/dashboard.js", "/dashboard.css"];

async fn gm_layer(State(auth): State<Arc<GmAuth>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if OPEN_PATHS.contains(&path.as_str())
        || path == OPENAPI_PATH
        || PAGE_PATHS.contains(&path.as_str())
    {
        return next.run(req).await;
    }
    let peer_call = path.starts_with("/v1/internal/") || req.headers().contains_key(FORWARDED_BY);
    if peer_call {
        // LMs report through `/v1/internal/*`; only a GM forwards (and asks
        // whether a job ended).
        // Another GM asks whether a job ended on `/v1/internal/jobs/`.
        let callers: &[Role] =
            if path.starts_with("/v1/internal/") && !path.starts_with("/v1/internal/jobs/") {
                &[Role::Lm]
            } else {
                &[Role::Gm]
            };
        let (method, from) = (req.method().clone(), service_kit::auth::peer(&req));
        req = match auth.guard.authenticate(req, callers).await {
            Ok(req) => req,
            Err(r) => return auth.guard.refuse(r, method.as_str(), &path, from),
        };
        if path.starts_with("/v1/internal/") {
            return next.run(req).await;
        }
    }
    let caller = match &auth.users {
        None => Caller::anonymous(),
        Some(table) => {
            let token = req
                .headers()
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            let Some(token) = token else {
                return auth.refuse_user(Refusal::Missing, &req);
            };
            match table.users().find(token.as_bytes()) {
                Some(c) => c.clone(),
                None => return auth.refuse_user(Refusal::Wrong, &req),
            }
        }
    };
    // The route's parameters as its handler will read them (the layer runs after
    // routing): decoded once, here, by axum, for the check and for the handler.
    // Routes match on the raw path, so its literal prefix (`/v1/lras/`) is the
    // route's; the parameters are the decoded ones.
    let (mut parts, body) = req.into_parts();
    let params: Vec<(String, String)> =
        match RawPathParams::from_request_parts(&mut parts, &()).await {
            Ok(p) => p
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            // Not valid UTF-8 once decoded: the handler's extractor refuses it too (400).
            Err(_) => Vec::new(),
        };
    let mut req = Request::from_parts(parts, body);
    if let Some(hidden) = auth.hidden(&caller, &path, &params).await {
        return hidden;
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The name of queue `id` (for the users' allowed queues).
pub fn queue_name(
    queues: &crate::service::admission::api::QueueTable,
    id: common::QueueId,
) -> &str {
    queues
        .fairness
        .as_ref()
        .and_then(|f| f.queues.iter().find(|q| q.id == id))
        .map_or(common::fairness::DEFAULT_QUEUE, |q| q.name.as_str())
}

/// The 403 naming `field` when `caller` may not use queue `id`; `None` when allowed.
pub fn check_queue(
    auth: &GmAuth,
    caller: &Caller,
    queues: &crate::service::admission::api::QueueTable,
    id: common::QueueId,
    field: &str,
) -> Option<Response> {
    let name = queue_name(queues, id);
    if caller.may_use(name) {
        return None;
    }
    auth.guard
        .counters
        .forbidden
        .fetch_add(1, Ordering::Relaxed);
    tracing::warn!(user = %caller.user, queue = name, "submission refused: queue not allowed for this user");
    Some(service_kit::auth::forbidden(
        field,
        &format!("user {} may not submit to queue {name}", caller.user),
    ))
}

/// The 403 naming `priority_class` when `caller` may not use the job's resolved
/// `class` (a preempting one; see [`super::priority_api::authorize_class`]), or
/// the 429 when the caller's jobs of a preempting class at `now` would pass its
/// `preempting_jobs_per_minute` ([`preempting`]); `None` when allowed (the job
/// then counts against the cap).
pub fn check_class(
    auth: &GmAuth,
    caller: &Caller,
    class: &super::priority_api::JobClass,
    now: common::Micros,
) -> Option<Response> {
    if let Err(refused) = super::priority_api::authorize_class(class, caller) {
        auth.guard
            .counters
            .forbidden
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(user = %caller.user, class = class.name.as_str(), "submission refused: preempting priority class not allowed for this user");
        return Some(service_kit::auth::forbidden(&refused.field, &refused.error));
    }
    let cap = caller
        .preempting_per_minute()
        .filter(|_| class.preempting)?;
    let mut taken = auth.preempting.lock().unwrap_or_else(|e| e.into_inner());
    let wait = taken.take(&caller.user, cap, now).err()?;
    auth.preempting_capped_total.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(user = %caller.user, class = class.name.as_str(), cap, "submission refused: over the user's preempting_jobs_per_minute");
    let error = format!(
        "user {} may submit at most {cap} jobs of a preempting priority class per minute (class `{}`); retry in {wait} s",
        caller.user, class.name
    );
    Some(
        (
            StatusCode::TOO_MANY_REQUESTS,
            [(axum::http::header::RETRY_AFTER, wait.to_string())],
            Json(serde_json::json!({"field": "priority_class", "error": error})),
        )
            .into_response(),
    )
}

/// The 403 for a job whose body names another user than the (non-admin) caller.
pub fn forbidden_user(auth: &GmAuth, caller: &Caller, named: &str) -> Response {
    auth.guard
        .counters
        .forbidden
        .fetch_add(1, Ordering::Relaxed);
    tracing::warn!(user = %caller.user, named, "submission refused: names another user");
    service_kit::auth::forbidden(
        "user",
        &format!("user {} may not submit jobs as {named}", caller.user),
    )
}

/// Appends the GM's auth metrics to a metrics page.
pub fn render_metrics(auth: &GmAuth, text: &mut service_kit::metrics::Page) {
    service_kit::auth::render_counters(
        &auth.guard.counters,
        auth.users.is_none() || auth.guard.secret.is_none(),
        text,
    );
    for (name, help, v) in [
        (
            "megha_gm_hidden_jobs_total",
            "Requests naming another user's job or LRA, answered 404 like a missing one.",
            &auth.hidden_total,
        ),
        (
            "megha_gm_preempting_capped_total",
            "Jobs of a preempting priority class refused (429) over their user's preempting_jobs_per_minute.",
            &auth.preempting_capped_total,
        ),
    ] {
        let v = v.load(Ordering::Relaxed) as f64;
        service_kit::metrics::single(text, name, "counter", help, v);
    }
    if let Some(t) = &auth.users {
        for (name, help, v) in [
            (
                "megha_gm_tokens_reloads_total",
                "Readings of the tokens file after the first.",
                t.reloads.load(Ordering::Relaxed) as f64,
            ),
            (
                "megha_gm_tokens_reload_failures_total",
                "Readings of the tokens file that failed (the previous users stayed).",
                t.reload_failures.load(Ordering::Relaxed) as f64,
            ),
        ] {
            service_kit::metrics::single(text, name, "counter", help, v);
        }
        service_kit::metrics::single(
            text,
            "megha_gm_users",
            "gauge",
            "Users in the tokens file.",
            t.users().len() as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::priority::PriorityClasses;

    pub(super) const FILE: &str = r#"
[[users]]
name = "alice"
token = "alice-token-0123456789"
queues = ["a"]

[[users]]
name = "root"
token = "root-token-0123456789"
admin = true
"#;

    #[test]
    fn tokens_map_to_users_and_queues() {
        let users = Users::parse(FILE, false, &PriorityClasses::default()).expect("valid");
        let alice = users.find(b"alice-token-0123456789").expect("alice");
        assert_eq!(&*alice.user, "alice");
        assert!(alice.may_use("a") && !alice.may_use("b") && !alice.admin);
        let root = users.find(b"root-token-0123456789").expect("root");
        assert!(root.admin && root.may_use("b"));
        assert!(users.find(b"alice-token-012345678").is_none());
        assert!(users.find(b"").is_none());
        assert!(!format!("{users:?}").contains("token-0"));
        let json = r#"{"users":[{"name":"bob","token":"bob-token-0123456789","queues":["*"]}]}"#;
        let bob = Users::parse(json, true, &PriorityClasses::default()).expect("json");
        assert!(bob.find(b"bob-token-0123456789").expect("bob").may_use("z"));
    }

    /// Issue 32: a tokens file may hold only the SHA-256 of a token.
    #[test]
    fn a_token_may_be_stored_as_its_sha256() {
        let digest = service_kit::roles::hex(&service_kit::roles::digest(b"dora-token-0123456789"));
        let text =
            format!("[[users]]\nname = \"dora\"\ntoken_sha256 = \"{digest}\"\nqueues = [\"a\"]\n");
        let users = Users::parse(&text, false, &PriorityClasses::default()).expect("valid");
        assert_eq!(
            &*users.find(b"dora-token-0123456789").expect("dora").user,
            "dora"
        );
        assert!(
            users.find(digest.as_bytes()).is_none(),
            "the digest is no token"
        );
        assert!(users.find(b"dora-token-012345678").is_none());
        for (bad, field) in [
            (text.replace(&digest, "abc"), "users[0].token_sha256"),
            (
                text.replace(
                    "token_sha256",
                    "token = \"dora-token-0123456789\"\ntoken_sha256",
                ),
                "users[0].token",
            ),
            (
                text.replace(&format!("token_sha256 = \"{digest}\"\n"), ""),
                "users[0].token",
            ),
        ] {
            let err = format!(
                "{:#}",
                Users::parse(&bad, false, &PriorityClasses::default()).expect_err(field)
            );
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn bad_files_name_the_entry_and_never_the_token() {
        for (text, field) in [
            ("[[users]]\nname = \"a\"\ntoken = \"short\"\nqueues=[\"a\"]", "users[0].token"),
            ("[[users]]\nname = \"\"\ntoken = \"0123456789abcdefg\"\nqueues=[\"a\"]", "users[0].name"),
            ("[[users]]\nname = \"a\"\ntoken = \"0123456789abcdefg\"", "users[0].queues"),
            ("[[users]]\nname = \"a\"\ntoken = \"0123456789abcdefg\"\nqueues=[\"a\"]\n[[users]]\nname = \"b\"\ntoken = \"0123456789abcdefg\"\nqueues=[\"a\"]", "users[1].token"),
            ("[[users]]\nname = \"a\"\ntoken = \"0123456789abcdefg\"\nqueues=[\"a\"]\ncolour=1", "colour"),
        ] {
            let err = format!("{:#}", Users::parse(text, false, &PriorityClasses::default()).expect_err(field));
            assert!(err.contains(field), "{field}: {err}");
            assert!(!err.contains("0123456789abcdefg"), "{err}");
        }
    }

    #[test]
    fn the_table_reloads_when_the_file_changes_and_keeps_the_last_good_one() {
        let dir = std::env::temp_dir().join(format!("megha-users-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("tokens.toml");
        std::fs::write(&path, FILE).expect("write");
        let table = UserTable::load(&path, Arc::default()).expect("load");
        assert_eq!(table.users().len(), 2);
        std::fs::write(&path, "[[users]]\nname = \"carol\"\ntoken = \"carol-token-0123456789\"\nqueues = [\"c\"]\nadmin = false\n# longer\n").expect("write");
        table.reload_if_changed();
        assert_eq!(table.users().len(), 1);
        assert!(table.users().find(b"carol-token-0123456789").is_some());
        std::fs::write(&path, "not toml [").expect("write");
        table.reload("test");
        assert_eq!(table.reload_failures.load(Ordering::Relaxed), 1);
        assert!(table.users().find(b"carol-token-0123456789").is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
