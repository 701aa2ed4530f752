//! Mercury's QUEUEABLE work, the LM's half.
//!
//! A QUEUEABLE task is accepted even when its node has no free resources: the worker
//! queues it. The LM keeps what it knows of every node's queue so that it can
//! estimate the queuing delay a new task would see there, R = T_q + T_r + T_l
//! (Mercury 4.2: queued work, remaining work of running tasks, a launch overhead),
//! and send it with its state. Running QUEUEABLE work holds resources but is
//! invisible to the GMs' views: when any other task is validated on a node short only
//! because of it, the LM kills the fewest QUEUEABLE tasks needed (most recently started
//! first) and hands them back to their GMs, exactly as a preemption.
//!
//! Load shaping (Mercury 4.3): a per-node cap on the share of resources running
//! QUEUEABLE work may hold; load shedding of queued work from nodes whose estimate
//! exceeds mean + k·sigma over this LM's nodes (dropped tasks go back to their GM).
//!
//! - [`quota`]: per-job quotas on QUEUEABLE containers (Mercury 4.1).
//! - [`promote`]: promotion of running QUEUEABLE containers to GUARANTEED.
//! - [`shed`]: queuing-delay estimates and load shedding.

pub mod promote;
pub mod quota;
mod shed;

pub use crate::config::PromotionPolicy;
pub use promote::PromoteRefusal;

use super::LocalMaster;
use crate::allocation::{PendingKill, Queued};
pub use crate::config::QueueableConfig;
use crate::effects::{LmEffects, LmError};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{KillTask, LaunchRequest};
use common::reasons::RejectReason;
use common::{GmId, Micros, NodeId, Resources, TaskId, TaskKind};

impl LocalMaster {
    /// The most running QUEUEABLE work may hold on `node`.
    pub fn queueable_limit(&self, node: NodeId) -> Resources {
        let capacity = self
            .topology
            .capacity
            .get(node.index())
            .copied()
            .unwrap_or(Resources::ZERO);
        capacity.scaled(self.queueable.as_ref().map_or(1.0, |q| q.cap))
    }

    /// A QUEUEABLE request is valid when its placement is, and it fits under the cap.
    pub(crate) fn check_queueable(
        &self,
        gm: GmId,
        request: &LaunchRequest,
    ) -> Result<(), RejectReason> {
        crate::validate::validate_placement(&self.topology, gm, request)?;
        let cap = self.queueable_limit(request.node);
        if !cap.fits(&request.task.resources) {
            return Err(RejectReason::OverQueueableCap { cap });
        }
        self.check_quota(&request.task)
    }

    /// A non-QUEUEABLE request fits if the node's resources not held by other work,
    /// QUEUEABLE work aside, are enough.
    pub(crate) fn check_reclaimable(&self, request: &LaunchRequest) -> Result<(), RejectReason> {
        let n = request.node.index();
        let free = self.free[n];
        let available = free.add(&self.q_held[n]);
        if available.fits(&request.task.resources) {
            Ok(())
        } else {
            Err(RejectReason::InsufficientResources { free: available })
        }
    }

    /// Sends the task to the worker, which starts it at once if it has room (under
    /// the cap) and nothing queued, and queues it otherwise. The LM takes its
    /// resources when the worker reports the start: the worker is the authority on
    /// which QUEUEABLE task runs when.
    pub(crate) fn admit_queueable(
        &mut self,
        now: Micros,
        gm: GmId,
        request: LaunchRequest,
        effects: &mut LmEffects,
    ) {
        let n = request.node.index();
        let task = request.task;
        self.count_job(task.id.job, TaskKind::Queueable, 1);
        self.queued_on[n].push(task.id);
        self.queued.insert(
            task.id,
            Queued {
                node: request.node,
                gm,
                task: task.clone(),
            },
        );
        self.version += 1;
        self.order_start(now, request.node, task, effects);
    }

    /// Kills the fewest running QUEUEABLE tasks on `node` needed for `need` to fit.
    pub(crate) fn reclaim(
        &mut self,
        now: Micros,
        node: NodeId,
        need: &Resources,
        effects: &mut LmEffects,
    ) {
        let n = node.index();
        if self.free[n].fits(need) {
            return;
        }
        let mut candidates: Vec<(TaskId, Resources, Micros)> = self.on_node[n]
            .iter()
            .filter_map(|t| self.running.get(t).map(|a| (*t, a)))
            .filter(|(_, a)| a.task.kind == TaskKind::Queueable)
            .map(|(t, a)| (t, a.resources, a.started_at.unwrap_or(Micros::MAX)))
            .collect();
        candidates.sort_by_key(|(t, _, started)| (std::cmp::Reverse(*started), *t));
        let mut room = self.free[n];
        let mut chosen = Vec::new();
        for (t, res, _) in candidates {
            if room.fits(need) {
                break;
            }
            room = room.add(&res);
            chosen.push((t, res));
        }
        let mut i = 0;
        while i < chosen.len() {
            let without = room.saturating_sub(&chosen[i].1);
            if without.fits(need) {
                room = without;
                chosen.remove(i);
            } else {
                i += 1;
            }
        }
        for (task, _) in chosen {
            self.kill_running(now, task, effects);
        }
    }

