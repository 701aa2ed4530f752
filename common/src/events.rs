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
        /// Soft constraints (docs/alsched.md): the branch of its job's utility tree
        /// the node is in (the tree path, `utility.max[1].prefer`); absent for a
        /// job without a tree or a task that took no branch (why: `GET
        /// /v1/tasks/{job}/{index}`, `soft.passed_over`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
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
        /// A restarted LM announces again an end its previous life may not have
        /// published (a worker listed it on registering again): `at` is the real
        /// end time, and an observer that saw this task end already drops it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reannounced: bool,
    },
    /// Killed to make room for other work; `lost` is how long it had run (work lost).
    /// It is queued again by its GM and starts afresh.
    Preempted {
        lm: LmId,
        node: NodeId,
        #[serde(default)]
        lost: Micros,
    },
    Failed {
        detail: String,
        /// As for `finished`: an end announced again by a restarted LM.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reannounced: bool,
    },
    /// A running QUEUEABLE task became GUARANTEED (Mercury promotion): it keeps
    /// running where it is and is never killed to make room for other work again.
    Promoted {
        lm: LmId,
        node: NodeId,
    },
    /// Its job was cancelled at the GM that owns it: it left the queue, or its LM
    /// stopped it. Final.
    Cancelled {
        gm: GmId,
    },
    /// Its GM stopped (SIGTERM, drain timeout over) with the task still queued, and
    /// the task is in that GM's journal: the GM's next life takes it up again (its
    /// next events are that life's, e.g. `dispatched`). Not final. A GM without a
    /// journal reports such tasks `failed` instead: they will not resume.
    Suspended {
        gm: GmId,
    },
}

impl TaskEventKind {
    /// A run finished on `node` (announced for the first time).
    pub fn finished(lm: LmId, node: NodeId) -> Self {
        TaskEventKind::Finished {
            lm,
            node,
            reannounced: false,
        }
    }

    /// A run failed (announced for the first time).
    pub fn failed(detail: impl Into<String>) -> Self {
        TaskEventKind::Failed {
            detail: detail.into(),
            reannounced: false,
        }
    }

    /// The event of a run's end at its worker on `node` of `lm`: `Finished`, or
    /// `Failed` saying why and where (announced for the first time).
    pub fn ended(lm: LmId, node: NodeId, failure: Option<&crate::messages::TaskFailure>) -> Self {
        match failure {
            None => TaskEventKind::finished(lm, node),
            Some(failure) => TaskEventKind::failed(format!("{failure} (on {node} of {lm})")),
        }
    }

    /// Whether this is an end a restarted LM announces again.
    pub fn is_reannounced(&self) -> bool {
        matches!(
            self,
            TaskEventKind::Finished {
                reannounced: true,
                ..
            } | TaskEventKind::Failed {
                reannounced: true,
                ..
            }
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEvent {
    pub task: TaskId,
    pub at: Micros,
    #[serde(flatten)]
    pub kind: TaskEventKind,
}

impl TaskEvent {
    /// The event of an end its LM left for the GM to publish
    /// ([`crate::messages::EndsPublished`]): an LM's verdict as the LM would have
    /// published it; a failure a worker listed to a restarted LM, marked
    /// re-announced.
    pub fn of_end(
        lm: LmId,
        end: &crate::messages::TaskEnd,
        publish: crate::messages::EndsPublished,
    ) -> Self {
        match (publish, &end.failure) {
            (crate::messages::EndsPublished::ByGm, Some(failure)) => TaskEvent {
                task: end.task,
                at: end.at,
                kind: TaskEventKind::failed(failure.to_string()),
            },
            _ => TaskEvent::reannounced(lm, end),
        }
    }

    /// The event of an end announced again (a worker listed it to a restarted
    /// LM `lm`): at its real end time, marked re-announced.
    pub fn reannounced(lm: LmId, end: &crate::messages::TaskEnd) -> Self {
        let mut kind = TaskEventKind::ended(lm, end.node, end.failure.as_ref());
        if let TaskEventKind::Finished { reannounced, .. }
        | TaskEventKind::Failed { reannounced, .. } = &mut kind
        {
            *reannounced = true;
        }
        TaskEvent {
            task: end.task,
            at: end.at,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reasons::RejectReason;
    use crate::{LmId, NodeId, Resources};

    #[test]
    fn events_and_reasons_round_trip_as_json() {
        let events = vec![
            TaskEvent {
                task: TaskId::new(1, 2),
                at: Micros(3),
                kind: TaskEventKind::Rejected {
                    lm: LmId(0),
                    reason: RejectReason::InsufficientResources {
                        free: Resources::new(1, 1),
                    },
                },
            },
            TaskEvent {
                task: TaskId::new(1, 2),
                at: Micros(4),
                kind: TaskEventKind::Requeued {
                    gm: GmId(1),
                    reason: PendingReason::RejectedByLm {
                        rejection: RejectReason::UnknownNode,
                    },
                },
            },
            TaskEvent {
                task: TaskId::new(1, 2),
                at: Micros(5),
                kind: TaskEventKind::Started {
                    lm: LmId(0),
                    node: NodeId(7),
                },
            },
            TaskEvent {
                task: TaskId::new(1, 3),
                at: Micros(6),
                kind: TaskEventKind::Suspended { gm: GmId(1) },
            },
        ];
        for e in events {
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(
                serde_json::from_str::<TaskEvent>(&json).unwrap(),
                e,
                "{json}"
            );
        }
    }
}
