//! The transport-independent call: [`Call`] and [`Link`], [`Sink`], in-memory links
//! ([`fn_link`]) and the failures a call can end with ([`LinkError`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The request was certainly not delivered (connection refused, peer gone).
    #[error("peer unreachable: {0}")]
    Unreachable(String),
    /// The request may or may not have been handled (timeout, bad answer, 5xx).
    #[error("call failed: {0}")]
    Failed(String),
    /// The peer answered with a client error (4xx): it did not act on the request.
    #[error("refused: {0}")]
    Refused(String),
    /// The peer answered that it acted on nothing and takes no new work for now,
    /// and when to call again (503 with `Retry-After`): overloaded, or not ready.
    /// It tells of this call only: an earlier copy of a request sent again may
    /// still have been acted on.
    #[error("busy, call again in {} ms: {what}", retry_after.as_millis())]
    Busy { what: String, retry_after: Duration },
    /// The peer belongs to another cluster: it refused the call (421), or answered
    /// naming another cluster. Retrying cannot help; the configuration is wrong.
    #[error("{url} belongs to cluster `{theirs}`, this process to cluster `{ours}`: give both the same --cluster-name (MEGHA_CLUSTER_NAME) or fix the URL")]
    ForeignCluster {
        url: String,
        ours: String,
        theirs: String,
    },
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
