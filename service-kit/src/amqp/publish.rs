//! [`Publisher`]: the background task that owns the publishing connection (see the
//! module documentation of [`super`]).
//!
//! Two kinds of messages, two memory policies while the broker is away or slow:
//!
//! - [`Publisher::publish`] (task events): every message waits until the broker
//!   confirms it; nothing is dropped. The bytes waiting are [`Publisher::pending_bytes`],
//!   and past [`Publisher::with_backlog_limit`] the publisher is
//!   [`Publisher::backlogged`]: the services stop taking the work that would publish
//!   more, so the buffer is bounded by backpressure, not by loss.
//! - [`Publisher::publish_latest`] (LM state snapshots): only the newest of a slot
//!   matters (a snapshot carries the LM's incarnation and version and replaces the
//!   previous one whole), so a newer message replaces the one of its slot still
//!   waiting, and at most one per slot waits (plus one in an unconfirmed batch, itself
//!   replaced before it is sent again). Each replaced message is counted
//!   ([`super::LinkStatus::superseded`]); the first while disconnected is logged.

use super::connection::{broker_user, connect, redact, LinkStatus};
use crate::topology::Exchange;
use common::ClusterName;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel, Connection};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

#[derive(Debug)]
pub(super) struct Msg {
    pub(super) exchange: Exchange,
    pub(super) key: String,
    pub(super) body: Vec<u8>,
    pub(super) persistent: bool,
    /// `Some`: only the newest message of this slot (and exchange) matters.
    pub(super) slot: Option<String>,
}

impl Msg {
    fn same_slot(&self, other: &Msg) -> bool {
        self.slot.is_some() && self.slot == other.slot && self.exchange == other.exchange
    }
}

#[derive(Debug)]
enum Cmd {
    Msg(Msg),
    /// A slot of [`Latest`] got a message: take it.
    Latest,
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

/// The newest message of each slot, not yet taken by the publishing task.
#[derive(Debug, Default)]
struct Latest {
    waiting: Mutex<Vec<Msg>>,
}

impl Latest {
    fn lock(&self) -> MutexGuard<'_, Vec<Msg>> {
        // A panic while holding the lock cannot leave the list half-changed (pushes
        // and replacements only): keep using it.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Publishes to the broker from a background task; cheap to clone.
///
/// Nothing handed to [`Publisher::publish`] is dropped: while the broker is away
/// messages wait in memory. That buffer is bounded by backpressure rather than by
/// loss: past [`Publisher::with_backlog_limit`] bytes the publisher is
/// [`Publisher::backlogged`], and the services stop accepting the work that would
/// publish more (a GM answers submissions 503 with `Retry-After`, an LM answers
/// launch batches 503) until the broker confirms the backlog. State snapshots
/// ([`Publisher::publish_latest`]) do not accumulate: a newer one replaces the one
/// waiting.
#[derive(Clone, Debug)]
pub struct Publisher {
    tx: mpsc::UnboundedSender<Cmd>,
    pub status: Arc<LinkStatus>,
    latest: Arc<Latest>,
    backlog_limit: u64,
}

impl Publisher {
    /// Spawns the publishing task on the current tokio runtime, publishing on the
    /// exchanges of `cluster`. It connects lazily and keeps retrying while the broker
    /// is away; messages wait in memory.
    pub fn start(url: String, cluster: ClusterName) -> Publisher {
        let (tx, rx) = mpsc::unbounded_channel();
        let status = Arc::new(LinkStatus::default());
        // Replacements before the first connection are not logged (the broker
        // unreachable warnings tell that story); each connection re-arms the log.
        status.superseding.store(true, Ordering::Relaxed);
        let latest = Arc::new(Latest::default());
        let task = Task {
            url,
            cluster,
            status: status.clone(),
            latest: latest.clone(),
        };
        tokio::spawn(task.run(rx));
        Publisher {
            tx,
            status,
            latest,
            backlog_limit: u64::MAX,
        }
    }

    /// Sets the unconfirmed bytes past which [`Publisher::backlogged`] is true.
    pub fn with_backlog_limit(mut self, bytes: u64) -> Self {
        self.backlog_limit = bytes;
        self
    }

    /// The limit of [`Publisher::with_backlog_limit`] (`u64::MAX`: none).
    pub fn backlog_limit(&self) -> u64 {
        self.backlog_limit
    }

    /// Body bytes accepted and not yet confirmed by the broker (events, and the
    /// newest snapshot of each slot).
    pub fn pending_bytes(&self) -> u64 {
        self.status.pending_bytes.load(Ordering::Relaxed)
    }

    /// True while more than the backlog limit waits for the broker: take no new work
    /// that would publish (answer 503 with `Retry-After`).
    pub fn backlogged(&self) -> bool {
        self.pending_bytes() > self.backlog_limit
    }

    /// Publishes `body`; it waits in memory until the broker confirms it.
    pub fn publish(&self, exchange: Exchange, key: String, body: Vec<u8>, persistent: bool) {
        self.status
            .pending_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Msg(Msg {
            exchange,
            key,
            body,
            persistent,
            slot: None,
        }));
    }

