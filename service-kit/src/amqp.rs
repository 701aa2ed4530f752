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
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::FieldTable;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

mod connection;
pub mod publish;
use connection::connect;
pub use connection::{
    broker_user, probe, redact, resolve_url, resolve_url_with, LinkError, LinkStatus,
    PASSWORD_FILE_ENV, USER_FILE_ENV,
};
pub use publish::Publisher;

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
        let mut backoff =
            crate::retry::Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        loop {
            let mut stop = stop.clone();
            let consumed =
                consume(&url, &cluster, &sub, &st, &handler, &mut backoff, &mut stop).await;
            let delay = backoff.next_delay();
            match consumed {
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
    backoff: &mut crate::retry::Backoff,
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
    backoff.reset();
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
