//! RabbitMQ links (lapin 2 on the tokio runtime).
//!
//! `amqps://` URLs connect with TLS (rustls; the system roots plus the CA of
//! `--tls-ca-file`) and fail when the handshake fails, never falling back to plain
//! text; `amqp://` is plain. The password may come from a file
//! ([`resolve_url`], `MEGHA_AMQP_PASSWORD_FILE`) rather than the URL, and URLs are
//! logged without it ([`redact`]).
//!
//! - [`Publisher`]: a background task that owns the connection, publishes in batches
//!   with publisher confirms, and on any failure reconnects with exponential backoff
//!   and resends the unconfirmed batch (so a broker restart loses nothing; a consumer
//!   may see a message twice and must be idempotent).
//! - [`subscribe`]: binds a queue to an exchange and feeds every message to a handler,
//!   reconnecting and re-binding after connection loss.
//!
//! Exchanges and queues are named after the cluster ([`crate::topology`]) and every
//! message carries the cluster's name as its `app_id`; a subscriber refuses (counts,
//! logs, never hands on) a message naming another cluster or none.

use crate::cluster::Cluster;
use crate::topology::Exchange;
use common::ClusterName;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Health of one broker link, for `/metrics` and `/healthz`.
#[derive(Debug, Default)]
pub struct LinkStatus {
    pub connected: AtomicBool,
    pub reconnects: AtomicU64,
    pub messages: AtomicU64,
    /// Publisher: body bytes accepted and not yet confirmed by the broker.
    pub pending_bytes: AtomicU64,
}

impl LinkStatus {
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Environment variable naming a file that holds the broker password.
pub const PASSWORD_FILE_ENV: &str = "MEGHA_AMQP_PASSWORD_FILE";

/// Checks the scheme of a broker URL and, when `MEGHA_AMQP_PASSWORD_FILE` names a
/// file, puts its content (trimmed, percent-encoded) in the URL as the password.
pub fn resolve_url(url: String) -> anyhow::Result<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        anyhow::bail!(
            "--amqp `{}`: not a URL (amqp://... or amqps://...)",
            redact(&url)
        );
    };
    if scheme != "amqp" && scheme != "amqps" {
        anyhow::bail!(
            "--amqp `{}`: the scheme must be amqp or amqps (TLS)",
            redact(&url)
        );
    }
    let Ok(file) = std::env::var(PASSWORD_FILE_ENV) else {
        return Ok(url);
    };
    let password = std::fs::read_to_string(&file)
        .map_err(|e| anyhow::anyhow!("{PASSWORD_FILE_ENV} {file}: {e}"))?;
    let encoded: String = password
        .trim()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        anyhow::bail!(
            "{PASSWORD_FILE_ENV} is set but --amqp `{}` names no user (amqp://USER@host/vhost)",
            redact(&url)
        );
    };
    let user = userinfo.split(':').next().unwrap_or_default();
    Ok(format!("{scheme}://{user}:{encoded}@{host}/{path}"))
}

/// The URL without its password (for logs and errors).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}:***@{host}")
        }
        None => authority.to_owned(),
    };
    match path {
        Some(p) => format!("{scheme}://{authority}/{p}"),
        None => format!("{scheme}://{authority}"),
    }
}

/// Why a broker link failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// An `amqps://` handshake failed (unknown CA, wrong name, not a TLS listener...):
    /// nothing was sent, and nothing is retried in plain text.
    #[error("TLS handshake with the broker failed: {0} (the broker's certificate must name the URL's host and be signed by a CA this process trusts: the system roots or --tls-ca-file)")]
    Tls(lapin::Error),
    #[error(transparent)]
    Amqp(#[from] lapin::Error),
}

impl LinkError {
    /// Classifies a connection error of `url`: on `amqps://`, an I/O error carrying a
    /// rustls error is the TLS handshake's.
    fn of_connect(url: &str, e: lapin::Error) -> LinkError {
        let tls = url.starts_with("amqps://")
            && matches!(&e, lapin::Error::IOError(io)
                if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()));
        if tls {
            LinkError::Tls(e)
        } else {
            LinkError::Amqp(e)
        }
    }
}

/// Connects and declares the exchanges of `cluster`.
async fn connect(url: &str, cluster: &ClusterName) -> Result<(Connection, Channel), LinkError> {
    let (conn, ch) = open(url).await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        &Exchange::State.name(cluster),
        ExchangeKind::Fanout,
        durable,
        FieldTable::default(),
    )
    .await?;
    ch.exchange_declare(
        &Exchange::Events.name(cluster),
        ExchangeKind::Topic,
        durable,
        FieldTable::default(),
    )
    .await?;
    Ok((conn, ch))
}

