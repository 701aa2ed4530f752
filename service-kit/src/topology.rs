//! Names on the broker, in one place.
//!
//! - `megha.state` (fanout, durable): every LM publishes its `LmSnapshot` (bincode via
//!   `common::codec`); every GM binds its own exclusive queue.
//! - `megha.events` (topic, durable): a JSON array of `TaskEvent`s of one kind per
//!   message (see `sinks::decode_events`), routing key `task.<event>` (`task.queued`, `task.started`, ...). Bind `task.#` for all.

use common::events::TaskEventKind;

pub const STATE_EXCHANGE: &str = "megha.state";
pub const EVENTS_EXCHANGE: &str = "megha.events";

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
    }
}
