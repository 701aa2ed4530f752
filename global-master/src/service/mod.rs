//! The GM as a service: the pure core in an actix actor, the public HTTP API (axum),
//! HTTP launch links to the LMs (reqwest, bincode) and the broker (lapin).
//!
//! - [`config`]: flags, environment, TOML file.
//! - [`api`]: the submission format and its validation.
//! - [`actor`]: [`actor::GmActor`], one handler per message.
//! - [`status`]: per-task and per-job status for the API.
//! - [`report`]: pending list and metrics.
//! - [`http`]: the routes.
//! - [`mq`]: the state subscription.

pub mod actor;
pub mod api;
pub mod config;
pub mod http;
pub mod mq;
pub mod report;
pub mod status;

use crate::core::GmConfig;
use actix::{Actor, Addr};
use anyhow::{Context as _, Result};
use axum::serve::ListenerExt as _;
use common::GmId;
use service_kit::amqp::Publisher;
use service_kit::links::{http_client, HttpLink};
use service_kit::sinks::amqp_event_sink;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the GM until SIGTERM/SIGINT, then drains: stops accepting, keeps placing what
/// is queued (up to the drain timeout), flushes events and returns.
pub async fn serve(s: config::GmSettings) -> Result<()> {
    let client = http_client(s.launch_timeout);
    let links: Vec<actor::LaunchLink> = s
        .lm_urls
        .iter()
        .map(|u| {
            Arc::new(HttpLink {
                client: client.clone(),
                url: format!("{}/v1/launch", u.trim_end_matches('/')),
                retries: 3,
            }) as actor::LaunchLink
        })
        .collect();
    let publisher = Publisher::start(s.amqp.clone());
    // Queues with shares (and so preemption) are not configurable in the services
    // yet: the core runs without fairness here.
    let core = GmConfig {
        batch_size: s.batch_size,
        ..GmConfig::new(GmId(s.id), s.gms, links.len() as u16)
    };
    let gm = actor::GmActor::new(
        core,
        links,
        amqp_event_sink(publisher.clone()),
        s.max_queued,
    )
    .start();
    let (broker, subscription) = mq::subscribe_state(s.amqp.clone(), gm.clone());
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    let local = listener.local_addr()?;
    tracing::info!(gm = s.id, listen = %local, lms = s.lm_urls.len(), "global master listening");
    println!("listening on http://{local}");
    let app = http::router(http::ApiState {
        gm: gm.clone(),
        max_job_tasks: s.max_job_tasks,
        broker: Some(broker),
    });
    axum::serve(
        listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        app,
    )
    .with_graceful_shutdown(service_kit::shutdown::signal())
    .await?;
    drain(&gm, s.drain_timeout).await;
    subscription.close().await;
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