/// Connects (and opens a channel), declaring nothing.
async fn open(url: &str) -> Result<(Connection, Channel), LinkError> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio);
    let conn = if url.starts_with("amqps://") {
        // lapin is built with rustls: the handshake happens or the connection fails.
        crate::tls::install_provider();
        let tls = lapin::tcp::OwnedTLSConfig {
            identity: None,
            cert_chain: crate::tls::extra_ca_pem().map(str::to_owned),
        };
        Connection::connect_with_config(url, props, tls)
            .await
            .map_err(|e| LinkError::of_connect(url, e))?
    } else {
        Connection::connect(url, props).await?
    };
    let ch = conn.create_channel().await?;
    Ok((conn, ch))
}

/// Waits until a broker answers at `url` (or `timeout` passes).
pub async fn probe(url: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, open(url)).await {
        Ok(Ok((conn, _))) => {
            let _ = conn.close(200, "probe").await;
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[derive(Debug)]
struct Msg {
    exchange: Exchange,
    key: String,
    body: Vec<u8>,
    persistent: bool,
}

#[derive(Debug)]
enum Cmd {
    Msg(Msg),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// Publishes to the broker from a background task; cheap to clone.
///
/// Nothing handed to it is dropped: while the broker is away messages wait in memory.
/// That buffer is bounded by backpressure rather than by loss: past
/// [`Publisher::with_backlog_limit`] bytes the publisher is [`Publisher::backlogged`],
/// and the services stop accepting the work that would publish more (a GM answers
/// submissions 503 with `Retry-After`) until the broker confirms the backlog.
#[derive(Clone, Debug)]
pub struct Publisher {
    tx: mpsc::UnboundedSender<Cmd>,
    pub status: Arc<LinkStatus>,
    backlog_limit: u64,
}

impl Publisher {
    /// Spawns the publishing task on the current tokio runtime, publishing on the
    /// exchanges of `cluster`. It connects lazily and keeps retrying while the broker
    /// is away; messages wait in memory.
    pub fn start(url: String, cluster: ClusterName) -> Publisher {
        let (tx, rx) = mpsc::unbounded_channel();
        let status = Arc::new(LinkStatus::default());
        tokio::spawn(run_publisher(url, cluster, rx, status.clone()));
        Publisher {
            tx,
            status,
            backlog_limit: u64::MAX,
        }
    }

    /// Sets the unconfirmed bytes past which [`Publisher::backlogged`] is true.
    pub fn with_backlog_limit(mut self, bytes: u64) -> Self {
        self.backlog_limit = bytes;
        self
    }

    /// Body bytes accepted and not yet confirmed by the broker.
    pub fn pending_bytes(&self) -> u64 {
        self.status.pending_bytes.load(Ordering::Relaxed)
    }

    /// True while more than the backlog limit waits for the broker: take no new work
    /// that would publish (answer 503 with `Retry-After`).
    pub fn backlogged(&self) -> bool {
        self.pending_bytes() > self.backlog_limit
    }

    pub fn publish(&self, exchange: Exchange, key: String, body: Vec<u8>, persistent: bool) {
        self.status
            .pending_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Msg(Msg {
            exchange,
            key,
            body,
            persistent,
        }));
    }

    /// Flushes (up to `timeout`), then closes the connection cleanly (shutdown).
    pub async fn close(&self, timeout: Duration) -> bool {
        let flushed = self.flush(timeout).await;
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Close(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), rx).await;
        }
        flushed
    }

    /// Resolves once everything published before the call is confirmed by the broker,
    /// or after `timeout`. Returns false on timeout.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(tx)).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(timeout, rx).await, Ok(Ok(())))
    }
}

