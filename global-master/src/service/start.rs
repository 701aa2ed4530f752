//! The phases of [`super::serve`], in order: the stop signal, the listener (a
//! standby's front first), the journal and this life, the links to the LMs, the
//! idempotency keys, what the journal recovered, the API served, the broker closed.

use super::actor::{deliver, GmActor};
use super::config::GmSettings;
use super::durable::{idempotency, journal, standby};
use anyhow::{Context as _, Result};
use service_kit::amqp::{Publisher, SubscriptionHandle};
use service_kit::links::HttpLink;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How the listener is served: directly, or through a standby's [`standby::Front`]
/// (already serving, in its own task).
pub(super) enum Serving {
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

/// A journal opened with what it recovered.
pub(super) type Opened = (journal::Journal, Vec<journal::Recovered>);

/// What opening the journal came to.
pub(super) enum Journaled {
    /// Opened (`None`: no `--data-dir`).
    Opened(Option<Opened>),
    /// A standby stopped (SIGTERM) before the primary's journal came free.
    StandbyStopped,
}

/// Resolves on SIGTERM/SIGINT, or when an LM says a newer life of this GM took over.
pub(super) fn stop_signal(fence: &Arc<standby::Fence>) -> Stop {
    let fence = fence.clone();
    Box::pin(async move {
        tokio::select! {
            () = service_kit::shutdown::signal() => {}
            () = fence.tripped() => {}
        }
    })
}

/// A standby serves its front (healthz 503, API 503) on the listener at once, taking
/// the stop signal; a primary keeps the listener for the full API.
pub(super) fn listen(
    s: &GmSettings,
    listener: tokio::net::TcpListener,
    stop: &mut Option<Stop>,
) -> Result<Serving> {
    let (Some(_), Some(dir)) = (&s.standby, &s.data_dir) else {
        return Ok(Serving::Direct(listener));
    };
    let front = standby::Front::new(s.id, &dir.join("journal.redb"));
    let router = front.router();
    let tls = s.tls.clone();
    let local = listener.local_addr()?;
    let stop = stop
        .take()
        .unwrap_or_else(|| Box::pin(std::future::pending()));
    let server =
        tokio::spawn(async move { service_kit::tls::serve(listener, router, &tls, stop).await });
    tracing::info!(gm = s.id, listen = %local, journal = %dir.display(), "standby: listening (not ready) and waiting for the primary's journal");
    println!("listening on {}://{local}", s.tls.scheme());
    Ok(Serving::Standby { front, server })
}

/// Opens the journal: a standby waits until the primary's is free (or it is
/// stopped); a primary fails when another process holds it.
pub(super) async fn open_journal(s: &GmSettings, serving: &mut Serving) -> Result<Journaled> {
    let opened = match (&s.data_dir, serving) {
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
                    return Ok(Journaled::StandbyStopped);
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
    Ok(Journaled::Opened(opened))
}

/// This life: the start time, above the journal's last life whatever the clock.
/// Without a journal the start time numbers the batches but fences nothing (it may
/// go back with the clock): life 0. Returns (first batch number, life).
pub(super) fn begin_life(s: &GmSettings, opened: &mut Option<Opened>) -> Result<(u64, u64)> {
    Ok(match opened {
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
    })
}

/// One link per LM, in LM-id order.
pub(super) fn lm_links(
    s: &GmSettings,
    client: &reqwest::Client,
    cluster: &service_kit::cluster::Cluster,
) -> Vec<deliver::LmLink> {
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
    s.lm_urls
        .iter()
        .map(|u| Arc::new(link("/v1/messages", u)) as deliver::LmLink)
        .collect()
}

/// The idempotency keys: read back from `--data-dir`, else in memory.
pub(super) async fn idempotency(s: &GmSettings) -> Result<Arc<idempotency::Idempotency>> {
    Ok(Arc::new(match &s.data_dir {
        Some(dir) => {
            let keys = open_idempotency(dir, &s.cluster_name, s.idempotency).await?;
            tracing::info!(keys = keys.len(), "idempotency keys read back");
            keys
        }
        None => idempotency::Idempotency::in_memory(s.idempotency),
    }))
}

/// The actor with the journal and what it recovered; the keys of recovered jobs
/// missing from the idempotency store are taken back from the journal.
pub(super) fn with_recovered(
    gm: GmActor,
    s: &GmSettings,
    opened: Option<Opened>,
    idempotency: &idempotency::Idempotency,
) -> GmActor {
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
            gm.with_journal(journal, recovered)
        }
        _ => {
            tracing::warn!(
                "no --data-dir: accepted jobs live in memory only and are lost if this GM dies"
            );
            gm
        }
    }
}

/// Serves the full API until the stop signal: on the listener, or through the
/// standby's front that took over.
pub(super) async fn serve_api(
    s: &GmSettings,
    serving: Serving,
    app: axum::Router,
    stop: &mut Option<Stop>,
) -> Result<()> {
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
    Ok(())
}

/// Closes the broker subscriptions, then the publisher (waiting up to 5 s for the
/// broker to confirm what it holds): false when some events stayed unconfirmed.
pub(super) async fn close_broker(
    subscriptions: Vec<SubscriptionHandle>,
    publisher: &Publisher,
) -> bool {
    for sub in subscriptions {
        sub.close().await;
    }
    publisher.close(Duration::from_secs(5)).await
}
