//! Task lifecycle events. Emitted by the cores, published on the event exchange by
//! the services and recorded by the simulator; allocation-time reports are computed
//! from them.

use crate::messages::Placement;
use crate::reasons::{PendingReason, RejectReason};
use crate::{GmId, LmId, Micros, NodeId, TaskId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum TaskEventKind {
    /// Accepted by a GM into its queue.
    Queued {
        gm: GmId,
    },
    /// The GM chose a node and sent the launch request.
    Dispatched {
        gm: GmId,
        lm: LmId,
        node: NodeId,
        placement: Placement,
    },
    /// The GM found no node this time; the task went back to its queue.
    Requeued {
        gm: GmId,
        reason: PendingReason,
    },
    /// No node can ever host the task; it leaves the system, reported.
    Unplaceable {
        gm: GmId,
        reason: PendingReason,
    },
    /// The LM validated the request and sent the task to the worker.
    Launched {
        lm: LmId,
        node: NodeId,
    },
    /// The LM refused the request.
    Rejected {
        lm: LmId,
        reason: RejectReason,
    },
    Started {
        lm: LmId,
        node: NodeId,
    },
    Finished {
        lm: LmId,
        node: NodeId,
    },
    Preempted {
        lm: LmId,
        node: NodeId,
    },
    Failed {
        detail: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEvent {
    pub task: TaskId,
    pub at: Micros,
    #[serde(flatten)]
    pub kind: TaskEventKind,
}