    /// Releases a running task and orders the worker to kill it; it is handed back
    /// to its GM once the worker confirms (a finish that wins the race stands).
    pub(crate) fn kill_running(
        &mut self,
        now: Micros,
        task: TaskId,
        effects: &mut LmEffects,
    ) -> bool {
        let Some(alloc) = self.release(task) else {
            return false;
        };
        let lost = alloc.started_at.map_or(Micros::ZERO, |s| now.since(s));
        // The `preempted` event follows the worker's confirmation (a finish that
        // wins the race stands instead).
        effects.kills.push(KillTask {
            node: alloc.node,
            task,
            attempt: alloc.task.attempt,
        });
        self.pending_kills.insert(
            task,
            PendingKill {
                gm: alloc.gm,
                node: alloc.node,
                task: alloc.task,
                lost,
            },
        );
        true
    }

    pub(crate) fn unqueue(&mut self, task: TaskId) -> Option<Queued> {
        let queued = self.queued.remove(&task)?;
        self.count_job(task.job, TaskKind::Queueable, -1);
        self.queued_on[queued.node.index()].retain(|t| *t != task);
        self.version += 1;
        Some(queued)
    }

    /// A queued QUEUEABLE task started. If other work took its room meanwhile (the
    /// LM validated it while the start was on its way), it is killed at once.
    pub(crate) fn queueable_started(
        &mut self,
        now: Micros,
        node: NodeId,
        task: TaskId,
        at: Micros,
        effects: &mut LmEffects,
    ) -> Result<(), LmError> {
        match self.queued.get(&task) {
            Some(q) if q.node == node => {}
            _ => return Err(LmError::UnknownTask { task, node }),
        }
        let Some(queued) = self.unqueue(task) else {
            return Err(LmError::UnknownTask { task, node });
        };
        let placement = if self.topology.home[node.index()] == queued.gm {
            common::messages::Placement::Internal
        } else {
            common::messages::Placement::Repartition
        };
        effects.events.push(TaskEvent {
            task,
            at,
            kind: TaskEventKind::Started {
                lm: self.topology.lm,
                node,
            },
        });
        if !self.free[node.index()].fits(&queued.task.resources) {
            // Its room is promised to other work: kill it without taking anything.
            let lost = now.since(at);
            effects.kills.push(KillTask {
                node,
                task,
                attempt: queued.task.attempt,
            });
            self.pending_kills.insert(
                task,
                PendingKill {
                    gm: queued.gm,
                    node,
                    task: queued.task,
                    lost,
                },
            );
            return Ok(());
        }
        // Take its resources without a second start order.
        let mut scratch = LmEffects::default();
        self.allocate(now, queued.gm, node, placement, queued.task, &mut scratch);
        if let Some(alloc) = self.running.get_mut(&task) {
            alloc.started = true;
            alloc.started_at = Some(at);
        }
        Ok(())
    }

    /// The worker killed a QUEUEABLE task on its own to make room for other work:
    /// release it and hand it back to its GM. A task promoted while the promotion
    /// was on its way to the worker is handled alike (the worker saw it QUEUEABLE).
    pub(crate) fn queueable_killed_by_worker(
        &mut self,
        node: NodeId,
        task: TaskId,
        attempt: u32,
        at: Micros,
    ) -> Result<LmEffects, LmError> {
        let mut effects = LmEffects::default();
        let (gm, spec, lost) = match self.running.get(&task) {
            Some(a)
                if a.node == node
                    && a.task.attempt == attempt
                    && (a.task.kind == TaskKind::Queueable || a.promoted_at.is_some()) =>
            {
                let Some(alloc) = self.release(task) else {
                    return Err(LmError::UnknownTask { task, node });
                };
                let lost = alloc.started_at.map_or(Micros::ZERO, |s| at.since(s));
                (alloc.gm, alloc.task, lost)
            }
            _ => match self.queued.get(&task) {
                Some(q) if q.node == node && q.task.attempt == attempt => {
                    let Some(q) = self.unqueue(task) else {
                        return Err(LmError::UnknownTask { task, node });
                    };
                    (q.gm, q.task, Micros::ZERO)
                }
                _ => return Err(LmError::UnknownTask { task, node }),
            },
        };
        effects.events.push(TaskEvent {
            task,
            at,
            kind: TaskEventKind::Preempted {
                lm: self.topology.lm,
                node,
                lost,
            },
        });
        effects.requeue(self.topology.lm, gm, spec, lost);
        Ok(effects)
    }
}

#[cfg(test)]
mod tests;
