//! How one role reaches another, independent of the transport.
//!
//! A [`Link`] is a request/response call (GM -> LM launch, LM -> worker start,
//! worker -> LM reports); a [`Sink`] is fire-and-forget (snapshots, events). The
//! services take links and sinks as values, so the same actor runs over HTTP
//! ([`HttpLink`], bincode via `common::codec`) or in memory ([`fn_link`], embedded
//! mode).

use common::codec;
use serde::{de::DeserializeOwned, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod call;
mod failover;
pub use call::{fn_link, BoxFut, Call, Link, LinkError, Sink};
pub use failover::{alternatives, FailoverLink};

/// Calls `link` until the request's fate is known, for a request that is safe to send
/// again because the peer recognises a repeat (the same sequence number) and answers
/// it from its record instead of acting twice.
///
/// An ambiguous failure (timeout, lost answer, 5xx) is retried. Once an attempt may
/// have been acted on, "unreachable" (the peer is down or restarting) and "busy" do
/// not settle anything either. Retries are 50 ms apart, doubling up to 2 s, with jitter ([`crate::retry`]) (or after
/// the peer's `Retry-After` when it said busy), until `doubt_timeout` has passed;
/// then the last error is returned. A request that never reached the peer
/// (unreachable at the first attempt), that it refused (4xx), or that it answered
/// busy with no earlier attempt in doubt, is settled at once: the caller knows
/// nothing was done, and may send the work elsewhere.
pub async fn call_until_settled<Req: Clone, Resp>(
    link: &Link<Req, Resp>,
    req: &Req,
    doubt_timeout: Duration,
    what: &str,
) -> Result<Resp, LinkError> {
    let unchanged = |r: Req| std::future::ready(Some(r));
    match call_until_settled_refreshing(link, req, doubt_timeout, what, unchanged).await {
        Ok(Some(answer)) => Ok(answer),
        Ok(None) => unreachable!("a request sent unchanged is never withdrawn"),
        Err(error) => Err(error),
    }
}

/// [`call_until_settled`], asking `refresh` before each retry what is still worth
/// sending: the request as it should go out again (a launch batch keeps only the
/// runs still in doubt, since the sender may have learned the fate of others
/// meanwhile), or `None` when nothing in it is in doubt any more, which ends the
/// call with `Ok(None)`.
pub async fn call_until_settled_refreshing<Req, Resp, F, Fut>(
    link: &Link<Req, Resp>,
    req: &Req,
    doubt_timeout: Duration,
    what: &str,
    mut refresh: F,
) -> Result<Option<Resp>, LinkError>
where
    Req: Clone,
    F: FnMut(Req) -> Fut,
    Fut: Future<Output = Option<Req>>,
{
    let started = tokio::time::Instant::now();
    let deadline = started + doubt_timeout;
    let mut warned = false;
    let mut req = req.clone();
    let mut result = link.call(req.clone()).await;
    let mut ambiguous = matches!(result, Err(LinkError::Failed(_)));
    let mut backoff = crate::retry::Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let retry = match &result {
            Err(LinkError::Failed(_)) => true,
            Err(LinkError::Unreachable(_) | LinkError::Busy { .. }) => ambiguous,
            Err(LinkError::Refused(_) | LinkError::ForeignCluster { .. }) | Ok(_) => false,
        };
        if !retry {
            return result.map(Some);
        }
        let delay = backoff.next_delay();
        let wait = match &result {
            Err(LinkError::Busy { retry_after, .. }) => delay.max(*retry_after),
            _ => delay,
        };
        if tokio::time::Instant::now() + wait > deadline {
            return result.map(Some);
        }
        // Once, when a retry is still needed after a second: no longer a blip.
        if !warned && started.elapsed() >= Duration::from_secs(1) {
            warned = true;
            tracing::warn!(
                what,
                timeout_s = doubt_timeout.as_secs(),
                "in doubt: the peer may have acted on it; sending it again until it answers"
            );
        }
        tokio::time::sleep(wait).await;
        req = match refresh(req).await {
            Some(next) => next,
            None => {
                tracing::info!(
                    what,
                    "no longer in doubt: its outcome came another way; not sent again"
                );
                return Ok(None);
            }
        };
        result = link.call(req.clone()).await;
        ambiguous |= matches!(result, Err(LinkError::Failed(_)));
    }
}

/// A keep-alive HTTP client with a request timeout, naming no cluster.
pub fn http_client(timeout: Duration) -> reqwest::Client {
    http_client_with(timeout, None, None)
}

/// [`http_client`] whose every request carries the cluster credential (see
/// [`crate::auth`]) and the cluster's name (see [`crate::cluster`]): the client of a
/// role's internal calls.
pub fn http_client_with(
    timeout: Duration,
    secret: Option<&crate::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
) -> reqwest::Client {
    internal_builder(Some(timeout), secret, cluster)
        .build()
        .unwrap_or_default()
}

