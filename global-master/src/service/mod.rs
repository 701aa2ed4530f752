//! The GM as a service: the pure core in an actix actor, the public HTTP API (axum),
//! HTTP launch links to the LMs (reqwest, bincode) and the broker (lapin).
//!
//! Layout: five parts and the configuration, each imported only downward
//! (`http` -> `actor`, `observe`, `admission`, `durable`; none of them imports `http`):
//! - [`actor`]: [`actor::GmActor`] (its fields private to it): job submission,
//!   [`actor::deliver`] (every input through the core's `step`, and its output
//!   carried out: the only match on it), requests to the LMs over one link each
//!   (`actor/outbox.rs`: resends, busy and undelivered requests), [`actor::queries`] the HTTP layer asks, the broker
//!   subscription ([`actor::mq`]), resuming a previous life's work
//!   ([`actor::resume`]), restarted LMs ([`actor::lm_restart`]), LRAs
//!   ([`actor::lra_actor`]), the shell's counters ([`actor::counters`]).
//! - [`observe`]: what the GM tells about itself: per-task and per-job status, the
//!   metrics declared once as a table, the pending list, recent events, the
//!   dashboard's overview and the nodes view.
//! - [`durable`]: what outlives the process: the journal, idempotency keys, the
//!   standby that takes the journal over, the drain on SIGTERM.
//! - [`admission`]: what a request must be: the submission formats and their
//!   validation, users, tokens and queues, routing to the designated GM.
//! - [`http`]: the router and its handlers, their typed answers, the OpenAPI
//!   document, the probes, task logs, the cluster view and the dashboard.
//! - [`config`]: flags, environment, TOML file.
//!
//! This file wires them: [`serve`] opens the journal, starts the actor, the broker
//! subscriptions and the HTTP server, and drains on SIGTERM; its phases are in
//! `start.rs`.

pub mod actor;
pub mod admission;
pub mod config;
pub mod durable;
pub mod http;
pub mod observe;
mod start;

// The paths `config` (owned with the configuration) names its types by.
pub use admission::lra_api;
pub use durable::idempotency;
pub use observe::status;

use actor::{lra_actor, mq};
use admission::{api, route, users};
use durable::{shutdown, standby};
use http::logs;

use crate::core::GmConfig;
use actix::Actor;
use anyhow::{Context as _, Result};
use common::GmId;
use service_kit::amqp::Publisher;
use service_kit::links::http_client_with;
use service_kit::sinks::amqp_event_sink;
use std::sync::Arc;
use std::time::Duration;

