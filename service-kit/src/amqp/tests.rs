//! Unit tests of `amqp.rs`.

use super::publish::{coalesce, merge_latest, Msg};
use crate::topology::Exchange;
use std::sync::atomic::Ordering;

const EVENTS_EXCHANGE: Exchange = Exchange::Events;
const STATE_EXCHANGE: Exchange = Exchange::State;

fn msg(exchange: Exchange, key: &str, body: &str) -> Msg {
    Msg {
        exchange,
        key: key.into(),
        body: body.as_bytes().to_vec(),
        persistent: true,
        slot: None,
    }
}

fn shape(batch: &[Msg]) -> Vec<(String, String)> {
    batch
        .iter()
        .map(|m| (m.key.clone(), String::from_utf8_lossy(&m.body).into_owned()))
        .collect()
}

#[test]
fn merges_adjacent_event_arrays_of_one_key_and_keeps_order() {
    let mut batch = vec![
        msg(EVENTS_EXCHANGE, "task.queued", "[1]"),
        msg(EVENTS_EXCHANGE, "task.queued", "[2,3]"),
        msg(EVENTS_EXCHANGE, "task.dispatched", "[4]"),
        msg(EVENTS_EXCHANGE, "task.queued", "[5]"),
        msg(STATE_EXCHANGE, "", "[6]"),
        msg(STATE_EXCHANGE, "", "[7]"),
        msg(EVENTS_EXCHANGE, "task.queued", "[]"),
        msg(EVENTS_EXCHANGE, "task.queued", "{\"single\":8}"),
    ];
    coalesce(&mut batch);
    let want = [
        ("task.queued", "[1,2,3]"),
        ("task.dispatched", "[4]"),
        ("task.queued", "[5]"),
        ("", "[6]"),
        ("", "[7]"),
        ("task.queued", "[]"),
        ("task.queued", "{\"single\":8}"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, b)| (k.to_string(), b.to_string()))
        .collect();
    assert_eq!(shape(&batch), want);
}

