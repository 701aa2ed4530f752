//! The GM as a service: the pure core in an actix actor, the public HTTP API (axum),
//! HTTP launch links to the LMs (reqwest, bincode) and the broker (lapin).
//!
//! - [`config`]: flags, environment, TOML file.
//! - [`api`]: the submission format and its validation ([`executor_api`]: how the
//!   worker runs a task).
//! - [`actor`]: [`actor::GmActor`]: state, job submission, queries.
//! - [`deliver`]: every input through the core's `step`, and its output carried out
//!   (requests to LMs over one link each, events, the status tracker).
//! - [`preempt`]: fairness: the shell's preemption counters.
//! - [`status`]: per-task and per-job status for the API.
//! - [`report`]: pending list and metrics; [`nodes`]: the view as `GET /v1/nodes`.
//! - [`http`]: the routes; [`answers`]: their typed JSON answers; [`openapi`]: the
//!   OpenAPI document generated from both, at `GET /openapi.json`.
//! - [`idempotency`]: `Idempotency-Key` on submissions.
//! - [`mq`]: the state subscription.
//! - [`users`]: who may call: user tokens, the cluster credential, job owners.

pub mod actor;
pub mod answers;
pub mod api;
pub mod cluster;
pub mod config;
pub mod dashboard;
pub mod deliver;
pub mod executor_api;
pub mod http;
pub mod idempotency;
pub mod journal;
pub mod lm_restart;
pub mod logs;
pub mod lra_actor;
pub mod lra_api;
pub mod lra_http;
pub mod mq;
pub mod nodes;
pub mod openapi;
pub mod overview;
pub mod preempt;
pub mod probes;
pub mod recent_events;
pub mod report;
pub mod resume;
pub mod route;
pub mod status;
pub mod users;