/// Runs the GM until SIGTERM/SIGINT, then drains: stops accepting, keeps placing what
/// is queued (up to the drain timeout), flushes events and returns.
pub async fn serve(s: config::GmSettings) -> Result<()> {
    // First, so that a taken address fails the start before any actor or connection
    // exists (tearing those down outside their runtime panicked).
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    service_kit::auth::check_start(
        s.tls.ca.as_deref(),
        s.cluster_secret.as_ref(),
        &s.listen,
        service_kit::roles::Role::Gm,
        Some(s.id),
    )?;
    let users = load_users(&s)?;
    // Stops the service on SIGTERM/SIGINT, or when an LM says a newer life of this
    // GM took over (then without draining; see `standby::Fence`).
    let fence = Arc::new(standby::Fence::default());
    let mut stop = Some(start::stop_signal(&fence));
    // A standby answers on its port while it waits for the journal (see `standby`).
    let mut serving = start::listen(&s, listener, &mut stop)?;
    // The journal first: it is what a standby waits for, and it fixes this life.
    let mut opened = match start::open_journal(&s, &mut serving).await? {
        start::Journaled::Opened(opened) => opened,
        start::Journaled::StandbyStopped => return Ok(()),
    };
    let (first_batch_seq, life) = start::begin_life(&s, &mut opened)?;
    let cluster = service_kit::cluster::Cluster::new(s.cluster_name.clone(), "gm");
    let name = Some(&s.cluster_name);
    let client = http_client_with(s.launch_timeout, s.cluster_secret.as_ref(), name);
    logs::init_client(s.cluster_secret.as_ref(), name);
    let links = start::lm_links(&s, &client, &cluster);
    let publisher = Publisher::start(s.amqp.clone(), s.cluster_name.clone())
        .with_backlog_limit(s.max_broker_backlog_bytes);
    let lra_groups = s.lra.groups.clone();
    // Before `s.lra` moves into the core's configuration.
    let route = Arc::new(route_to_designated(&s));
    let limits = limits(&s, &publisher);
    let idempotency = start::idempotency(&s).await?;
    let core = GmConfig {
        batch_size: s.batch_size,
        designated_gm: GmId(s.designated_gm),
        lra: s.lra.clone(),
        fairness: s.fairness.clone(),
        priorities: s.priorities.clone(),
        queueable_top_k: s.queueable_top_k,
        queueable_cap: s.queueable_cap,
        order: s.order,
        queueable_quota: s.queueable_quota,
        // A restarted GM must not reuse its previous life's batch numbers (the LMs
        // would answer them from their record of that life); its life fences the
        // older ones at the LMs.
        first_batch_seq,
        life,
        retry: s.retry,
        soft_ilp_ms: s.soft_ilp_ms,
        ..GmConfig::new(GmId(s.id), s.gms, s.lm_urls.len() as u16)
    };
    match (s.soft_ilp_ms, core.soft_ilp()) {
        (Some(_), None) => tracing::info!(
            designated_gm = s.designated_gm,
            "--soft-ilp-ms is ignored: only the designated GM solves soft constraints exactly; this GM places them greedily"
        ),
        (_, Some(ms)) => tracing::info!(cap_ms = ms, "soft constraints: the batch of jobs with utility trees is solved exactly at each pass"),
        (None, None) => {}
    }
    let gm = actor::GmActor::new(
        core,
        links,
        amqp_event_sink(publisher.clone()),
        s.max_queued,
    )
    .with_doubt_timeout(s.doubt_timeout)
    .with_lm_reconcile_delay(s.lm_reconcile_delay)
    .with_retention(s.retention)
    .with_lm_urls(s.lm_urls.clone())
    .with_attributes(s.attributes.clone())
    .with_fence(fence.clone());
    let gm = start::with_recovered(gm, &s, opened, &idempotency).start();
    if !s.lra_operator_constraints.is_empty() {
        let constraints = s.lra_operator_constraints.clone();
        let n = constraints.len();
        gm.send(lra_actor::AddOperatorConstraints(constraints))
            .await?
            .context("in --lra-operator-constraints")?;
        tracing::info!(constraints = n, "operator LRA constraints installed");
    }
    // Jobs here that run after jobs of other GMs: their GMs are asked until they end.
    if !s.gm_urls.is_empty() {
        tokio::spawn(actor::remote_after::watch(gm.clone(), route.clone()));
    }
    let senders = Arc::new(mq::SnapshotSenders::new(s.lm_broker_user.clone()));
    let (broker, subscription) =
        mq::subscribe_state(s.amqp.clone(), cluster.clone(), senders.clone(), gm.clone());
    // The designated GM learns the ends of its LRA containers from the task events.
    let ends = if s.designated_gm == s.id {
        mq::subscribe_ends(s.amqp.clone(), cluster.clone(), gm.clone())
    } else {
        Vec::new()
    };
    let standby_status = match &serving {
        start::Serving::Standby { front, .. } => Some(front.status.clone()),
        start::Serving::Direct(_) => None,
    };
    let app = http::router(http::ApiState {
        gm: gm.clone(),
        max_job_tasks: s.max_job_tasks,
        queues: api::QueueTable::new(GmId(s.id), s.fairness.clone())
            .with_attributes(s.attributes.clone()),
        priorities: s.priorities.clone(),
        broker: Some(broker),
        senders: Some(senders),
        lra_groups,
        route: Some(route.clone()),
        auth: Arc::new(
            users::GmAuth::new(
                users,
                service_kit::auth::ClusterGuard::new(s.cluster_secret.clone(), "gm"),
                GmId(s.id),
                GmId(s.designated_gm),
            )
            .with_gm(gm.clone())
            .forwarding_to_owners(!s.gm_urls.is_empty()),
        ),
        cluster: cluster.clone(),
        idempotency,
        standby: standby_status,
        limits: Some(limits),
    });
    start::serve_api(&s, serving, app, &mut stop).await?;
    let mut subscriptions = vec![subscription];
    subscriptions.extend(ends);
    if fence.is_tripped() {
        // Not drained: the queued work is the newer life's (in the journal), and
        // this life's requests are refused anyway.
        start::close_broker(subscriptions, &publisher).await;
        anyhow::bail!(
            "GM {} stopped: fenced by a newer life of this GM (a standby took over, or another process runs this GM id)",
            s.id
        );
    }
    shutdown::drain(&gm, s.drain_timeout).await;
    if !start::close_broker(subscriptions, &publisher).await {
        tracing::warn!("some events could not be confirmed by the broker before exit");
    }
    tracing::info!("global master stopped");
    Ok(())
}

