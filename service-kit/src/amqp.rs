//! RabbitMQ links (lapin 2 on the tokio runtime).
//!
//! `amqps://` URLs connect with TLS (rustls; the system roots plus the CA of
//! `--tls-ca-file`) and fail when the handshake fails, never falling back to plain
//! text; `amqp://` is plain. The password may come from a file
//! ([`resolve_url`], `MEGHA_AMQP_PASSWORD_FILE`) rather than the URL, and URLs are
//! logged without it ([`redact`]).
//!
//! - [`Publisher`] ([`publish`]): a background task that owns the connection,
//!   publishes in batches with publisher confirms, and on any failure reconnects with
//!   exponential backoff and resends the unconfirmed batch (so a broker restart loses
//!   nothing; a consumer may see a message twice and must be idempotent). Its memory
//!   while the broker is away is bounded: events by backpressure
//!   ([`Publisher::backlogged`]), state snapshots by keeping only the newest.
//! - [`subscribe`]: binds a queue to an exchange and feeds every message to a handler,
//!   reconnecting and re-binding after connection loss.
//!
//! Exchanges and queues are named after the cluster ([`crate::topology`]) and every
//! message carries the cluster's name as its `app_id`; a subscriber refuses (counts,
//! logs, never hands on) a message naming another cluster or none.
//!
//! Every message also carries the broker user the publisher authenticated as in its
//! `user_id` property ([`broker_user`]). RabbitMQ refuses a publication whose
//! `user_id` is not the connection's user, so a consumer can trust it as the
//! sender's identity: [`subscribe_as`] hands it to the handler (the GM takes an LM's
//! snapshot only from that LM's broker user, docs/security.md).

use crate::cluster::Cluster;
use crate::topology::Exchange;
use common::ClusterName;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub mod publish;
pub use publish::Publisher;

/// Health of one broker link, for `/metrics` and `/healthz`.
#[derive(Debug, Default)]
pub struct LinkStatus {
    pub connected: AtomicBool,
    pub reconnects: AtomicU64,
    pub messages: AtomicU64,
    /// Publisher: body bytes accepted and not yet confirmed by the broker.
    pub pending_bytes: AtomicU64,
    /// Publisher: state messages replaced by a newer one of their slot before the
    /// broker took them ([`Publisher::publish_latest`]).
    pub superseded: AtomicU64,
    /// Publisher: a replacement was logged since the last (re)connection.
    superseding: AtomicBool,
}

impl LinkStatus {
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Environment variable naming a file that holds the broker password.
pub const PASSWORD_FILE_ENV: &str = "MEGHA_AMQP_PASSWORD_FILE";
/// Environment variable naming a file that holds the broker user (so that one URL
/// serves every process of a deployment, each process's volume naming its user).
pub const USER_FILE_ENV: &str = "MEGHA_AMQP_USER_FILE";

/// Checks the scheme of a broker URL and, when `MEGHA_AMQP_USER_FILE` or
/// `MEGHA_AMQP_PASSWORD_FILE` names a file (set and not empty), puts its content
/// (trimmed, percent-encoded) in the URL as the user or the password.
pub fn resolve_url(url: String) -> anyhow::Result<String> {
    let read = |var: &str| -> anyhow::Result<Option<String>> {
        let file = std::env::var(var).unwrap_or_default();
        if file.is_empty() {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(&file).map_err(|e| anyhow::anyhow!("{var} {file}: {e}"))?;
        Ok(Some(text.trim().to_owned()))
    };
    resolve_url_with(url, read(USER_FILE_ENV)?, read(PASSWORD_FILE_ENV)?)
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// [`resolve_url`] with the user and password files' contents given.
pub fn resolve_url_with(
    url: String,
    user: Option<String>,
    password: Option<String>,
) -> anyhow::Result<String> {
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
    if user.is_none() && password.is_none() {
        return Ok(url);
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    let (url_user, url_password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((user, password)) => (Some(user), Some(password.to_owned())),
            None => (Some(u), None),
        },
        None => (None, None),
    };
    let user = match (url_user, user.as_deref().map(percent_encode)) {
        (Some(a), Some(b)) if a != b => anyhow::bail!(
            "--amqp `{}` names broker user `{a}` and {USER_FILE_ENV} names `{b}`: give the user in one place",
            redact(&url)
        ),
        (_, Some(b)) => b,
        (Some(a), None) => a.to_owned(),
        (None, None) => anyhow::bail!(
            "{PASSWORD_FILE_ENV} is set but --amqp `{}` names no user (amqp://USER@host/vhost, or {USER_FILE_ENV})",
            redact(&url)
        ),
    };
    match password.as_deref().map(percent_encode).or(url_password) {
        Some(p) => Ok(format!("{scheme}://{user}:{p}@{host}/{path}")),
        None => Ok(format!("{scheme}://{user}@{host}/{path}")),
    }
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

/// The broker user a connection to `url` authenticates as: the URL's user
/// (percent-decoded), or `guest` when it names none (lapin's default). Publishers put
/// it in every message's `user_id`, which the broker checks.
pub fn broker_user(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split_once('/').map_or(rest, |(a, _)| a);
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return "guest".to_owned();
    };
    let user = userinfo.split(':').next().unwrap_or_default();
    if user.is_empty() {
        return "guest".to_owned();
    }
    percent_decode(user)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
    subscribe_as(url, cluster, sub, move |key, _, body| handler(key, body))
}

/// [`subscribe`], calling `handler(routing_key, user_id, body)`: `user_id` is the
/// message's `user_id` property, the broker user its publisher authenticated as
/// (the broker refuses any other), `None` when the publisher set none.
pub fn subscribe_as<F>(
    url: String,
    cluster: Cluster,
    sub: Subscription,
    handler: F,
) -> (Arc<LinkStatus>, SubscriptionHandle)
where
    F: Fn(&str, Option<&str>, &[u8]) + Send + Sync + 'static,
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

async fn consume<F: Fn(&str, Option<&str>, &[u8])>(
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
            Some(c) if c.as_str() == cluster.name.as_str() => handler(
                delivery.routing_key.as_str(),
                delivery.properties.user_id().as_ref().map(|u| u.as_str()),
                &delivery.data,
            ),
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
