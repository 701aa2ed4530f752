//! Issue 33: the ends a worker lists when it registers with a new LM life (its
//! reports may have died with the previous life) are announced again once, at the
//! times they really ended, marked as re-announcements. Before, a restarted LM
//! published the finishes its workers listed stamped with its own restart time and
//! unmarked (20, 1 and 39 duplicates in three chaos runs), and failures were not
//! listed at all: their GM heard the run "lost".
//!
//! The test plays the worker and the GM against a real LM: a fake worker registers
//! listing a finished run and a failed one; a fake GM records what the LM sends it;
//! an observer reads the event exchange. The finish is published by the LM, marked,
//! at its real time; both ends go to the GM, the failure marked for the GM to
//! publish (only the GM knows whether the run is still the task's); another
//! process of the worker listing the same ends announces nothing again.
//!
//! Fails (never skips) without RabbitMQ.

use common::events::TaskEventKind;
use common::messages::{EndsPublished, TaskEnd, TaskFailure, WorkerRegistration};
use common::protocol::LmToGm;
use common::{Micros, NodeId, TaskId};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::lone_lm::{metric_of, register_worker, LoneLm};
use tests::observer::Observer;
use tests::procs::{fake_peer, wait_until};

const JOB: u64 = 41;

#[test]
fn a_new_lm_life_announces_listed_ends_once_at_their_real_times() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lm-ends-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let observer = Observer::start(&broker.url);
    let received: Arc<Mutex<Vec<LmToGm>>> = Arc::default();
    let record = received.clone();
    let gm_side = service_kit::cluster::Cluster::new(common::ClusterName::default(), "gm");
    let gm_url = fake_peer::serve(move |request| {
        if let Ok(messages) = gm_side.decode::<Vec<LmToGm>>(&request.body, "fake GM") {
            record.lock().expect("messages").extend(messages);
        }
        gm_side.encode(&()).expect("encode")
    });
    let lm = LoneLm::spawn_lm(
        &dir,
        &broker.url,
        &["--worker-timeout-ms", "120000", "--gm-url", &gm_url],
    );
    let worker_side = service_kit::cluster::Cluster::new(common::ClusterName::default(), "worker");
    let worker_url = fake_peer::serve(move |_| worker_side.encode(&()).expect("encode"));

    // Two runs that ended a few seconds ago, as the worker recorded them.
    let now = service_kit::clock::now();
    let finished_at = Micros(now.0 - 5_000_000);
    let failed_at = Micros(now.0 - 4_000_000);
    let finished = TaskEnd::finished(TaskId::new(JOB, 0), 1, NodeId(0), finished_at);
    let failed = TaskEnd {
        failure: Some(TaskFailure::Exit { code: 3 }),
        ..TaskEnd::finished(TaskId::new(JOB, 1), 2, NodeId(1), failed_at)
    };
    let register = |key: &str| {
        let registration = WorkerRegistration {
            slot: 0,
            url: worker_url.clone(),
            holding: vec![],
            ended: vec![finished.clone(), failed.clone()],
        };
        register_worker(&lm.url, &registration, key);
    };
    register(&"a".repeat(64));

    // The finish: published by the LM at its real end time, marked.
    wait_until(
        "the finish announced again",
        Duration::from_secs(20),
        || !observer.events_of_job(JOB).is_empty(),
    );
    let events = observer.events_of_job(JOB);
    let [event] = &events[..] else {
        panic!("one event (the finish; the failure is the GM's to publish): {events:#?}")
    };
    assert_eq!(event.task, finished.task);
    assert_eq!(event.at, finished_at, "at its real end time: {event:?}");
    assert!(
        matches!(
            event.kind,
            TaskEventKind::Finished {
                node: NodeId(0),
                reannounced: true,
                ..
            }
        ),
        "{event:?}"
    );
    // Both ends to the GM, with their real times; the failure with its cause,
    // marked for the GM to publish if it takes it.
    let ends_to_gm = || -> Vec<(TaskEnd, EndsPublished)> {
        let received = received.lock().expect("messages");
        (received.iter())
            .filter_map(|m| match m {
                LmToGm::Ended(e) => Some(e.ends.iter().map(|x| (x.clone(), e.publish))),
                _ => None,
            })
            .flatten()
            .collect()
    };
    wait_until("both ends at the GM", Duration::from_secs(20), || {
        ends_to_gm().len() >= 2
    });
    let mut ends = ends_to_gm();
    ends.sort_by_key(|(e, _)| e.task);
    assert_eq!(
        ends,
        vec![
            (finished.clone(), EndsPublished::ByLm),
            (failed.clone(), EndsPublished::ByGmAgain)
        ],
        "the LM's ends to its GM"
    );
    assert_eq!(metric_of(&lm.url, "megha_lm_ends_reannounced_total"), 2.0);

    // Another process of the worker (it restarted) lists the same ends: this LM
    // life heard them already; nothing is announced again.
    register(&"b".repeat(64));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(observer.events_of_job(JOB).len(), 1, "announced twice");
    assert_eq!(ends_to_gm().len(), 2, "sent to the GM twice");
    assert_eq!(metric_of(&lm.url, "megha_lm_ends_reannounced_total"), 2.0);
    observer.close();
    let _ = std::fs::remove_dir_all(&dir);
}
