//! An observer of a cluster's task events, straight on the broker (`task.#` on the
//! event exchange), as loadgen and users' tools read them.

use crate::procs::wait_until;
use common::events::{TaskEvent, TaskEventKind};
use service_kit::amqp::{subscribe, Subscription, SubscriptionHandle};
use service_kit::topology::Exchange;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Log = Arc<Mutex<Vec<TaskEvent>>>;

/// An observer of every task event of the cluster, straight on the broker.
pub struct Observer {
    log: Log,
    handle: SubscriptionHandle,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Observer({} events)",
            self.log.lock().map_or(0, |l| l.len())
        )
    }
}

impl Observer {
    /// Subscribes to `task.#` of the default cluster at `amqp` (waits until it is).
    pub fn start(amqp: &str) -> Observer {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let log = Log::default();
        let record = log.clone();
        let cluster = service_kit::cluster::Cluster::new(common::ClusterName::default(), "test");
        let sub = Subscription {
            exchange: Exchange::Events,
            binding: "task.#".into(),
            queue: None,
            ack: false,
            prefetch: 0,
        };
        let (status, handle) = rt.block_on(async {
            subscribe(amqp.to_owned(), cluster, sub, move |_, body| {
                let events = service_kit::sinks::decode_events(body).expect("task events");
                record.lock().expect("events").extend(events);
            })
        });
        wait_until("the observer subscribed", Duration::from_secs(30), || {
            status.is_connected()
        });
        Observer { log, handle, rt }
    }

    /// The events of `job` seen so far, by task index, in arrival order.
    pub fn of_job(&self, job: u64) -> BTreeMap<u32, Vec<TaskEventKind>> {
        let mut by_task: BTreeMap<u32, Vec<TaskEventKind>> = BTreeMap::new();
        for e in self.log.lock().expect("events").iter() {
            if e.task.job.0 == job {
                by_task
                    .entry(e.task.index)
                    .or_default()
                    .push(e.kind.clone());
            }
        }
        by_task
    }

    /// Every event of `job` seen so far, whole (time and marks), in arrival order.
    pub fn events_of_job(&self, job: u64) -> Vec<TaskEvent> {
        let log = self.log.lock().expect("events");
        log.iter()
            .filter(|e| e.task.job.0 == job)
            .cloned()
            .collect()
    }

    /// The events of `job` once `done` holds for them, or after 10 s (the caller
    /// then asserts with the events in its message).
    pub fn settle(
        &self,
        job: u64,
        done: impl Fn(&BTreeMap<u32, Vec<TaskEventKind>>) -> bool,
    ) -> BTreeMap<u32, Vec<TaskEventKind>> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let events = self.of_job(job);
            if done(&events) || std::time::Instant::now() > deadline {
                return events;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn close(self) {
        self.rt.block_on(self.handle.close());
    }
}
