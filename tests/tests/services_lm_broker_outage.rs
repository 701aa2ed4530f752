//! An LM through a broker outage, with a real RabbitMQ (the test's own virtual host;
//! the machine's broker is never stopped): the LM reaches the broker through a TCP
//! relay of this test, and "the broker goes away" is the relay cutting every
//! connection and refusing new ones. While cut, the LM keeps only its newest state
//! snapshot and, past `--max-broker-backlog-bytes` of task events, answers launch
//! batches 503 with `Retry-After`. Once the relay is back the LM publishes its
//! backlog, accepts launches again, and an observer has every task's end exactly
//! once or more (duplicates allowed, none lost). The LM also starts with the relay
//! cut, and connects once it is back though it has only states to send. Fails
//! (never skips) without RabbitMQ.

use common::events::{TaskEvent, TaskEventKind};
use common::messages::LaunchBatch;
use common::protocol::GmToLm;
use common::TaskId;
use service_kit::amqp::{subscribe, Subscription};
use service_kit::topology::Exchange;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::lone_lm::{two_task_batch, LoneLm};
use tests::procs::wait_until;
use tests::relay::Relay;

/// Sends `message` to the LM as a GM would; (status, head, body).

#[test]
fn an_lm_bounds_its_backlog_through_a_broker_outage_and_loses_no_event() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lm-outage-{}", std::process::id()));
    let relay = Relay::start("127.0.0.1:5672");
    relay.cut();
    let vhost = broker.url.rsplit('/').next().expect("vhost").to_owned();
    let via_relay = format!("amqp://guest:guest@127.0.0.1:{}/{vhost}", relay.port);

    // An observer of every task end, straight on the broker.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let ends: Arc<Mutex<Vec<TaskId>>> = Arc::default();
    let seen = ends.clone();
    let cluster = service_kit::cluster::Cluster::new(common::ClusterName::default(), "test");
    let sub = Subscription {
        exchange: Exchange::Events,
        binding: "task.finished".into(),
        queue: None,
        ack: false,
        prefetch: 0,
    };
    let (observer, handle) = rt.block_on(async {
        subscribe(broker.url.clone(), cluster, sub, move |_, body| {
            let events: Vec<TaskEvent> =
                service_kit::sinks::decode_events(body).expect("task events");
            let mut seen = seen.lock().expect("ends");
            for e in events {
                assert!(matches!(e.kind, TaskEventKind::Finished { .. }), "{e:?}");
                seen.push(e.task);
            }
        })
    });
    wait_until("the observer subscribed", Duration::from_secs(30), || {
        observer.is_connected()
    });

    let mut lone = LoneLm::start(&dir, &via_relay, 2000);
    let metric = |name: &str| lone.metric(name);
    // The LM starts with the broker away: its state waits, the newest only...
    wait_until("the LM is ready", Duration::from_secs(30), || {
        metric("megha_lm_ready") == 1.0 && metric("megha_lm_snapshots_superseded_total") >= 5.0
    });
    assert_eq!(metric("megha_lm_broker_connected"), 0.0);
    // ...and reaches the broker once it is there, with nothing but states to send.
    relay.restore();
    wait_until(
        "the LM connects to the broker",
        Duration::from_secs(30),
        || metric("megha_lm_broker_connected") == 1.0,
    );
    // One batch with the broker there.
    let mut seq = 1;
    assert_eq!(lone.post(&two_task_batch(seq, seq)).0, 200);
    wait_until(
        "its ends reach the observer",
        Duration::from_secs(30),
        || ends.lock().expect("ends").len() == 2,
    );

    relay.cut();
    wait_until(
        "the LM sees the broker gone",
        Duration::from_secs(30),
        || metric("megha_lm_broker_connected") == 0.0,
    );
    let superseded = metric("megha_lm_snapshots_superseded_total");
    // Batches are accepted until their events pass 2,000 bytes, then refused.
    let refused = loop {
        seq += 1;
        let (status, head, body) = lone.post(&two_task_batch(seq, seq));
        match status {
            200 => {}
            503 => break (head, body),
            other => panic!("unexpected {other}: {body}"),
        }
        assert!(
            seq < 50,
            "never refused: the LM's event backlog is not bounded"
        );
        let placed = 2.0 * seq as f64;
        wait_until("the batch's tasks end", Duration::from_secs(30), || {
            metric("megha_lm_running_tasks") == 0.0 && metric("megha_lm_placements_total") == placed
        });
    };
    assert!(
        refused.0.to_ascii_lowercase().contains("retry-after"),
        "{}",
        refused.0
    );
    let accepted = seq - 1;
    let backlog = metric("megha_lm_broker_backlog_bytes");
    assert!(
        backlog > 2000.0 && backlog < 4000.0,
        "backlog {backlog} bytes after {accepted} batches"
    );
    assert!(
        metric("megha_lm_snapshots_superseded_total") > superseded,
        "heartbeats during the outage replaced the waiting snapshot"
    );
    assert_eq!(
        ends.lock().expect("ends").len(),
        2,
        "nothing passes the cut"
    );

    relay.restore();
    wait_until(
        "the LM's backlog back under its limit",
        Duration::from_secs(60),
        || {
            metric("megha_lm_broker_connected") == 1.0
                && metric("megha_lm_broker_backlog_bytes") < 2000.0
        },
    );
    // A late first copy of the refused batch (as a duplicating transport would
    // deliver) is not applied: its GM took the batch back on the busy answer.
    let (status, _, body) = lone.post(&two_task_batch(seq, seq));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("late copy"), "{body}");
    assert_eq!(metric("megha_lm_late_batch_copies_refused_total"), 1.0);
    // The same batch sent again by a GM in doubt (a resend) is accepted.
    let resend = match two_task_batch(seq, seq) {
        GmToLm::Launch(b) => GmToLm::Launch(LaunchBatch { resend: true, ..b }),
        other => other,
    };
    wait_until(
        "the LM accepts the refused batch",
        Duration::from_secs(60),
        || match lone.post(&resend).0 {
            200 => true,
            503 => false,
            other => panic!("unexpected {other}"),
        },
    );
    let want: BTreeSet<TaskId> = (1..=seq)
        .flat_map(|job| (0..2).map(move |i| TaskId::new(job, i)))
        .collect();
    wait_until(
        "every end reaches the observer",
        Duration::from_secs(60),
        || {
            let got: BTreeSet<TaskId> = ends.lock().expect("ends").iter().copied().collect();
            got == want
        },
    );
    println!(
        "{} batches accepted during the outage, refused at {backlog} bytes; {} refusals (resends included); {} snapshots superseded",
        accepted - 1,
        metric("megha_lm_broker_backlog_refusals_total"),
        metric("megha_lm_snapshots_superseded_total")
    );
    lone.kill();
    rt.block_on(handle.close());
}
