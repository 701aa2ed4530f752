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
//! subscriptions and the HTTP server, and drains on SIGTERM.

pub mod actor;
pub mod admission;
pub mod config;
pub mod durable;
pub mod http;
pub mod observe;

// The paths `config` (owned with the configuration) names its types by.
pub use admission::lra_api;
pub use durable::idempotency;
pub use observe::status;

use actor::{deliver, lra_actor, mq};
use admission::{api, route, users};
use durable::{journal, shutdown, standby};
use http::logs;

use crate::core::GmConfig;
use actix::Actor;
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
        Some(s.id),
    )?;
    let users = load_users(&s)?;
    // Stops the service on SIGTERM/SIGINT, or when an LM says a newer life of this
    // GM took over (then without draining; see `standby::Fence`).
    let fence = Arc::new(standby::Fence::default());
    let mut stop: Option<Stop> = Some({
        let fence = fence.clone();
        Box::pin(async move {
            tokio::select! {
                () = service_kit::shutdown::signal() => {}
                () = fence.tripped() => {}
            }
        })
    });
    // A standby answers on its port while it waits for the journal (see `standby`).
    let mut serving = match (&s.standby, &s.data_dir) {
        (Some(_), Some(dir)) => {
            let front = standby::Front::new(s.id, &dir.join("journal.redb"));
            let router = front.router();
            let tls = s.tls.clone();
            let local = listener.local_addr()?;
            let stop = stop
                .take()
                .unwrap_or_else(|| Box::pin(std::future::pending()));
            let server =
                tokio::spawn(
                    async move { service_kit::tls::serve(listener, router, &tls, stop).await },
                );
            tracing::info!(gm = s.id, listen = %local, journal = %dir.display(), "standby: listening (not ready) and waiting for the primary's journal");
            println!("listening on {}://{local}", s.tls.scheme());
            Serving::Standby { front, server }
        }
        _ => Serving::Direct(listener),
    };
    // The journal first: it is what a standby waits for, and it fixes this life.
    let opened = match (&s.data_dir, &mut serving) {
        (Some(dir), Serving::Standby { server, .. }) => {
            let poll = s.standby.unwrap_or(Duration::from_millis(500));
            tokio::select! {
                taken = standby::wait_for_journal(dir, &s.cluster_name, poll) => {
                    let (journal, recovered, waited) = taken?;
                    tracing::warn!(gm = s.id, waited_s = waited.as_secs_f64(), jobs = recovered.len(), "standby: the primary's journal is free (the primary died): taking over");
                    Some((journal, recovered))
                }
                ended = server => {
                    ended.context("the standby's HTTP server task failed")??;
                    tracing::info!("standby stopped before taking over");
                    return Ok(());
                }
            }
        }
        (Some(dir), Serving::Direct(_)) => match journal::Journal::open(dir, &s.cluster_name) {
            Ok(opened) => Some(opened),
            Err(e) if e.is_locked() => anyhow::bail!(
                "{e}: another process holds this GM's journal (its primary, or a standby that took over); to wait for it and take over when it dies, start this one with --standby"
            ),
            Err(e) => return Err(e.into()),
        },
        (None, _) => None,
    };
    let mut opened = opened;
    // This life: the start time, above the journal's last life whatever the clock.
    // Without a journal the start time numbers the batches but fences nothing (it
    // may go back with the clock): life 0.
    let (first_batch_seq, life) = match &mut opened {
        Some((journal, _)) => {
            let life = journal.begin_life(service_kit::clock::now().0)?;
            tracing::info!(
                gm = s.id,
                life,
                "life started (LMs refuse the requests of older lives of this GM)"
            );
            (life, life)
        }
        None => (service_kit::clock::now().0, 0),
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
        session: None,
        signing: service_kit::auth::Signing::new(
            s.cluster_secret.as_ref(),
            service_kit::roles::Role::Lm,
        ),
    };
    let links: Vec<deliver::LmLink> = s
        .lm_urls
        .iter()
        .map(|u| Arc::new(link("/v1/messages", u)) as deliver::LmLink)
        .collect();
    let publisher = Publisher::start(s.amqp.clone(), s.cluster_name.clone())
        .with_backlog_limit(s.max_broker_backlog_bytes);
    let lra_groups = s.lra.groups.clone();
    // Before `s.lra` moves into the core's configuration.
    let route = route_to_designated(&s);
    let limits = limits(&s, &publisher);
    let core = GmConfig {
        batch_size: s.batch_size,
        designated_gm: GmId(s.designated_gm),
        lra: s.lra,
        fairness: s.fairness.clone(),
        queueable_top_k: s.queueable_top_k,
        queueable_cap: s.queueable_cap,
        queueable_quota: s.queueable_quota,
        // A restarted GM must not reuse its previous life's batch numbers (the LMs
        // would answer them from their record of that life); its life fences the
        // older ones at the LMs.
        first_batch_seq,
        life,
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
    .with_lm_urls(s.lm_urls.clone())
    .with_fence(fence.clone());
    let idempotency = Arc::new(match &s.data_dir {
        Some(dir) => {
            let keys = open_idempotency(dir, &s.cluster_name, s.idempotency).await?;
            tracing::info!(keys = keys.len(), "idempotency keys read back");
            keys
        }
        None => idempotency::Idempotency::in_memory(s.idempotency),
    });
    match (&s.data_dir, opened) {
        (Some(dir), Some((journal, recovered))) => {
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
        _ => tracing::warn!(
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
    let senders = Arc::new(mq::SnapshotSenders::new(s.lm_broker_user.clone()));
    let (broker, subscription) =
        mq::subscribe_state(s.amqp.clone(), cluster.clone(), senders.clone(), gm.clone());
    // The designated GM learns the ends of its LRA containers from the task events.
    let ends = (s.designated_gm == s.id)
        .then(|| mq::subscribe_ends(s.amqp.clone(), cluster.clone(), gm.clone()));
    let standby_status = match &serving {
        Serving::Standby { front, .. } => Some(front.status.clone()),
        Serving::Direct(_) => None,
    };
    let app = http::router(http::ApiState {
        gm: gm.clone(),
        max_job_tasks: s.max_job_tasks,
        queues: api::QueueTable {
            me: GmId(s.id),
            fairness: s.fairness.clone(),
        },
        broker: Some(broker),
        senders: Some(senders),
        lra_groups,
        route: Some(Arc::new(route)),
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
        standby: standby_status,
        limits: Some(limits),
    });
    let queues = s.fairness.as_ref().map_or(0, |f| f.queues.len());
    match serving {
        Serving::Direct(listener) => {
            let local = listener.local_addr()?;
            tracing::info!(gm = s.id, cluster = %s.cluster_name, listen = %local, lms = s.lm_urls.len(), queues, "global master listening");
            println!("listening on {}://{local}", s.tls.scheme());
            let stop = stop
                .take()
                .unwrap_or_else(|| Box::pin(std::future::pending()));
            service_kit::tls::serve(listener, app, &s.tls, stop).await?;
        }
        Serving::Standby { front, server } => {
            front.take_over(app);
            tracing::info!(gm = s.id, cluster = %s.cluster_name, lms = s.lm_urls.len(), queues, "took over: global master serving the full API");
            server.await.context("the HTTP server task failed")??;
        }
    }
    if fence.is_tripped() {
        // Not drained: the queued work is the newer life's (in the journal), and
        // this life's requests are refused anyway.
        subscription.close().await;
        for sub in ends.into_iter().flatten() {
            sub.close().await;
        }
        publisher.close(Duration::from_secs(5)).await;
        anyhow::bail!(
            "GM {} stopped: fenced by a newer life of this GM (a standby took over, or another process runs this GM id)",
            s.id
        );
    }
    shutdown::drain(&gm, s.drain_timeout).await;
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

/// The API users from `--tokens-file` (watched for changes), or `None` where open
/// mode is allowed.
fn load_users(s: &config::GmSettings) -> Result<Option<Arc<users::UserTable>>> {
    match &s.tokens_file {
        Some(path) => {
            let table = Arc::new(users::UserTable::load(path)?);
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

/// How this GM forwards work for the designated GM.
fn route_to_designated(s: &config::GmSettings) -> route::Route {
    route::Route {
        me: GmId(s.id),
        designated: GmId(s.designated_gm),
        designated_url: s.designated_url.clone(),
        client: http_client_with(
            s.launch_timeout,
            s.cluster_secret.as_ref(),
            Some(&s.cluster_name),
        ),
        signing: service_kit::auth::Signing::new(
            s.cluster_secret.as_ref(),
            service_kit::roles::Role::Gm,
        ),
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
type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How the listener is served: directly, or through a standby's [`standby::Front`]
/// (already serving, in its own task).
enum Serving {
    Direct(tokio::net::TcpListener),
    Standby {
        front: standby::Front,
        server: tokio::task::JoinHandle<Result<()>>,
    },
}

/// Opens the idempotency keys' store. Right after a takeover the dead primary's
/// lock on it may outlive its journal's by a moment (the kernel closes a dead
/// process's files one by one): a locked store is tried again for a few seconds.
async fn open_idempotency(
    dir: &std::path::Path,
    cluster: &common::ClusterName,
    limits: idempotency::Limits,
) -> Result<idempotency::Idempotency> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match idempotency::Idempotency::open(dir, cluster, limits, service_kit::clock::now()) {
            Err(e) if e.to_string().contains("already open") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

/// The binary's entry point: parse settings, start the runtime, serve.
pub fn main_with(args: config::GmArgs) -> std::process::ExitCode {
    service_kit::runtime::run_service("global master", args.resolve(), |s| s.log_format, serve)
}