/// [`http_client_with`] without a total timeout (only the connect timeout): for
/// answers streamed as long as something runs (a followed log).
pub fn http_client_streaming(
    secret: Option<&crate::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
) -> reqwest::Client {
    internal_builder(None, secret, cluster)
        .build()
        .unwrap_or_default()
}

/// [`http_client_with`] whose every request also carries `extra` headers (marked
/// sensitive).
pub fn http_client_with_headers(
    timeout: Duration,
    secret: Option<&crate::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
    extra: &[(&'static str, reqwest::header::HeaderValue)],
) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in extra {
        let mut value = value.clone();
        value.set_sensitive(true);
        headers.insert(*name, value);
    }
    internal_builder(Some(timeout), secret, cluster)
        .default_headers(headers)
        .build()
        .unwrap_or_default()
}

/// [`http_client_with`] that connects to `checked.host` only at the addresses
/// checked (`reqwest`'s `resolve_to_addrs`), never resolving the name again: a
/// callback name that later resolves outside the allowed networks (DNS rebinding)
/// still reaches the address that was checked. TLS still verifies the name.
pub fn http_client_pinned(
    timeout: Duration,
    secret: Option<&crate::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
    checked: &crate::auth::CheckedHost,
) -> reqwest::Client {
    internal_builder(Some(timeout), secret, cluster)
        .resolve_to_addrs(&checked.host, &checked.addrs)
        .build()
        .unwrap_or_default()
}

fn internal_builder(
    timeout: Option<Duration>,
    secret: Option<&crate::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
) -> reqwest::ClientBuilder {
    let mut headers = crate::auth::client_headers(secret);
    if let Some(v) = cluster.and_then(|c| reqwest::header::HeaderValue::from_str(c.as_str()).ok()) {
        headers.insert(crate::cluster::CLUSTER_NAME_HEADER, v);
    }
    let builder = crate::tls::client_builder().default_headers(headers);
    let builder = match timeout {
        Some(t) => builder.timeout(t),
        None => builder,
    };
    builder
        .connect_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
}

/// POSTs bincode bodies (in `cluster`'s envelope) to one URL. Connection failures
/// (nothing was sent) are retried with backoff up to `retries` times; anything else
/// is reported at once. A peer of another cluster is [`LinkError::ForeignCluster`].
#[derive(Clone, Debug)]
pub struct HttpLink {
    pub client: reqwest::Client,
    pub url: String,
    pub retries: u32,
    pub cluster: crate::cluster::Cluster,
    /// A worker's links to its LM: the session presented on each call, and kept
    /// from an answer that issues one (see [`crate::auth::WorkerSession`]).
    pub session: Option<crate::auth::WorkerSession>,
    /// With a role credential: each call is signed for the callee's role.
    pub signing: Option<crate::auth::Signing>,
}

/// The delay an answer's `Retry-After` header asks for, in whole seconds (the form
/// this project's services send; an HTTP date is not read).
fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let value = resp.headers().get(reqwest::header::RETRY_AFTER)?;
    let seconds: u64 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// The other cluster an answer names in `x-megha-cluster`, if it names one that
/// is not `ours` (an answer naming none, e.g. from a proxy, passes).
pub fn foreign_answer(resp: &reqwest::Response, ours: &common::ClusterName) -> Option<String> {
    let theirs = resp.headers().get(crate::cluster::CLUSTER_NAME_HEADER)?;
    let theirs = String::from_utf8_lossy(theirs.as_bytes());
    (theirs != ours.as_str()).then(|| theirs.into_owned())
}

impl<Req, Resp> Call<Req, Resp> for HttpLink
where
    Req: Serialize + Send + 'static,
    Resp: DeserializeOwned + Send + 'static,
{
    fn call(&self, req: Req) -> BoxFut<Result<Resp, LinkError>> {
        let body = self.cluster.encode(&req);
        let client = self.client.clone();
        let url = self.url.clone();
        let retries = self.retries;
        let cluster = self.cluster.clone();
        let session = self.session.clone();
        let signing = self.signing.clone();
        Box::pin(async move {
            let body = body.map_err(|e| LinkError::Failed(e.to_string()))?;
            let mut backoff =
                crate::retry::Backoff::new(Duration::from_millis(20), Duration::from_secs(2));
            let mut attempt = 0;
            loop {
                let mut request = client
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, codec::CONTENT_TYPE)
                    .body(body.clone());
                if let Some((name, v)) = session.as_ref().and_then(|s| s.header_for(&body)) {
                    request = request.header(name, v);
                }
                // Signed anew at each attempt: a new nonce, since an earlier attempt
                // may have arrived.
                let sent = crate::auth::send(&client, request, signing.as_ref()).await;
                match sent {
                    Ok(resp) => {
                        if let Some(theirs) = foreign_answer(&resp, &cluster.name) {
                            cluster.refused(&url, &theirs);
                            return Err(LinkError::ForeignCluster {
                                url,
                                ours: cluster.name.to_string(),
                                theirs,
                            });
                        }
                        let status = resp.status();
                        if let (Some(s), true) = (&session, status.is_success()) {
                            s.take_from(resp.headers());
                        }
                        let retry_after = retry_after(&resp);
                        let bytes = resp
                            .bytes()
                            .await
                            .map_err(|e| LinkError::Failed(format!("{url}: {e}")))?;
                        if !status.is_success() {
                            let text = String::from_utf8_lossy(&bytes);
                            let what = format!("{url}: {status}: {text}");
                            return Err(match retry_after {
                                _ if status.is_client_error() => LinkError::Refused(what),
                                Some(retry_after)
                                    if status == reqwest::StatusCode::SERVICE_UNAVAILABLE =>
                                {
                                    LinkError::Busy { what, retry_after }
                                }
                                _ => LinkError::Failed(what),
                            });
                        }
                        return cluster
                            .decode(&bytes, &url)
                            .map_err(|e| LinkError::Failed(format!("{url}: {e}")));
                    }
                    Err(e) if e.is_connect() && attempt < retries => {
                        attempt += 1;
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    Err(e) if e.is_connect() => {
                        return Err(LinkError::Unreachable(format!("{url}: {e}")))
                    }
                    Err(e) => return Err(LinkError::Failed(format!("{url}: {e}"))),
                }
            }
        })
    }
}

/// Sends items in order over a link, batching whatever has queued up, retrying a
/// failed batch until it goes through. Used where order matters (a worker's
/// `Started` must reach the LM before its `Finished`).
///
/// Dropping every handle lets what was queued go on being delivered (a worker's
/// last reports); [`OrderedSender::abandon`] stops the stream at once.
#[derive(Clone)]
pub struct OrderedSender<T> {
    tx: tokio::sync::mpsc::UnboundedSender<Item<T>>,
    pending: Arc<AtomicUsize>,
    task: Arc<tokio::task::AbortHandle>,
}

/// An item to send, or a marker that fires once everything sent before it is
/// delivered.
enum Item<T> {
    Data(T),
    Mark(tokio::sync::oneshot::Sender<()>),
}

impl<T> std::fmt::Debug for OrderedSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OrderedSender({} pending)", self.pending())
    }
}

