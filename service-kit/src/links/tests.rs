//! The links' retries, ordering and HTTP mapping.

/// A pinned client reaches the address checked at registration, whatever the
/// name resolves to now: `.invalid` never resolves (RFC 6761), so an unpinned
/// client fails and the pinned one gets the local server's answer.
#[tokio::test]
async fn a_pinned_client_never_resolves_the_name_again() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route("/v1/messages", axum::routing::get(|| async { "pinned" }));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let checked = crate::auth::CheckedHost {
        host: "worker.megha-rebinding.invalid".into(),
        addrs: vec![addr],
    };
    let url = format!(
        "http://worker.megha-rebinding.invalid:{}/v1/messages",
        addr.port()
    );
    let pinned = super::http_client_pinned(Duration::from_secs(5), None, None, &checked);
    let answer = pinned.get(&url).send().await.expect("pinned call");
    assert_eq!(answer.text().await.expect("body"), "pinned");
    let unpinned = super::http_client(Duration::from_secs(5));
    assert!(
        unpinned.get(&url).send().await.is_err(),
        "the name does not resolve"
    );
}

use super::{call_until_settled, call_until_settled_refreshing, fn_link, LinkError, OrderedSender};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A peer that answers call `k` (from 0) with `script[k]`, then with the last.
fn scripted(script: Vec<Result<u32, LinkError>>) -> (super::Link<u32, u32>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let link = fn_link(move |_: u32| {
        let k = seen.fetch_add(1, Ordering::SeqCst);
        let answer = script[k.min(script.len() - 1)].clone();
        async move { answer }
    });
    (link, calls)
}

fn failed() -> Result<u32, LinkError> {
    Err(LinkError::Failed("timeout".into()))
}

fn unreachable() -> Result<u32, LinkError> {
    Err(LinkError::Unreachable("refused".into()))
}

