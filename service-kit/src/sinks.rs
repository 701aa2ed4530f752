//! Sinks that publish on the broker: task events (JSON, topic exchange, persistent)
//! and LM snapshots (bincode, fanout exchange, transient: the next heartbeat
//! supersedes a lost one).

use crate::amqp::Publisher;
use crate::links::Sink;
use crate::topology::{event_key, EVENTS_EXCHANGE, STATE_EXCHANGE};
use common::events::TaskEvent;
use common::messages::LmSnapshot;
use std::sync::Arc;

pub fn amqp_event_sink(publisher: Publisher) -> Sink<Vec<TaskEvent>> {
    Arc::new(move |events: Vec<TaskEvent>| {
        for event in events {
            match serde_json::to_vec(&event) {
                Ok(body) => {
                    publisher.publish(EVENTS_EXCHANGE, event_key(&event.kind).into(), body, true)
                }
                Err(e) => tracing::error!(task = %event.task, error = %e, "cannot encode event"),
            }
        }
    })
}

pub fn amqp_snapshot_sink(publisher: Publisher) -> Sink<LmSnapshot> {
    Arc::new(
        move |snapshot: LmSnapshot| match common::codec::encode(&snapshot) {
            Ok(body) => publisher.publish(STATE_EXCHANGE, String::new(), body, false),
            Err(e) => tracing::error!(lm = %snapshot.lm, error = %e, "cannot encode snapshot"),
        },
    )
}

/// A sink that drops everything (no observer configured).
pub fn null_sink<T: 'static>() -> Sink<T> {
    Arc::new(|_| {})
}
