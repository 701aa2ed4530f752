//! The last task events this GM emitted (queued, dispatched, requeued, preempted...),
//! kept in a small ring for the dashboard's "recent events" panel. The ring sits on
//! the event sink: every event that goes to the broker is also remembered here.

use common::events::TaskEvent;
use service_kit::links::Sink;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many events the ring keeps.
pub const RECENT_EVENTS: usize = 200;

#[derive(Clone, Debug, Default)]
pub struct RecentEvents(Arc<Mutex<VecDeque<TaskEvent>>>);

impl RecentEvents {
    /// `sink`, with every event also kept in this ring.
    pub fn tee(&self, sink: Sink<Vec<TaskEvent>>) -> Sink<Vec<TaskEvent>> {
        let ring = self.0.clone();
        Arc::new(move |events: Vec<TaskEvent>| {
            {
                let mut ring = ring.lock().unwrap_or_else(|e| e.into_inner());
                for e in events.iter().rev().take(RECENT_EVENTS).rev() {
                    if ring.len() == RECENT_EVENTS {
                        ring.pop_front();
                    }
                    ring.push_back(e.clone());
                }
            }
            sink(events)
        })
    }

    /// The newest events first, at most `limit`, those `keep` accepts.
    pub fn newest(&self, limit: usize, keep: impl Fn(&TaskEvent) -> bool) -> Vec<TaskEvent> {
        let ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        ring.iter()
            .rev()
            .filter(|e| keep(e))
            .take(limit)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::events::TaskEventKind;
    use common::{GmId, Micros, TaskId};

    fn queued(job: u64) -> TaskEvent {
        TaskEvent {
            task: TaskId::new(job, 0),
            at: Micros(job),
            kind: TaskEventKind::Queued { gm: GmId(0) },
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_events_and_still_forwards_all() {
        let forwarded = Arc::new(Mutex::new(0usize));
        let counter = forwarded.clone();
        let ring = RecentEvents::default();
        let sink = ring.tee(Arc::new(move |e: Vec<TaskEvent>| {
            *counter.lock().expect("lock") += e.len();
        }));
        sink((0..150).map(queued).collect());
        sink((150..300).map(queued).collect());
        assert_eq!(*forwarded.lock().expect("lock"), 300);
        let newest = ring.newest(RECENT_EVENTS + 10, |_| true);
        assert_eq!(newest.len(), RECENT_EVENTS);
        assert_eq!(newest[0].task.job.0, 299);
        assert_eq!(newest[RECENT_EVENTS - 1].task.job.0, 100);
        let odd = ring.newest(3, |e| e.task.job.0 % 2 == 1);
        assert_eq!(
            odd.iter().map(|e| e.task.job.0).collect::<Vec<_>>(),
            [299, 297, 295]
        );
    }
}