#[tokio::test]
async fn a_request_in_doubt_is_sent_through_unreachable_until_answered() {
    let script = vec![failed(), unreachable(), unreachable(), unreachable(), Ok(7)];
    let (link, calls) = scripted(script);
    let r = call_until_settled(&link, &1, Duration::from_secs(10), "t").await;
    assert_eq!(r.ok(), Some(7));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_retry_sends_what_refresh_keeps_and_stops_when_nothing_is_left() {
    let sent: Arc<Mutex<Vec<u32>>> = Arc::default();
    let log = sent.clone();
    let link = fn_link(move |req: u32| {
        log.lock().expect("log").push(req);
        async { Err::<u32, _>(LinkError::Failed("timeout".into())) }
    });
    // Each retry carries one request less; at 0 nothing is in doubt.
    let shrink = |req: u32| async move { req.checked_sub(1).filter(|r| *r > 0) };
    let r = call_until_settled_refreshing(&link, &3, Duration::from_secs(10), "t", shrink).await;
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert_eq!(*sent.lock().expect("log"), vec![3, 2, 1]);
}

#[tokio::test]
async fn undelivered_or_refused_requests_settle_at_once() {
    for first in [unreachable(), Err(LinkError::Refused("400".into()))] {
        let (link, calls) = scripted(vec![first, Ok(7)]);
        let r = call_until_settled(&link, &1, Duration::from_secs(10), "t").await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn doubt_ends_at_the_timeout_with_the_last_error() {
    let (link, calls) = scripted(vec![failed(), unreachable()]);
    let r = call_until_settled(&link, &1, Duration::from_millis(300), "t").await;
    assert!(matches!(r, Err(LinkError::Unreachable(_))));
    // Sent at 0, 50 and 150 ms; the next (at 350 ms) would pass the timeout.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn delivered_resolves_after_everything_sent_before_it_and_order_holds() {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let failures = Arc::new(Mutex::new(1));
    let (record, fail) = (seen.clone(), failures.clone());
    // A slow link that fails its first call: the sender must retry in order.
    let link = fn_link(move |batch: Vec<u32>| {
        let (record, fail) = (record.clone(), fail.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            {
                let mut left = fail.lock().expect("lock");
                if *left > 0 {
                    *left -= 1;
                    return Err(LinkError::Failed("first call fails".into()));
                }
            }
            record.lock().expect("lock").extend(batch);
            Ok(())
        }
    });
    let sender = OrderedSender::start(link);
    for i in 0..3 {
        sender.send(i);
    }
    sender.delivered().await;
    assert_eq!(*seen.lock().expect("lock"), vec![0, 1, 2]);
    assert_eq!(sender.pending(), 0);
    sender.send(3);
    let later = sender.delivered();
    sender.send(4);
    later.await;
    assert!(seen.lock().expect("lock").starts_with(&[0, 1, 2, 3]));
    // Nothing sent since the last mark: resolves at once.
    sender.delivered().await;
    sender.delivered().await;
    assert_eq!(*seen.lock().expect("lock"), vec![0, 1, 2, 3, 4]);
}

fn busy(ms: u64) -> Result<u32, LinkError> {
    Err(LinkError::Busy {
        what: "lm: 503: the broker is behind".into(),
        retry_after: Duration::from_millis(ms),
    })
}

/// "Busy" at the first attempt tells that nothing was done: the caller gets it at
/// once and may send the work elsewhere. After an attempt in doubt it settles
/// nothing: the request is sent again (after the peer's retry-after) until answered.
#[tokio::test]
async fn busy_settles_at_once_unless_an_earlier_attempt_is_in_doubt() {
    let (link, calls) = scripted(vec![busy(10), Ok(7)]);
    let r = call_until_settled(&link, &1, Duration::from_secs(10), "t").await;
    assert!(matches!(r, Err(LinkError::Busy { .. })), "{r:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let (link, calls) = scripted(vec![failed(), busy(10), busy(10), Ok(7)]);
    let r = call_until_settled(&link, &1, Duration::from_secs(10), "t").await;
    assert_eq!(r.ok(), Some(7));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// A retry-after longer than what is left of the doubt ends the call with "busy".
#[tokio::test]
async fn a_retry_after_past_the_doubt_timeout_ends_the_call() {
    let (link, calls) = scripted(vec![failed(), busy(60_000), Ok(7)]);
    let r = call_until_settled(&link, &1, Duration::from_secs(5), "t").await;
    assert!(matches!(r, Err(LinkError::Busy { .. })), "{r:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// Over HTTP: a 503 with `Retry-After` (seconds) is "busy" with that delay; a 503
/// without it is an ambiguous failure; a 4xx stays a refusal.
#[tokio::test]
async fn a_503_with_retry_after_is_busy() {
    use axum::http::{header, StatusCode};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new()
        .route(
            "/busy",
            axum::routing::post(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, "2")],
                    "behind",
                )
            }),
        )
        .route(
            "/down",
            axum::routing::post(|| async { (StatusCode::SERVICE_UNAVAILABLE, "down") }),
        )
        .route(
            "/bad",
            axum::routing::post(|| async {
                (StatusCode::BAD_REQUEST, [(header::RETRY_AFTER, "2")], "no")
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let call = |path: &str| {
        let link = super::HttpLink {
            client: super::http_client(Duration::from_secs(5)),
            url: format!("http://{addr}{path}"),
            retries: 0,
            cluster: crate::cluster::Cluster::new(
                common::ClusterName::new("links-test").expect("name"),
                "test",
            ),
            session: None,
            signing: None,
        };
        super::Call::<u32, u32>::call(&link, 1)
    };
    match call("/busy").await {
        Err(LinkError::Busy { retry_after, what }) => {
            assert_eq!(retry_after, Duration::from_secs(2));
            assert!(what.contains("behind"), "{what}");
        }
        other => panic!("503 with Retry-After: {other:?}"),
    }
    assert!(matches!(call("/down").await, Err(LinkError::Failed(_))));
    assert!(matches!(call("/bad").await, Err(LinkError::Refused(_))));
}

#[tokio::test]
async fn an_abandoned_stream_delivers_nothing_more_not_even_its_call_in_flight() {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let gate = Arc::new(tokio::sync::Notify::new());
    let (record, wait) = (seen.clone(), gate.clone());
    // A peer cut off: the first call hangs until the gate opens (the network is
    // back), then every call gets through.
    let link = fn_link(move |batch: Vec<u32>| {
        let (record, wait) = (record.clone(), wait.clone());
        async move {
            wait.notified().await;
            wait.notify_one();
            record.lock().expect("lock").extend(batch);
            Ok(())
        }
    });
    let sender = OrderedSender::start(link);
    sender.send(0);
    // The first batch is in flight before more queue behind it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    sender.send(1);
    sender.send(2);
    let kept = sender.clone();
    assert_eq!(sender.abandon(), 3, "accepted and undelivered");
    gate.notify_one();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*seen.lock().expect("lock"), Vec::<u32>::new());
    // A clone left behind sends nothing either.
    kept.send(3);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*seen.lock().expect("lock"), Vec::<u32>::new());
}

#[tokio::test]
async fn a_dropped_stream_still_delivers_what_it_accepted() {
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let record = seen.clone();
    let link = fn_link(move |batch: Vec<u32>| {
        let record = record.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            record.lock().expect("lock").extend(batch);
            Ok(())
        }
    });
    let sender = OrderedSender::start(link);
    for i in 0..3 {
        sender.send(i);
    }
    drop(sender);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*seen.lock().expect("lock"), vec![0, 1, 2]);
}