impl<T: Clone + Send + 'static> OrderedSender<T> {
    /// Spawns the sending task on the current tokio runtime.
    pub fn start(link: Link<Vec<T>, ()>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Item<T>>();
        let pending = Arc::new(AtomicUsize::new(0));
        let counter = pending.clone();
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                // A batch ends at the first marker, which fires once it is delivered.
                let mut batch = Vec::new();
                let mut mark = None;
                let mut next = Some(first);
                while let Some(item) = next.take() {
                    match item {
                        Item::Data(t) => batch.push(t),
                        Item::Mark(m) => {
                            mark = Some(m);
                            break;
                        }
                    }
                    if batch.len() < 4096 {
                        next = rx.try_recv().ok();
                    }
                }
                let n = batch.len();
                let mut backoff =
                    crate::retry::Backoff::new(Duration::from_millis(20), Duration::from_secs(2));
                if n > 0 {
                    while let Err(e) = link.call(batch.clone()).await {
                        if rx.is_closed() {
                            // Every sender is gone: its owner gave the peer up (a worker
                            // declared lost) and counted what was pending.
                            tracing::info!(error = %e, items = n, "send failed and the stream was abandoned; not retrying");
                            return;
                        }
                        tracing::warn!(error = %e, items = n, "send failed; retrying");
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                }
                counter.fetch_sub(n, Ordering::SeqCst);
                if let Some(m) = mark {
                    let _ = m.send(());
                }
            }
        });
        OrderedSender {
            tx,
            pending,
            task: Arc::new(task.abort_handle()),
        }
    }

    /// Gives the peer up: the call in flight is dropped (its connection closed)
    /// and nothing queued is sent, now or later. Returns how many items were
    /// accepted and not delivered. For a peer declared gone (an LM's lost worker):
    /// an order that went on being delivered after it was counted dropped would
    /// start a run the LM no longer counts, on a node it gives to other work. A
    /// call whose bytes had all left before this may still arrive; the receiver's
    /// own checks cover it (a worker's fence and lease, the LM's kill of a lost
    /// run it hears started).
    pub fn abandon(self) -> usize {
        self.task.abort();
        self.pending.swap(0, Ordering::SeqCst)
    }

    pub fn send(&self, item: T) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(Item::Data(item)).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Resolves once every item sent before the call has been delivered (at once if
    /// the sender is gone).
    pub fn delivered(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (mark, done) = tokio::sync::oneshot::channel();
        let _ = self.tx.send(Item::Mark(mark));
        async move {
            let _ = done.await;
        }
    }
}

impl<T> OrderedSender<T> {
    /// Items accepted and not yet delivered.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests;
