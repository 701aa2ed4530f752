//! Unit tests of `backpressure.rs`: which GM requests the broker's backlog refuses,
//! how, and what is counted.

use super::BrokerBackpressure;
use axum::http::{header, StatusCode};
use common::messages::{CancelRequest, LaunchBatch, PreemptRequest, ReconcileRequest};
use common::protocol::GmToLm;
use common::task::TaskSpec;
use common::{GmId, JobId, LmId, Micros, QueueId, Resources, TaskId};
use service_kit::amqp::Publisher;
use service_kit::metrics::Page;
use service_kit::topology::Exchange;

fn requests() -> [GmToLm; 4] {
    let (gm, lm) = (GmId(0), LmId(0));
    let task = TaskSpec::short(TaskId::new(7, 0), Resources::cores(1, 1024), Micros(1));
    [
        GmToLm::Launch(LaunchBatch {
            gm,
            life: 0,
            lm,
            seq: 1,
            resend: false,
            requests: vec![],
        }),
        GmToLm::Preempt(PreemptRequest {
            gm,
            life: 0,
            lm,
            task,
            victim: QueueId(1),
            seq: 1,
        }),
        GmToLm::Cancel(CancelRequest {
            gm,
            lm,
            job: JobId(7),
        }),
        GmToLm::Reconcile(ReconcileRequest {
            gm,
            lm,
            tasks: vec![],
            forget: true,
            life: 0,
            preempts: Vec::new(),
            preempt_seq: 0,
        }),
    ]
}

/// The value of the sample of `name` (with its labels) in `page`.
fn sample(page: &Page, name: &str) -> f64 {
    let text = page.encode();
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("{name} not in\n{text}"));
    line.rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a value")
}

#[tokio::test]
async fn launches_and_preemptions_wait_while_the_event_backlog_is_over_its_limit() {
    // Nothing listens on port 1: the broker is away and events wait in memory.
    let publisher = Publisher::start(
        "amqp://guest:guest@127.0.0.1:1/%2f".into(),
        common::ClusterName::default(),
    )
    .with_backlog_limit(1000);
    let bp = BrokerBackpressure::new(publisher.clone());
    for r in &requests() {
        assert!(bp.refuse(r).is_none(), "{}: under the limit", r.kind());
    }
    publisher.publish(
        Exchange::Events,
        "task.started".into(),
        vec![b'x'; 1001],
        true,
    );
    let [launch, preempt, cancel, reconcile] = requests();
    for r in [&launch, &launch, &preempt] {
        let answer = bp.refuse(r).expect("refused over the limit");
        assert_eq!(
            answer.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            r.kind()
        );
        let retry = answer
            .headers()
            .get(header::RETRY_AFTER)
            .expect("Retry-After");
        assert_eq!(retry, "2");
    }
    // Cancellations stop work; a restarted GM's reconciliation settles its tasks.
    assert!(bp.refuse(&cancel).is_none());
    assert!(bp.refuse(&reconcile).is_none());
    let mut page = Page::new();
    bp.render(&mut page);
    let refused = "megha_lm_broker_backlog_refusals_total";
    assert_eq!(
        sample(&page, &format!("{refused}{{request=\"launch\"}}")),
        2.0
    );
    assert_eq!(
        sample(&page, &format!("{refused}{{request=\"preempt\"}}")),
        1.0
    );
    assert_eq!(sample(&page, "megha_lm_broker_backlog_bytes"), 1001.0);
    assert_eq!(sample(&page, "megha_lm_broker_backlog_limit_bytes"), 1000.0);
    assert_eq!(sample(&page, "megha_lm_broker_connected"), 0.0);
}

#[tokio::test]
async fn state_snapshots_alone_never_hold_back_launches() {
    let publisher = Publisher::start(
        "amqp://guest:guest@127.0.0.1:1/%2f".into(),
        common::ClusterName::default(),
    )
    .with_backlog_limit(1000);
    let bp = BrokerBackpressure::new(publisher.clone());
    // A heartbeat's snapshot of 600 bytes every second for ten minutes of outage.
    for _ in 0..600 {
        publisher.publish_latest(Exchange::State, String::new(), "lm0".into(), vec![0; 600]);
    }
    assert!(
        bp.refuse(&requests()[0]).is_none(),
        "one snapshot waits, not 600"
    );
    let mut page = Page::new();
    bp.render(&mut page);
    assert_eq!(sample(&page, "megha_lm_broker_backlog_bytes"), 600.0);
    assert_eq!(sample(&page, "megha_lm_snapshots_superseded_total"), 599.0);
}
