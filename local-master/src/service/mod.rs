//! The LM as a service: the pure core in an actix actor, the internal HTTP API
//! (axum, bincode), start orders to workers over HTTP (reqwest) and state and events
//! on the broker (lapin).
//!
//! - [`config`]: flags, environment, TOML file.
//! - [`actor`]: [`actor::LmActor`], one handler per message.
//! - [`http`]: the routes.
//! - [`metrics`]: Prometheus text.

pub mod actor;
pub mod config;
pub mod http;
pub mod metrics;

use actix::Actor;
use anyhow::{Context as _, Result};
use axum::serve::ListenerExt as _;
use service_kit::amqp::Publisher;
use service_kit::sinks::{amqp_event_sink, amqp_snapshot_sink};
use std::time::{Duration, Instant};

/// Runs the LM until SIGTERM/SIGINT, then drains: stops accepting launches, waits for
/// running tasks to finish (up to the drain timeout), flushes the broker and returns.
pub async fn serve(s: config::LmSettings) -> Result<()> {
    let publisher = Publisher::start(s.amqp.clone());
    let lm = actor::LmActor::new(
        &s.spec,
        s.gms,
        s.heartbeat,
        s.workers,
        amqp_snapshot_sink(publisher.clone()),
        amqp_event_sink(publisher.clone()),
        s.publish_min_interval,
    )
    .start();
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    let local = listener.local_addr()?;
    tracing::info!(lm = %s.spec.id, listen = %local, nodes = s.spec.node_count(), workers = s.workers, "local master listening");
    println!("listening on http://{local}");
    let app = http::router(http::LmApi {
        lm: lm.clone(),
        client: http::worker_client(),
    });
    axum::serve(
        listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        app,
    )
    .with_graceful_shutdown(service_kit::shutdown::signal())
    .await?;
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
    service_kit::runtime::run_service("local master", args.resolve(), |s| s.log_format, serve)
}