    /// Publishes `body` (transient) as the newest message of `slot` on `exchange`:
    /// one of the slot still waiting for the broker is replaced, not sent (counted
    /// in [`LinkStatus::superseded`]). For messages that carry a whole state, such
    /// as an LM's snapshot (slot: the LM).
    pub fn publish_latest(&self, exchange: Exchange, key: String, slot: String, body: Vec<u8>) {
        let msg = Msg {
            exchange,
            key,
            body,
            persistent: false,
            slot: Some(slot),
        };
        self.status
            .pending_bytes
            .fetch_add(msg.body.len() as u64, Ordering::Relaxed);
        let mut waiting = self.latest.lock();
        match waiting.iter_mut().find(|m| m.same_slot(&msg)) {
            Some(old) => {
                let old = std::mem::replace(old, msg);
                drop(waiting);
                superseded(&self.status, &old);
            }
            None => {
                waiting.push(msg);
                drop(waiting);
                // One wake-up per slot taken: the channel holds at most one per slot.
                let _ = self.tx.send(Cmd::Latest);
            }
        }
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

/// Accounts for `old`, replaced by a newer message of its slot before the broker
/// took it: its bytes no longer wait; counted. Under load this is routine (a state
/// published while the previous one is on its way); while disconnected it is logged,
/// once per disconnection.
fn superseded(status: &LinkStatus, old: &Msg) {
    status
        .pending_bytes
        .fetch_sub(old.body.len() as u64, Ordering::Relaxed);
    status.superseded.fetch_add(1, Ordering::Relaxed);
    if !status.is_connected() && !status.superseding.swap(true, Ordering::Relaxed) {
        tracing::info!(
            exchange = ?old.exchange,
            slot = old.slot.as_deref().unwrap_or_default(),
            "not connected to the broker: only the newest state message of each slot waits for it (the replaced ones are counted)"
        );
    }
}

/// The publishing task's fixed parts.
struct Task {
    url: String,
    cluster: ClusterName,
    status: Arc<LinkStatus>,
    latest: Arc<Latest>,
}

impl Task {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let Task {
            url,
            cluster,
            status,
            ..
        } = &self;
        let mut batch: Vec<Msg> = Vec::new();
        // Bytes of `batch` as published (before coalescing), released once confirmed.
        let mut batch_bytes: u64 = 0;
        let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
        let mut session: Option<(Connection, Channel)> = None;
        let mut backoff =
            crate::retry::Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let user = broker_user(url);
        loop {
            // Idle only when nothing waits: a newest state waiting (its wake-up
            // already taken, e.g. before a failed connection) keeps the task trying.
            if batch.is_empty() && flushes.is_empty() && self.latest.lock().is_empty() {
                let Some(cmd) = rx.recv().await else { return };
                let mut next = Some(cmd);
                while let Some(cmd) = next.take() {
                    match cmd {
                        Cmd::Msg(m) => {
                            batch_bytes += m.body.len() as u64;
                            batch.push(m)
                        }
                        // Taken below, just before publishing.
                        Cmd::Latest => {}
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
                match connect(url, cluster).await {
                    Ok((conn, ch)) => {
                        match ch.confirm_select(ConfirmSelectOptions::default()).await {
                            Ok(()) => {
                                if backoff.failures() > 0 {
                                    tracing::info!(url = %redact(url), "publisher reconnected to the broker");
                                }
                                status.connected.store(true, Ordering::Relaxed);
                                status.superseding.store(false, Ordering::Relaxed);
                                backoff.reset();
                                session = Some((conn, ch));
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot enable publisher confirms")
                            }
                        }
                    }
                    Err(e) => {
                        status.connected.store(false, Ordering::Relaxed);
                        let delay = backoff.next_delay();
                        tracing::warn!(url = %redact(url), error = %e, retry_in_ms = delay.as_millis() as u64, "broker unreachable");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                }
            }
            let Some((_, ch)) = session.as_ref() else {
                continue;
            };
            // The newest state of each slot, replacing an older one the batch still
            // holds (unconfirmed after a failure): the broker gets only the newest.
            self.take_latest(&mut batch, &mut batch_bytes);
            coalesce(&mut batch);
            match publish_all(ch, cluster, &user, &batch).await {
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
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }

    /// Moves the waiting newest messages into `batch` (see [`merge_latest`]).
    fn take_latest(&self, batch: &mut Vec<Msg>, batch_bytes: &mut u64) {
        let taken = std::mem::take(&mut *self.latest.lock());
        merge_latest(batch, batch_bytes, taken, &self.status);
    }
}

/// Puts each of `taken` (newest messages of their slots) into `batch`: in place of
/// the message of its slot `batch` holds (that one is superseded: its bytes leave
/// `batch_bytes` and the pending count), else at the end. Other messages keep their
/// order.
pub(super) fn merge_latest(
    batch: &mut Vec<Msg>,
    batch_bytes: &mut u64,
    taken: Vec<Msg>,
    status: &LinkStatus,
) {
    for msg in taken {
        *batch_bytes += msg.body.len() as u64;
        match batch.iter_mut().find(|m| m.same_slot(&msg)) {
            Some(old) => {
                let old = std::mem::replace(old, msg);
                *batch_bytes -= old.body.len() as u64;
                superseded(status, &old);
            }
            None => batch.push(msg),
        }
    }
}

/// Largest event message [`coalesce`] builds.
const MAX_COALESCED: usize = 1 << 20;

/// Merges runs of adjacent event messages with the same routing key into one message
/// (their bodies are JSON arrays, concatenated in order). Order is kept exactly: only
/// neighbours merge. Under load the publisher drains bursts of small messages, and
/// each message costs the broker far more than its bytes.
pub(super) fn coalesce(batch: &mut Vec<Msg>) {
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

/// Publishes `batch` as broker user `user` (each message's `user_id`, which the
/// broker checks against the connection's user).
async fn publish_all(
    ch: &Channel,
    cluster: &ClusterName,
    user: &str,
    batch: &[Msg],
) -> Result<(), lapin::Error> {
    let mut confirms = Vec::with_capacity(batch.len());
    let names = [Exchange::State, Exchange::Events].map(|e| (e, e.name(cluster)));
    for m in batch {
        let props = BasicProperties::default()
            .with_app_id(cluster.as_str().into())
            .with_user_id(user.into());
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