#[test]
fn urls_are_logged_without_their_password_and_take_it_from_a_file() {
    assert_eq!(
        super::redact("amqp://megha:s3cret@rabbitmq:5672/%2f"),
        "amqp://megha:***@rabbitmq:5672/%2f"
    );
    assert_eq!(super::redact("amqps://host:5671"), "amqps://host:5671");
    let err = super::resolve_url("http://x:y@h/".into()).expect_err("scheme");
    assert!(!err.to_string().contains(":y@"), "{err}");
    assert!(super::resolve_url("amqps://h:5671/%2f".into()).is_ok());
    // The password file (a process-wide variable: only this test sets it).
    let dir = std::env::temp_dir().join(format!("megha-amqp-pw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("pw");
    std::fs::write(&file, "p@ss/w rd\n").expect("write");
    std::env::set_var(super::PASSWORD_FILE_ENV, &file);
    let url = super::resolve_url("amqp://megha@rabbitmq:5672/%2f".into());
    let no_user = super::resolve_url("amqp://rabbitmq:5672/%2f".into());
    std::env::remove_var(super::PASSWORD_FILE_ENV);
    assert_eq!(
        url.expect("url"),
        "amqp://megha:p%40ss%2Fw%20rd@rabbitmq:5672/%2f"
    );
    assert!(no_user.is_err());
    let _ = std::fs::remove_dir_all(&dir);
    // The user from a file: put in a URL naming none; the same as the URL's is fine;
    // another is refused, naming both.
    let with = |url: &str, user: Option<&str>, pw: Option<&str>| {
        super::resolve_url_with(url.into(), user.map(Into::into), pw.map(Into::into))
    };
    assert_eq!(
        with("amqp://rabbitmq:5672/%2f", Some("megha-lm1"), Some("pw")).expect("url"),
        "amqp://megha-lm1:pw@rabbitmq:5672/%2f"
    );
    assert_eq!(
        with("amqps://megha-gm@rabbitmq:5671/%2f", Some("megha-gm"), None).expect("url"),
        "amqps://megha-gm@rabbitmq:5671/%2f"
    );
    let err = with("amqp://megha@rabbitmq/%2f", Some("megha-gm"), None).expect_err("two users");
    assert!(
        err.to_string().contains("megha-gm") && err.to_string().contains("`megha`"),
        "{err}"
    );
    assert_eq!(
        with("amqp://rabbitmq/v", None, None).expect("url"),
        "amqp://rabbitmq/v"
    );
}

#[tokio::test]
async fn the_publisher_buffer_is_counted_and_backlogged_while_the_broker_is_away() {
    // Nothing listens on port 1: every connection attempt fails and messages wait.
    let publisher = super::Publisher::start(
        "amqp://guest:guest@127.0.0.1:1/%2f".into(),
        common::ClusterName::default(),
    )
    .with_backlog_limit(1000);
    assert!(!publisher.backlogged());
    for _ in 0..9 {
        publisher.publish(
            Exchange::Events,
            "task.queued".into(),
            vec![b'x'; 100],
            true,
        );
    }
    assert_eq!(publisher.pending_bytes(), 900);
    assert!(!publisher.backlogged(), "900 of 1000 bytes");
    publisher.publish(
        Exchange::Events,
        "task.queued".into(),
        vec![b'x'; 200],
        true,
    );
    assert!(publisher.backlogged(), "1100 of 1000 bytes");
    // Not lost: still pending (nothing confirmed them).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(publisher.pending_bytes(), 1100);
}

fn state(slot: &str, body: &str) -> Msg {
    Msg {
        exchange: STATE_EXCHANGE,
        key: String::new(),
        body: body.as_bytes().to_vec(),
        persistent: false,
        slot: Some(slot.into()),
    }
}

#[test]
fn the_newest_state_of_a_slot_replaces_the_one_an_unconfirmed_batch_holds() {
    let status = super::LinkStatus::default();
    // An unconfirmed batch (publishing failed): events, lm0's and lm1's states.
    let mut batch = vec![
        msg(EVENTS_EXCHANGE, "task.started", "[1]"),
        state("lm0", "lm0-v1"),
        msg(EVENTS_EXCHANGE, "task.finished", "[2]"),
        state("lm1", "lm1-v1"),
    ];
    let mut batch_bytes: u64 = batch.iter().map(|m| m.body.len() as u64).sum();
    status.pending_bytes.store(batch_bytes, Ordering::Relaxed);
    // Meanwhile lm0 published a newer state, and lm2 its first; the publisher counted
    // them as pending when they were handed over.
    let taken = vec![state("lm0", "lm0-v2-longer"), state("lm2", "lm2-v1")];
    let handed: u64 = taken.iter().map(|m| m.body.len() as u64).sum();
    status.pending_bytes.fetch_add(handed, Ordering::Relaxed);
    merge_latest(&mut batch, &mut batch_bytes, taken, &status);
    let want = [
        ("task.started", "[1]"),
        ("", "lm0-v2-longer"),
        ("task.finished", "[2]"),
        ("", "lm1-v1"),
        ("", "lm2-v1"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, b)| (k.to_string(), b.to_string()))
        .collect();
    assert_eq!(shape(&batch), want);
    let now: u64 = batch.iter().map(|m| m.body.len() as u64).sum();
    assert_eq!(batch_bytes, now, "the batch counts what it holds");
    assert_eq!(status.pending_bytes.load(Ordering::Relaxed), now);
    assert_eq!(status.superseded.load(Ordering::Relaxed), 1, "lm0-v1");
    // An event never replaces anything, even with a slot-less twin in the batch.
    let mut events = vec![msg(EVENTS_EXCHANGE, "task.started", "[1]")];
    let mut bytes = 3;
    merge_latest(&mut events, &mut bytes, vec![], &status);
    assert_eq!((events.len(), bytes), (1, 3));
}

#[tokio::test]
async fn while_the_broker_is_away_only_the_newest_state_waits_and_events_all_do() {
    // Nothing listens on port 1: every connection attempt fails and messages wait.
    let publisher = super::Publisher::start(
        "amqp://guest:guest@127.0.0.1:1/%2f".into(),
        common::ClusterName::default(),
    )
    .with_backlog_limit(10_000);
    for version in 0..1000u32 {
        let body = format!("{version:0>100}").into_bytes();
        publisher.publish_latest(STATE_EXCHANGE, String::new(), "lm0".into(), body.clone());
        publisher.publish_latest(STATE_EXCHANGE, String::new(), "lm1".into(), body);
    }
    // Two slots of 100 bytes, not 200,000 bytes.
    assert_eq!(publisher.pending_bytes(), 200);
    assert_eq!(publisher.status.superseded.load(Ordering::Relaxed), 1998);
    assert!(!publisher.backlogged(), "states alone never backlog");
    for _ in 0..100 {
        publisher.publish(
            EVENTS_EXCHANGE,
            "task.finished".into(),
            vec![b'x'; 100],
            true,
        );
    }
    assert_eq!(publisher.pending_bytes(), 10_200, "every event waits");
    assert!(publisher.backlogged());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(publisher.pending_bytes(), 10_200, "nothing lost while away");
}

#[test]
fn the_broker_user_is_the_urls_user_or_guest() {
    use super::broker_user;
    assert_eq!(broker_user("amqp://lm0:pw@127.0.0.1:5672/v"), "lm0");
    assert_eq!(broker_user("amqps://megha%2Dlm1@h/%2f"), "megha-lm1");
    assert_eq!(broker_user("amqp://127.0.0.1:5672/%2f"), "guest");
    assert_eq!(broker_user("amqp://:pw@h/"), "guest");
}
