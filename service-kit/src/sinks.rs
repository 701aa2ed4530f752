//! Sinks that publish on the broker: task events (JSON arrays, topic exchange, persistent)
//! and LM snapshots (bincode, fanout exchange, transient: the next heartbeat
//! supersedes a lost one, and while the broker is away only the newest of each LM
//! waits for it, see [`Publisher::publish_latest`]).

use crate::amqp::Publisher;
use crate::cluster::Cluster;
use crate::links::Sink;
use crate::topology::{event_key, Exchange};
use common::events::TaskEvent;
use common::messages::LmSnapshot;
use std::sync::Arc;

/// Publishes events grouped by routing key: one persistent message per kind per call,
/// whose body is a JSON array of the events of that kind, in their order. One message
/// per event cost the broker most of a core at 5,000 tasks/s (five events per task);
/// a batch of 100 launches now costs it a handful of messages.
pub fn amqp_event_sink(publisher: Publisher) -> Sink<Vec<TaskEvent>> {
    Arc::new(move |events: Vec<TaskEvent>| {
        let mut by_key: Vec<(&'static str, Vec<TaskEvent>)> = Vec::new();
        for event in events {
            let key = event_key(&event.kind);
            match by_key.iter_mut().find(|(k, _)| *k == key) {
                Some((_, group)) => group.push(event),
                None => by_key.push((key, vec![event])),
            }
        }
        for (key, group) in by_key {
            match serde_json::to_vec(&group) {
                Ok(body) => publisher.publish(Exchange::Events, key.into(), body, true),
                Err(e) => {
                    tracing::error!(key, events = group.len(), error = %e, "cannot encode events")
                }
            }
        }
    })
}

/// Decodes an event message: a JSON array of events (what [`amqp_event_sink`]
/// publishes) or a single event object.
pub fn decode_events(body: &[u8]) -> Result<Vec<TaskEvent>, serde_json::Error> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => serde_json::from_slice(body),
        _ => serde_json::from_slice::<TaskEvent>(body).map(|e| vec![e]),
    }
}

/// Publishes snapshots in `cluster`'s envelope, the newest of each LM only: a
/// snapshot still waiting for the broker is replaced by the next one of its LM (a
/// snapshot is the LM's whole state, with its incarnation and version, so a GM needs
/// only the newest; during a broker outage GMs get each LM's state from its launch
/// answers, which carry it).
pub fn amqp_snapshot_sink(publisher: Publisher, cluster: Cluster) -> Sink<LmSnapshot> {
    Arc::new(
        move |snapshot: LmSnapshot| match cluster.encode(&snapshot) {
            Ok(body) => publisher.publish_latest(
                Exchange::State,
                String::new(),
                snapshot.lm.to_string(),
                body,
            ),
            Err(e) => tracing::error!(lm = %snapshot.lm, error = %e, "cannot encode snapshot"),
        },
    )
}

/// A sink that drops everything (no observer configured).
pub fn null_sink<T: 'static>() -> Sink<T> {
    Arc::new(|_| {})
}

#[cfg(test)]
mod tests {
    use super::decode_events;
    use common::events::{TaskEvent, TaskEventKind};
    use common::{GmId, JobId, Micros, TaskId};

    fn queued(index: u32) -> TaskEvent {
        TaskEvent {
            task: TaskId {
                job: JobId(7),
                index,
            },
            at: Micros(100 + u64::from(index)),
            kind: TaskEventKind::Queued { gm: GmId(1) },
        }
    }

    #[test]
    fn decodes_arrays_and_single_events_in_order() {
        let batch = vec![queued(0), queued(1), queued(2)];
        let body = serde_json::to_vec(&batch).expect("encode");
        assert_eq!(decode_events(&body).expect("array"), batch);
        let one = serde_json::to_vec(&queued(5)).expect("encode");
        assert_eq!(decode_events(&one).expect("object"), vec![queued(5)]);
        assert!(decode_events(b" [{\"task\": 1}]").is_err());
        assert!(decode_events(b"").is_err());
    }
}
