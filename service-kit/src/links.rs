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
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The request was certainly not delivered (connection refused, peer gone).
    #[error("peer unreachable: {0}")]
    Unreachable(String),
    /// The request may or may not have been handled (timeout, bad answer).
    #[error("call failed: {0}")]
    Failed(String),
}

pub trait Call<Req, Resp>: Send + Sync {
    fn call(&self, req: Req) -> BoxFut<Result<Resp, LinkError>>;
}

pub type Link<Req, Resp> = Arc<dyn Call<Req, Resp>>;

/// Fire-and-forget delivery.
pub type Sink<T> = Arc<dyn Fn(T) + Send + Sync>;

struct FnLink<F>(F);

impl<Req, Resp, F, Fut> Call<Req, Resp> for FnLink<F>
where
    F: Fn(Req) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Resp, LinkError>> + Send + 'static,
{
    fn call(&self, req: Req) -> BoxFut<Result<Resp, LinkError>> {
        Box::pin((self.0)(req))
    }
}

/// A link backed by an async closure (in-memory transport).
pub fn fn_link<Req, Resp, F, Fut>(f: F) -> Link<Req, Resp>
where
    Req: 'static,
    Resp: 'static,
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, LinkError>> + Send + 'static,
{
    Arc::new(FnLink(f))
}

/// A keep-alive HTTP client with a request timeout.
pub fn http_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default()
}

/// POSTs bincode bodies to one URL. Connection failures (nothing was sent) are
/// retried with backoff up to `retries` times; anything else is reported at once.
#[derive(Clone, Debug)]
pub struct HttpLink {
    pub client: reqwest::Client,
    pub url: String,
    pub retries: u32,
}

impl<Req, Resp> Call<Req, Resp> for HttpLink
where
    Req: Serialize + Send + 'static,
    Resp: DeserializeOwned + Send + 'static,
{
    fn call(&self, req: Req) -> BoxFut<Result<Resp, LinkError>> {
        let body = codec::encode(&req);
        let client = self.client.clone();
        let url = self.url.clone();
        let retries = self.retries;
        Box::pin(async move {
            let body = body.map_err(|e| LinkError::Failed(e.to_string()))?;
            let mut delay = Duration::from_millis(20);
            let mut attempt = 0;
            loop {
                let sent = client
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, codec::CONTENT_TYPE)
                    .body(body.clone())
                    .send()
                    .await;
                match sent {
                    Ok(resp) => {
                        let status = resp.status();
                        let bytes = resp
                            .bytes()
                            .await
                            .map_err(|e| LinkError::Failed(format!("{url}: {e}")))?;
                        if !status.is_success() {
                            let text = String::from_utf8_lossy(&bytes);
                            return Err(LinkError::Failed(format!("{url}: {status}: {text}")));
                        }
                        return codec::decode(&bytes)
                            .map_err(|e| LinkError::Failed(format!("{url}: {e}")));
                    }
                    Err(e) if e.is_connect() && attempt < retries => {
                        attempt += 1;
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(2));
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
#[derive(Clone)]
pub struct OrderedSender<T> {
    tx: tokio::sync::mpsc::UnboundedSender<T>,
    pending: Arc<AtomicUsize>,
}

impl<T> std::fmt::Debug for OrderedSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OrderedSender({} pending)", self.pending())
    }
}

impl<T: Clone + Send + 'static> OrderedSender<T> {
    /// Spawns the sending task on the current tokio runtime.
    pub fn start(link: Link<Vec<T>, ()>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<T>();
        let pending = Arc::new(AtomicUsize::new(0));
        let counter = pending.clone();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < 4096 {
                    match rx.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
                let n = batch.len();
                let mut delay = Duration::from_millis(20);
                while let Err(e) = link.call(batch.clone()).await {
                    tracing::warn!(error = %e, items = n, "send failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                counter.fetch_sub(n, Ordering::SeqCst);
            }
        });
        OrderedSender { tx, pending }
    }

    pub fn send(&self, item: T) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(item).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl<T> OrderedSender<T> {
    /// Items accepted and not yet delivered.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}
