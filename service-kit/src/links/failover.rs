//! One peer reachable at several addresses, one serving at a time: a GM and its
//! standby (`--gm-url http://gm-0:8080|http://gm-0-standby:8080`). Calls go to the
//! address that answered last; when it is unreachable or answers 503 (a standby
//! not yet in charge, a primary going away), the next is tried, each once per call.
//! The caller's own retry (e.g. [`super::OrderedSender`]) takes it from there.

use super::call::{BoxFut, Call, Link, LinkError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Splits a `--gm-url` value into its alternatives (`|`-separated), trimmed, empty
/// ones left out.
pub fn alternatives(url: &str) -> Vec<String> {
    url.split('|')
        .map(|u| u.trim().trim_end_matches('/').to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// Tries its links in turn, starting from the one that answered last.
pub struct FailoverLink<Req, Resp> {
    links: Vec<Link<Req, Resp>>,
    current: Arc<AtomicUsize>,
}

impl<Req, Resp> std::fmt::Debug for FailoverLink<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FailoverLink({} addresses, current {})",
            self.links.len(),
            self.current.load(Ordering::Relaxed)
        )
    }
}

impl<Req, Resp> FailoverLink<Req, Resp> {
    pub fn new(links: Vec<Link<Req, Resp>>) -> Self {
        FailoverLink {
            links,
            current: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Whether another address may serve what this one did not: nothing was delivered,
/// or the peer said it does not serve now (503).
fn try_next(e: &LinkError) -> bool {
    match e {
        LinkError::Unreachable(_) | LinkError::Busy { .. } => true,
        LinkError::Failed(what) => what.contains("503"),
        LinkError::Refused(_) | LinkError::ForeignCluster { .. } => false,
    }
}

impl<Req, Resp> Call<Req, Resp> for FailoverLink<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Send + 'static,
{
    fn call(&self, req: Req) -> BoxFut<Result<Resp, LinkError>> {
        let links = self.links.clone();
        let current = self.current.clone();
        Box::pin(async move {
            let n = links.len();
            let first = current.load(Ordering::Relaxed) % n.max(1);
            let mut last = LinkError::Unreachable("no address".to_owned());
            for k in 0..n {
                let i = (first + k) % n;
                match links[i].call(req.clone()).await {
                    Ok(answer) => {
                        if i != first {
                            tracing::info!(
                                address = i,
                                "peer answered at another of its addresses (failover)"
                            );
                        }
                        current.store(i, Ordering::Relaxed);
                        return Ok(answer);
                    }
                    Err(e) if try_next(&e) && k + 1 < n => last = e,
                    Err(e) => return Err(e),
                }
            }
            Err(last)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A link answering `Ok(id)`, or failing with `error` while `fails` says so.
    fn link(id: u32, fail: Option<fn() -> LinkError>, calls: Arc<AtomicU32>) -> Link<(), u32> {
        super::super::fn_link(move |()| {
            calls.fetch_add(1, Ordering::Relaxed);
            let out = match fail {
                Some(e) => Err(e()),
                None => Ok(id),
            };
            async move { out }
        })
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn alternatives_split_on_bars() {
        assert_eq!(
            alternatives("http://a:1/ | http://b:2"),
            vec!["http://a:1".to_owned(), "http://b:2".to_owned()]
        );
        assert_eq!(alternatives("http://a"), vec!["http://a".to_owned()]);
    }

    #[test]
    fn a_dead_or_standby_address_fails_over_and_the_answering_one_sticks() {
        let calls = Arc::new(AtomicU32::new(0));
        let dead = link(
            0,
            Some(|| LinkError::Unreachable("gone".into())),
            calls.clone(),
        );
        let live = link(1, None, calls.clone());
        let f = FailoverLink::new(vec![dead, live]);
        assert_eq!(block_on(f.call(())).unwrap(), 1);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        // The live one is asked first from now on.
        assert_eq!(block_on(f.call(())).unwrap(), 1);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        // A standby's 503 moves on too; a refusal (4xx) does not.
        let standby = link(
            0,
            Some(|| LinkError::Failed("x: 503 Service Unavailable".into())),
            calls.clone(),
        );
        let f = FailoverLink::new(vec![standby, link(2, None, calls.clone())]);
        assert_eq!(block_on(f.call(())).unwrap(), 2);
        let refusing = link(
            0,
            Some(|| LinkError::Refused("x: 409".into())),
            calls.clone(),
        );
        let f = FailoverLink::new(vec![refusing, link(3, None, calls.clone())]);
        assert!(matches!(block_on(f.call(())), Err(LinkError::Refused(_))));
    }
}
