//! The LM as a service: the pure core in an actix actor, the internal HTTP API
//! (axum, bincode), start orders to workers over HTTP (reqwest) and state and events
//! on the broker (lapin).
//!
//! - [`config`]: flags, environment, TOML file.
//! - [`actor`]: [`actor::LmActor`]: state, and carrying out each step's output; its
//!   handlers: [`actor::gm`] (requests from GMs, any `GmToLm` message, answered after
//!   their orders reached the workers), [`actor::workers`] (worker registration and
//!   reports), [`actor::preempt`] (preemption counters, fairness), and its
//!   queries: [`actor::metrics`] (Prometheus text), [`actor::nodes`] (the nodes
//!   view). Its fields are private to it and its handlers.
//! - [`http`]: the routes (they ask the actor by message only).
//! - [`orders`]: start/kill orders to workers, preempted tasks back to GMs.
//! - [`backpressure`]: launches wait (503) while too many events wait for the broker.
//! - [`life`], [`drained`]: what the LM keeps in its data dir (its life, the nodes
//!   an operator drained).

pub mod actor;
pub mod backpressure;
pub mod config;
pub mod drained;
pub mod http;
pub mod life;
pub mod orders;

use actix::Actor;
use anyhow::{Context as _, Result};
use service_kit::amqp::Publisher;
use service_kit::links::{http_client_with, HttpLink};
use service_kit::sinks::{amqp_event_sink, amqp_snapshot_sink};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the LM until SIGTERM/SIGINT, then drains: stops accepting launches, waits for
/// running tasks to finish (up to the drain timeout), flushes the broker and returns.
pub async fn serve(s: config::LmSettings) -> Result<()> {
    // First, so that a taken address fails the start before any actor exists.
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    service_kit::auth::check_start(
        s.tls.ca.as_deref(),
        s.cluster_secret.as_ref(),
        &s.listen,
        service_kit::roles::Role::Lm,
        Some(s.spec.id.0),
    )?;
    let cluster = service_kit::cluster::Cluster::new(s.cluster_name.clone(), "lm");
    // Events wait in memory while the broker is away; past the limit the LM takes
    // no new work (see `backpressure`). Snapshots: only the newest waits.
    let publisher = Publisher::start(s.amqp.clone(), s.cluster_name.clone())
        .with_backlog_limit(s.max_broker_backlog_bytes);
    // This life, above the previous one whatever the clock says (with a data dir).
    let life = match &s.data_dir {
        Some(dir) => Some(life::next(dir, service_kit::clock::now().0)?),
        None => None,
    };
    let mut lm = actor::LmActor::new(
        &s.spec,
        s.gms,
        s.heartbeat,
        s.workers,
        amqp_snapshot_sink(publisher.clone(), cluster.clone()),
        amqp_event_sink(publisher.clone()),
        s.publish_min_interval,
    );
    if let Some(life) = life {
        lm = lm.with_life(life);
    }
    if let Some(dir) = &s.data_dir {
        lm = lm.with_drained_in(dir)?;
    }
    let client = http_client_with(
        Duration::from_secs(10),
        s.cluster_secret.as_ref(),
        Some(&s.cluster_name),
    );
    let to_gms: Vec<orders::GmLink> = s
        .gm_urls
        .iter()
        .map(|u| {
            // `http://gm-0|http://gm-0-standby`: a GM and its standby, whichever
            // serves (see `service_kit::links::FailoverLink`).
            let links: Vec<orders::GmLink> = service_kit::links::alternatives(u)
                .iter()
                .map(|u| {
                    Arc::new(HttpLink {
                        client: client.clone(),
                        url: format!("{u}/v1/internal/messages"),
                        retries: 3,
                        cluster: cluster.clone(),
                        session: None,
                        signing: service_kit::auth::Signing::new(
                            s.cluster_secret.as_ref(),
                            service_kit::roles::Role::Gm,
                        ),
                    }) as orders::GmLink
                })
                .collect();
            match <[orders::GmLink; 1]>::try_from(links) {
                Ok([one]) => one,
                Err(links) => {
                    Arc::new(service_kit::links::FailoverLink::new(links)) as orders::GmLink
                }
            }
        })
        .collect();
    if to_gms.is_empty() {
        tracing::warn!("no --gm-url: the GMs will not learn when their tasks finish or fail (only the event stream will)");
    }
    if let Some(fairness) = &s.fairness {
        lm = lm.with_fairness(fairness.clone());
    }
    if let Some(queueable) = &s.queueable {
        lm = lm.with_queueable(queueable.clone());
    }
    // Task ends go to the GM that launched each task, killed tasks back to the GM of
    // their queue (--queue and --queueable require every GM's URL).
    lm = lm
        .with_gms(to_gms)
        .with_worker_timeout(s.worker_timeout)
        .with_worker_fence(s.worker_fence);
    let incarnation = lm.incarnation();
    let lm = lm.start();
    let local = listener.local_addr()?;
    tracing::info!(lm = %s.spec.id, cluster = %s.cluster_name, listen = %local, nodes = s.spec.node_count(), workers = s.workers, queues = s.fairness.as_ref().map_or(0, |f| f.queues.len()), queueable = s.queueable.is_some(), "local master listening");
    println!("listening on {}://{local}", s.tls.scheme());
    let app = http::router(http::LmApi {
        lm: lm.clone(),
        client: http::worker_client(s.cluster_secret.as_ref(), &s.cluster_name),
        incarnation,
        publisher: Some(publisher.clone()),
        backpressure: Some(Arc::new(backpressure::BrokerBackpressure::new(
            publisher.clone(),
        ))),
        guard: service_kit::auth::ClusterGuard::new(s.cluster_secret.clone(), "lm")
            .with_callers(http::callers),
        worker_networks: Arc::new(s.worker_networks.clone()),
        cluster,
    });
    service_kit::tls::serve(listener, app, &s.tls, service_kit::shutdown::signal()).await?;
    let deadline = Instant::now() + s.drain_timeout;
    while Instant::now() < deadline {
        match lm.send(actor::GetLoad).await {
            Ok((0, 0, _)) | Err(_) => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    if !publisher.close(Duration::from_secs(5)).await {
        tracing::warn!("some events could not be confirmed by the broker before exit");
    }
    tracing::info!("local master stopped");
    Ok(())
}

/// The binary's entry point.
pub fn main_with(args: config::LmArgs) -> std::process::ExitCode {
    service_kit::runtime::run_service("local master", args.resolve(), |s| s.process, serve)
}
