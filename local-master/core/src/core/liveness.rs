//! Workers that stop answering, and come back. The driver decides when a worker is
//! silent for too long (it owns the clock and the transport) and names its nodes;
//! the core makes every consequence follow from that one input:
//!
//! - every task held on those nodes ends `Lost` and is reported to the GM that
//!   launched it (which may retry it elsewhere); a QUEUEABLE task waiting in the
//!   worker's queue too; a preempted task whose kill was never confirmed goes back to
//!   its GM's queue, as the confirmation would have sent it; a cancelled task whose
//!   kill was never confirmed ends `cancelled` in the event stream (no longer awaited);
//! - the nodes are down: no free resources in the snapshots (the GMs' views drop
//!   them), launches there are refused (`NodeDown`);
//! - a lost task's later reports from that node are absorbed (its end was already reported), and a
//!   report that it runs is answered with a kill (it may run elsewhere by now).
//!
//! When the worker is back, its nodes are offered again; tasks it still holds that
//! were reported lost are killed, so a task never runs twice on purpose.

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{KillTask, TaskEnd, TaskFailure, WorkerReport};
use common::{Micros, NodeId, Resources, TaskId};

impl LocalMaster {
    /// The worker of `nodes` stopped answering (`reason` says how): see the module
    /// documentation. A node already down is left as it is; an unknown node is an
    /// error and changes nothing.
    pub fn nodes_lost(
        &mut self,
        now: Micros,
        nodes: &[NodeId],
        reason: &str,
    ) -> Result<LmEffects, LmError> {
        self.check_nodes(nodes)?;
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        for &node in nodes {
            let n = node.index();
            if self.down[n] {
                continue;
            }
            let failure = TaskFailure::Lost {
                reason: format!("{reason} ({node} of {lm})"),
            };
            let mut ends = Vec::new();
            for task in self.on_node[n].clone() {
                if let Some(alloc) = self.release(task) {
                    ends.push((alloc.gm, task, alloc.task.attempt));
                }
            }
            for task in self.queued_on[n].clone() {
                if let Some(q) = self.unqueue(task) {
                    ends.push((q.gm, task, q.task.attempt));
                }
            }
            let killed: Vec<TaskId> = self
                .pending_kills
                .iter()
                .filter(|(_, k)| k.node == node)
                .map(|(t, _)| *t)
                .collect();
            for task in killed {
                if let Some(k) = self.pending_kills.remove(&task) {
                    self.ended_adopted(task);
                    effects.events.push(TaskEvent {
                        task,
                        at: now,
                        kind: TaskEventKind::Preempted {
                            lm,
                            node,
                            lost: k.lost,
                        },
                    });
                    self.lost.insert((task, k.task.attempt));
                    effects.requeue(lm, k.gm, k.task, k.lost);
                }
            }
            self.cancels_lost(now, node, &mut effects);
            for (gm, task, attempt) in ends {
                self.ended_adopted(task);
                self.lost.insert((task, attempt));
                // Published by the GM when it takes it (`EndsPublished::ByGm`): a
                // verdict that dies with this LM is never seen as the task's end.
                effects.lost(
                    lm,
                    gm,
                    TaskEnd {
                        used: None,
                        task,
                        attempt,
                        node,
                        at: now,
                        failure: Some(failure.clone()),
                    },
                );
            }
            self.down[n] = true;
            self.free[n] = Resources::ZERO;
            self.q_held[n] = Resources::ZERO;
            self.touch(n);
            self.version += 1;
        }
        Ok(effects)
    }

    /// The worker of `nodes` is back (it registered again), holding `holding` (node,
    /// task, run): its nodes are offered again with their whole capacity, and every
    /// run it holds that was reported lost is killed. Tasks it holds that this LM never knew are
    /// left for [`LocalMaster::adopt`] (an LM that restarted). Unknown nodes change
    /// nothing.
    pub fn nodes_back(
        &mut self,
        nodes: &[NodeId],
        holding: &[(NodeId, TaskId, u32)],
    ) -> Result<LmEffects, LmError> {
        self.check_nodes(nodes)?;
        let mut effects = LmEffects::default();
        for &node in nodes {
            let n = node.index();
            if self.down[n] {
                self.down[n] = false;
                self.free[n] =
                    (self.topology.capacity[n]).saturating_sub(&self.gangs.held_on(node));
                self.touch(n);
                self.version += 1;
            }
        }
        for &(node, task, attempt) in holding {
            if self.lost.contains(&(task, attempt)) {
                effects.kills.push(KillTask {
                    node,
                    task,
                    attempt,
                });
            }
        }
        Ok(effects)
    }

    /// True when run `attempt` of `task` was reported lost (its worker may still
    /// report it, or already reported its end, which was absorbed).
    pub fn is_lost_run(&self, task: TaskId, attempt: u32) -> bool {
        self.lost.contains(&(task, attempt)) || self.lost_ended.contains(&(task, attempt))
    }

    /// True when `node`'s worker is down.
    pub fn is_down(&self, node: NodeId) -> bool {
        super::drain::flagged(&self.down, node)
    }

    /// The nodes that are down.
    pub fn down_nodes(&self) -> Vec<NodeId> {
        super::drain::nodes_flagged(&self.down)
    }

    /// A report about a task already reported lost: its end is absorbed (the GM
    /// knows it ended), a start answered with a kill.
    pub(super) fn lost_task_reported(&mut self, report: WorkerReport, effects: &mut LmEffects) {
        match report {
            WorkerReport::Started {
                node,
                task,
                attempt,
                ..
            } => {
                effects.kills.push(KillTask {
                    node,
                    task,
                    attempt,
                });
            }
            other => {
                let run = (other.task(), other.attempt());
                self.lost.remove(&run);
                self.lost_ended.insert(run);
            }
        }
    }

    fn check_nodes(&self, nodes: &[NodeId]) -> Result<(), LmError> {
        match nodes.iter().find(|n| n.index() >= self.down.len()) {
            Some(&node) => Err(LmError::UnknownNode { node }),
            None => Ok(()),
        }
    }
}