async fn run_publisher(
    url: String,
    cluster: ClusterName,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    status: Arc<LinkStatus>,
) {
    let mut batch: Vec<Msg> = Vec::new();
    // Bytes of `batch` as published (before coalescing), released once confirmed.
    let mut batch_bytes: u64 = 0;
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    let mut session: Option<(Connection, Channel)> = None;
    let mut delay = Duration::from_millis(100);
    loop {
        if batch.is_empty() && flushes.is_empty() {
            let Some(cmd) = rx.recv().await else { return };
            let mut next = Some(cmd);
            while let Some(cmd) = next.take() {
                match cmd {
                    Cmd::Msg(m) => {
                        batch_bytes += m.body.len() as u64;
                        batch.push(m)
                    }
                    Cmd::Flush(f) => {
                        flushes.push(f);
                        break;
                    }
                    Cmd::Close(done) => {
                        if let Some((conn, _)) = session.take() {
                            let _ = conn.close(200, "shutdown").await;
                        }
                        status.connected.store(false, Ordering::Relaxed);
                        let _ = done.send(());
                        return;
                    }
                }
                if batch.len() < 2048 {
                    next = rx.try_recv().ok();
                }
            }
        }
        if session.is_none() {
            match connect(&url, &cluster).await {
                Ok((conn, ch)) => match ch.confirm_select(ConfirmSelectOptions::default()).await {
                    Ok(()) => {
                        if delay > Duration::from_millis(100) {
                            tracing::info!(url = %redact(&url), "publisher reconnected to the broker");
                        }
                        status.connected.store(true, Ordering::Relaxed);
                        delay = Duration::from_millis(100);
                        session = Some((conn, ch));
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot enable publisher confirms"),
                },
                Err(e) => {
                    status.connected.store(false, Ordering::Relaxed);
                    tracing::warn!(url = %redact(&url), error = %e, retry_in_ms = delay.as_millis() as u64, "broker unreachable");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        let Some((_, ch)) = session.as_ref() else {
            continue;
        };
        coalesce(&mut batch);
        match publish_all(ch, &cluster, &batch).await {
            Ok(()) => {
                status
                    .pending_bytes
                    .fetch_sub(std::mem::take(&mut batch_bytes), Ordering::Relaxed);
                status
                    .messages
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                batch.clear();
                for f in flushes.drain(..) {
                    let _ = f.send(());
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, unconfirmed = batch.len(), "publish failed; reconnecting");
                status.connected.store(false, Ordering::Relaxed);
                status.reconnects.fetch_add(1, Ordering::Relaxed);
                session = None;
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Largest event message [`coalesce`] builds.
const MAX_COALESCED: usize = 1 << 20;

/// Merges runs of adjacent event messages with the same routing key into one message
/// (their bodies are JSON arrays, concatenated in order). Order is kept exactly: only
/// neighbours merge. Under load the publisher drains bursts of small messages, and
/// each message costs the broker far more than its bytes.
fn coalesce(batch: &mut Vec<Msg>) {
    let is_array = |b: &[u8]| b.len() >= 2 && b[0] == b'[' && b[b.len() - 1] == b']';
    let mut out: Vec<Msg> = Vec::with_capacity(batch.len());
    for m in batch.drain(..) {
        if let Some(prev) = out.last_mut() {
            if prev.exchange == Exchange::Events
                && m.exchange == Exchange::Events
                && prev.key == m.key
                && prev.persistent == m.persistent
                && is_array(&prev.body)
                && is_array(&m.body)
                && m.body.len() > 2
                && prev.body.len() + m.body.len() <= MAX_COALESCED
            {
                prev.body.pop();
                if prev.body.len() > 1 {
                    prev.body.push(b',');
                }
                prev.body.extend_from_slice(&m.body[1..]);
                continue;
            }
        }
        out.push(m);
    }
    *batch = out;
}

async fn publish_all(
    ch: &Channel,
    cluster: &ClusterName,
    batch: &[Msg],
) -> Result<(), lapin::Error> {
    let mut confirms = Vec::with_capacity(batch.len());
    let names = [Exchange::State, Exchange::Events].map(|e| (e, e.name(cluster)));
    for m in batch {
        let props = BasicProperties::default().with_app_id(cluster.as_str().into());
        let props = if m.persistent {
            props.with_delivery_mode(2)
        } else {
            props
        };
        let exchange = names
            .iter()
            .find(|(e, _)| *e == m.exchange)
            .map_or("", |(_, n)| n.as_str());
        let confirm = ch
            .basic_publish(
                exchange,
                &m.key,
                BasicPublishOptions::default(),
                &m.body,
                props,
            )
            .await?;
        confirms.push(confirm);
    }
    for c in confirms {
        if c.await?.is_nack() {
            return Err(lapin::Error::InvalidChannelState(
                lapin::ChannelState::Error,
            ));
        }
    }
    Ok(())
}

/// A named durable queue without consumers is deleted by the broker after this long.
const DURABLE_QUEUE_EXPIRY_MS: u32 = 60_000;

/// Deliveries acknowledged together (must stay below the prefetch).
const ACK_GROUP: u32 = 64;

/// What to consume.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub exchange: Exchange,
    pub binding: String,
    /// A durable named queue that outlives connection loss and broker restarts (its
    /// broker name is prefixed with the cluster's, see [`crate::topology::queue_name`]), or
    /// `None` for an exclusive server-named queue that lives as long as the connection.
    pub queue: Option<String>,
    /// Acknowledge messages after the handler ran (at-least-once), in groups.
    pub ack: bool,
    pub prefetch: u16,
}

/// Stops a subscription and closes its connection cleanly.
#[derive(Debug)]
pub struct SubscriptionHandle {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl SubscriptionHandle {
    pub async fn close(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.task).await;
    }
}

/// Consumes `sub` on the exchanges of `cluster` until closed, calling
/// `handler(routing_key, body)` for every message of that cluster (others are
/// refused and counted); reconnects with backoff after any failure.
pub fn subscribe<F>(
    url: String,
    cluster: Cluster,
    sub: Subscription,
    handler: F,
) -> (Arc<LinkStatus>, SubscriptionHandle)
where
    F: Fn(&str, &[u8]) + Send + Sync + 'static,
{
    let status = Arc::new(LinkStatus::default());
    let st = status.clone();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let mut delay = Duration::from_millis(100);
        loop {
            let mut stop = stop.clone();
            match consume(&url, &cluster, &sub, &st, &handler, &mut delay, &mut stop).await {
                Ok(()) if *stop.borrow() => return,
                Ok(()) => tracing::warn!(exchange = ?sub.exchange, "consumer ended; reconnecting"),
                Err(e) => {
                    tracing::warn!(url = %redact(&url), exchange = ?sub.exchange, error = %e, retry_in_ms = delay.as_millis() as u64, "subscription lost; reconnecting")
                }
            }
            if st.connected.swap(false, Ordering::Relaxed) {
                st.reconnects.fetch_add(1, Ordering::Relaxed);
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.changed() => return,
            }
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    });
    (
        status,
        SubscriptionHandle {
            stop: stop_tx,
            task,
        },
    )
}

async fn consume<F: Fn(&str, &[u8])>(
    url: &str,
    cluster: &Cluster,
    sub: &Subscription,
    status: &LinkStatus,
    handler: &F,
    delay: &mut Duration,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Result<(), LinkError> {
    if *stop.borrow() {
        return Ok(());
    }
    let (conn, ch) = connect(url, &cluster.name).await?;
    let exchange = sub.exchange.name(&cluster.name);
    let mut args = FieldTable::default();
    let named = sub
        .queue
        .as_ref()
        .map(|q| crate::topology::queue_name(&cluster.name, q));
    let (name, opts) = match &named {
        Some(name) => {
            // A durable queue outlives a broker restart, but must not outlive its
            // consumer for long: the broker deletes it after this much idle time.
            args.insert(
                "x-expires".into(),
                lapin::types::AMQPValue::LongUInt(DURABLE_QUEUE_EXPIRY_MS),
            );
            (
                name.as_str(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
            )
        }
        None => (
            "",
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..Default::default()
            },
        ),
    };
    let queue = ch.queue_declare(name, opts, args).await?;
    let qname = queue.name().as_str().to_owned();
    ch.queue_bind(
        &qname,
        &exchange,
        &sub.binding,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.basic_qos(sub.prefetch, BasicQosOptions::default())
        .await?;
    let mut consumer = ch
        .basic_consume(
            &qname,
            "",
            BasicConsumeOptions {
                no_ack: !sub.ack,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    status.connected.store(true, Ordering::Relaxed);
    *delay = Duration::from_millis(100);
    tracing::info!(%exchange, queue = %qname, "subscribed");
    // Acknowledged in groups (`multiple`): fewer round trips; after a reconnection
    // the broker redelivers at most one group, which consumers already tolerate.
    let mut unacked = 0u32;
    loop {
        let delivery = tokio::select! {
            d = consumer.next() => d,
            _ = stop.changed() => {
                let _ = conn.close(200, "shutdown").await;
                return Ok(());
            }
        };
        let Some(delivery) = delivery else { break };
        let delivery = delivery?;
        match delivery.properties.app_id() {
            Some(c) if c.as_str() == cluster.name.as_str() => {
                handler(delivery.routing_key.as_str(), &delivery.data)
            }
            other => cluster.refused(&exchange, other.as_ref().map_or("(none)", |c| c.as_str())),
        }
        status.messages.fetch_add(1, Ordering::Relaxed);
        unacked += 1;
        if sub.ack && unacked >= ACK_GROUP {
            unacked = 0;
            delivery.ack(BasicAckOptions { multiple: true }).await?;
        }
    }
    Ok(())
}

/// Deletes the durable queue `name` of `cluster` (end of a replay).
pub async fn delete_queue(url: &str, cluster: &ClusterName, name: &str) -> Result<(), LinkError> {
    let (conn, ch) = connect(url, cluster).await?;
    let name = crate::topology::queue_name(cluster, name);
    ch.queue_delete(&name, QueueDeleteOptions::default())
        .await?;
    let _ = conn.close(200, "done").await;
    Ok(())
}

#[cfg(test)]
mod tests;