use crate::core::GmConfig;
use actix::{Actor, Addr};
use anyhow::{Context as _, Result};
use common::GmId;
use service_kit::amqp::Publisher;
use service_kit::links::{http_client_with, HttpLink};
use service_kit::sinks::amqp_event_sink;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    )?;
    let users = match &s.tokens_file {
        Some(path) => {
            let table = Arc::new(users::UserTable::load(path)?);
            tracing::info!(file = %path.display(), users = table.users().len(), "API users loaded");
            table.watch(Duration::from_secs(2));
            Some(table)
        }
        None => {
            service_kit::auth::open_mode_allowed(
                "tokens file (API users)",
                "--tokens-file or MEGHA_TOKENS_FILE",
                &s.listen,
            )?;
            None
        }
    };
    let cluster = service_kit::cluster::Cluster::new(s.cluster_name.clone(), "gm");
    let name = Some(&s.cluster_name);
    let client = http_client_with(s.launch_timeout, s.cluster_secret.as_ref(), name);
    logs::init_client(s.cluster_secret.as_ref(), name);
    let link = |path: &str, u: &String| HttpLink {
        client: client.clone(),
        url: format!("{}{path}", u.trim_end_matches('/')),
        retries: 3,
        cluster: cluster.clone(),
    };
    let links: Vec<deliver::LmLink> = s
        .lm_urls
        .iter()
        .map(|u| Arc::new(link("/v1/messages", u)) as deliver::LmLink)
        .collect();
    let publisher = Publisher::start(s.amqp.clone(), s.cluster_name.clone())
        .with_backlog_limit(s.max_broker_backlog_bytes);
    let lra_groups = s.lra.groups.clone();
    let core = GmConfig {
        batch_size: s.batch_size,
        designated_gm: GmId(s.designated_gm),
        lra: s.lra,
        fairness: s.fairness.clone(),
        queueable_top_k: s.queueable_top_k,
        queueable_cap: s.queueable_cap,
        queueable_quota: s.queueable_quota,
        // A restarted GM must not reuse its previous life's batch numbers (the LMs
        // would answer them from their record of that life).
        first_batch_seq: service_kit::clock::now().0,
        retry: s.retry,
        ..GmConfig::new(GmId(s.id), s.gms, s.lm_urls.len() as u16)
    };
    let mut gm = actor::GmActor::new(
        core,
        links,
        amqp_event_sink(publisher.clone()),
        s.max_queued,
    )
    .with_doubt_timeout(s.doubt_timeout)
    .with_lm_reconcile_delay(s.lm_reconcile_delay)
    .with_retention(s.retention)
    .with_lm_urls(s.lm_urls.clone());
    let idempotency = Arc::new(match &s.data_dir {
        Some(dir) => {
            let keys = idempotency::Idempotency::open(
                dir,
                &s.cluster_name,
                s.idempotency,
                service_kit::clock::now(),
            )?;
            tracing::info!(keys = keys.len(), "idempotency keys read back");
            keys
        }
        None => idempotency::Idempotency::in_memory(s.idempotency),
    });
    match &s.data_dir {
        Some(dir) => {
            let (journal, recovered) = journal::Journal::open(dir, &s.cluster_name)?;
            tracing::info!(path = %dir.display(), jobs = recovered.len(), "journal opened");
            let keys = recovered.iter().filter_map(|r| {
                let k = r.accepted.idempotency.clone()?;
                let remembered = idempotency::Remembered {
                    body_sha256: k.body_sha256,
                    job: r.job,
                    tasks: r.tasks.len() as u32,
                    accepted_at: r.accepted.accepted_at,
                };
                Some((k, remembered))
            });
            let missing = idempotency.restore(keys);
            if missing > 0 {
                tracing::warn!(keys = missing, "idempotency keys missing from their store (the GM died between the job's write and its key's) taken back from the journal");
            }
            gm = gm.with_journal(journal, recovered);
        }
        None => tracing::warn!(
            "no --data-dir: accepted jobs live in memory only and are lost if this GM dies"
        ),
    }
    let gm = gm.start();
    if !s.lra_operator_constraints.is_empty() {
        let constraints = s.lra_operator_constraints.clone();
        let n = constraints.len();
        gm.send(lra_actor::AddOperatorConstraints(constraints))
            .await?
            .context("in --lra-operator-constraints")?;
        tracing::info!(constraints = n, "operator LRA constraints installed");
    }
    let (broker, subscription) = mq::subscribe_state(s.amqp.clone(), cluster.clone(), gm.clone());
    // The designated GM learns the ends of its LRA containers from the task events.
    let ends = (s.designated_gm == s.id)
        .then(|| mq::subscribe_ends(s.amqp.clone(), cluster.clone(), gm.clone()));
    let local = listener.local_addr()?;
    tracing::info!(gm = s.id, cluster = %s.cluster_name, listen = %local, lms = s.lm_urls.len(), queues = s.fairness.as_ref().map_or(0, |f| f.queues.len()), "global master listening");
    println!("listening on {}://{local}", s.tls.scheme());
    let app = http::router(http::ApiState {
        gm: gm.clone(),
        max_job_tasks: s.max_job_tasks,
        queues: api::QueueTable {
            me: GmId(s.id),
            fairness: s.fairness.clone(),
        },
        broker: Some(broker),
        lra_groups,
        route: Some(Arc::new(route::Route {
            me: GmId(s.id),
            designated: GmId(s.designated_gm),
            designated_url: s.designated_url.clone(),
            client: http_client_with(s.launch_timeout, s.cluster_secret.as_ref(), name),
        })),
        auth: Arc::new(
            users::GmAuth::new(
                users,
                service_kit::auth::ClusterGuard::new(s.cluster_secret.clone(), "gm"),
                GmId(s.id),
                GmId(s.designated_gm),
            )
            .with_gm(gm.clone()),
        ),
        cluster: cluster.clone(),
        idempotency,
        limits: Some(http::Limits {
            bodies: service_kit::body_budget::BodyBudget::new(
                s.max_body_bytes,
                s.max_total_body_bytes,
                "gm",
            ),
            publisher: publisher.clone(),
        }),
    });
    service_kit::tls::serve(listener, app, &s.tls, service_kit::shutdown::signal()).await?;
    drain(&gm, s.drain_timeout).await;
    subscription.close().await;
    for sub in ends.into_iter().flatten() {
        sub.close().await;
    }
    if !publisher.close(Duration::from_secs(5)).await {
        tracing::warn!("some events could not be confirmed by the broker before exit");
    }
    tracing::info!("global master stopped");
    Ok(())
}

/// Stops accepting and waits until nothing is queued or outstanding (or the timeout).
pub async fn drain(gm: &Addr<actor::GmActor>, timeout: Duration) {
    gm.do_send(actor::StopAccepting);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match gm.send(actor::GetLoad).await {
            Ok(l) if l.queued == 0 && l.outstanding == 0 => return,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(_) => return,
        }
    }
    if let Ok(l) = gm.send(actor::GetLoad).await {
        let failed = gm.send(actor::FailQueued).await.unwrap_or(0);
        tracing::warn!(
            queued = l.queued,
            outstanding = l.outstanding,
            failed,
            "drain timed out; queued tasks were reported failed on the event stream"
        );
    }
}

/// The binary's entry point: parse settings, start the runtime, serve.
pub fn main_with(args: config::GmArgs) -> std::process::ExitCode {
    service_kit::runtime::run_service("global master", args.resolve(), |s| s.log_format, serve)
}
