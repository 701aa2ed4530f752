//! Names on the broker, in one place. Every name starts with the cluster's name
//! (`--cluster-name`, default `megha`), so that clusters sharing a broker (even one
//! vhost) never see each other's messages:
//!
//! - `<cluster>.state` (fanout, durable): every LM publishes its `LmSnapshot` (bincode via
//!   `common::codec`); every GM binds its own exclusive queue.
//! - `<cluster>.events` (topic, durable): a JSON array of `TaskEvent`s of one kind per
//!   message (see `sinks::decode_events`), routing key `task.<event>` (`task.queued`, `task.started`, ...). Bind `task.#` for all.
//! - named (durable) queues: `<cluster>.<name>` ([`queue_name`]).

use common::events::TaskEventKind;
use common::ClusterName;

/// The exchanges of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// LM snapshots (fanout).
    State,
    /// Task events (topic).
    Events,
}

impl Exchange {
    /// The exchange's name on the broker for `cluster` (`megha.state` by default).
    pub fn name(self, cluster: &ClusterName) -> String {
        match self {
            Exchange::State => format!("{cluster}.state"),
            Exchange::Events => format!("{cluster}.events"),
        }
    }
}

/// The broker name of a named queue of `cluster`.
pub fn queue_name(cluster: &ClusterName, name: &str) -> String {
    format!("{cluster}.{name}")
}

/// The routing key of an event.
pub fn event_key(kind: &TaskEventKind) -> &'static str {
    match kind {
        TaskEventKind::Queued { .. } => "task.queued",
        TaskEventKind::Dispatched { .. } => "task.dispatched",
        TaskEventKind::Requeued { .. } => "task.requeued",
        TaskEventKind::Unplaceable { .. } => "task.unplaceable",
        TaskEventKind::Launched { .. } => "task.launched",
        TaskEventKind::Rejected { .. } => "task.rejected",
        TaskEventKind::Started { .. } => "task.started",
        TaskEventKind::Finished { .. } => "task.finished",
        TaskEventKind::Preempted { .. } => "task.preempted",
        TaskEventKind::Failed { .. } => "task.failed",
        TaskEventKind::Promoted { .. } => "task.promoted",
        TaskEventKind::Cancelled { .. } => "task.cancelled",
        TaskEventKind::Suspended { .. } => "task.suspended",
    }
}