/// The API users from `--tokens-file` (watched for changes), or `None` where open
/// mode is allowed.
fn load_users(s: &config::GmSettings) -> Result<Option<Arc<users::UserTable>>> {
    match &s.tokens_file {
        Some(path) => {
            let table = Arc::new(users::UserTable::load(path, s.priorities.clone())?);
            tracing::info!(file = %path.display(), users = table.users().len(), "API users loaded");
            table.watch(Duration::from_secs(2));
            Ok(Some(table))
        }
        None => {
            service_kit::auth::open_mode_allowed(
                "tokens file (API users)",
                "--tokens-file or MEGHA_TOKENS_FILE",
                &s.listen,
            )?;
            Ok(None)
        }
    }
}

/// How this GM forwards work for the designated GM, and requests naming another
/// GM's job.
fn route_to_designated(s: &config::GmSettings) -> route::Route {
    if !s.gm_urls.is_empty() && s.gm_urls.len() != usize::from(s.gms) {
        tracing::warn!(
            gm_urls = s.gm_urls.len(),
            gms = s.gms,
            "--gm-url lists a number of GMs other than --gms: jobs of the GMs it misses answer 404 here"
        );
    }
    route::Route {
        me: GmId(s.id),
        designated: GmId(s.designated_gm),
        designated_url: s.designated_url.clone(),
        gm_urls: s.gm_urls.clone(),
        streaming: service_kit::links::http_client_streaming(
            s.cluster_secret.as_ref(),
            Some(&s.cluster_name),
        ),
        client: http_client_with(
            s.launch_timeout,
            s.cluster_secret.as_ref(),
            Some(&s.cluster_name),
        ),
        signing: service_kit::auth::Signing::new(
            s.cluster_secret.as_ref(),
            service_kit::roles::Role::Gm,
        ),
        counters: Default::default(),
    }
}

/// What bounds the GM's memory under load.
fn limits(s: &config::GmSettings, publisher: &Publisher) -> http::Limits {
    http::Limits {
        bodies: service_kit::body_budget::BodyBudget::new(
            s.max_body_bytes,
            s.max_total_body_bytes,
            "gm",
        ),
        publisher: publisher.clone(),
    }
}

/// What ends the HTTP server.
/// The binary's entry point: parse settings, start the runtime, serve.
pub fn main_with(args: config::GmArgs) -> std::process::ExitCode {
    service_kit::runtime::run_service("global master", args.resolve(), |s| s.process, serve)
}
