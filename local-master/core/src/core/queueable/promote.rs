//! Promotion of running QUEUEABLE containers to GUARANTEED (Mercury 3.3, 4.1).
//!
//! A promoted container keeps running where it is, but its resources move from the
//! QUEUEABLE holdings (reclaimable, invisible to the GMs) to guaranteed use: it is
//! never killed to make room for other work again, and its job counts it as
//! GUARANTEED (which raises a relative quota). The LM is the authority: it promotes
//! on request ([`LocalMaster::promote`]) or, with a [`PromotionPolicy`], the
//! longest-running QUEUEABLE tasks at every heartbeat. A promotion must keep the
//! central scheduler's invariants: with queue shares configured, a task of a queue
//! over its share is not promoted.

pub use crate::config::PromotionPolicy;
use crate::core::LocalMaster;
use crate::effects::LmEffects;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::PromoteTask;
use common::{Micros, TaskId, TaskKind};

/// Why a promotion was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PromoteRefusal {
    #[error("task {0} is not running on this LM")]
    NotRunning(TaskId),
    #[error("task {0} is not a running QUEUEABLE container")]
    NotQueueable(TaskId),
    #[error("task {0} belongs to a queue over its share")]
    OverShare(TaskId),
}

impl LocalMaster {
    /// Checks that `task` may be promoted now.
    fn promotable(&self, task: TaskId) -> Result<(), PromoteRefusal> {
        let alloc = self
            .running
            .get(&task)
            .ok_or(PromoteRefusal::NotRunning(task))?;
        if alloc.task.kind != TaskKind::Queueable || alloc.started_at.is_none() {
            return Err(PromoteRefusal::NotQueueable(task));
        }
        if let Some(fairness) = &self.fairness {
            let usage = self.usage(alloc.queue);
            if fairness.violation(alloc.queue, &usage, &self.total) > 0.0 {
                return Err(PromoteRefusal::OverShare(task));
            }
        }
        Ok(())
    }

    /// Promotes a running QUEUEABLE task to GUARANTEED (a job manager's request).
    pub fn promote(&mut self, now: Micros, task: TaskId) -> Result<LmEffects, PromoteRefusal> {
        self.promotable(task)?;
        let mut effects = LmEffects::default();
        self.apply_promotion(now, task, &mut effects);
        Ok(effects)
    }

    fn apply_promotion(&mut self, now: Micros, task: TaskId, effects: &mut LmEffects) {
        let Some(alloc) = self.running.get_mut(&task) else {
            return;
        };
        alloc.task.kind = TaskKind::Guaranteed;
        alloc.promoted_at = Some(now);
        let (node, resources, job) = (alloc.node, alloc.resources, task.job);
        let held = &mut self.q_held[node.index()];
        *held = held.saturating_sub(&resources);
        self.touch(node.index());
        self.count_job(job, TaskKind::Queueable, -1);
        self.count_job(job, TaskKind::Guaranteed, 1);
        self.version += 1;
        tracing::debug!(task = %task, node = %node, "QUEUEABLE container promoted");
        effects.promoted.push(PromoteTask { node, task });
        effects.events.push(TaskEvent {
            task,
            at: now,
            kind: TaskEventKind::Promoted {
                lm: self.topology.lm,
                node,
            },
        });
    }

    /// The policy's promotions at a heartbeat: the longest-running eligible
    /// QUEUEABLE tasks first (ties by task id).
    pub(crate) fn promote_due(&mut self, now: Micros, effects: &mut LmEffects) {
        let Some(policy) = self.queueable.as_ref().and_then(|q| q.promotion.clone()) else {
            return;
        };
        let mut due: Vec<(Micros, TaskId)> = self
            .running
            .iter()
            .filter(|(_, a)| a.task.kind == TaskKind::Queueable)
            .filter_map(|(t, a)| a.started_at.map(|s| (s, *t)))
            .filter(|(s, _)| now.since(*s) >= policy.after)
            .collect();
        due.sort_unstable();
        let mut done = 0;
        for (_, task) in due {
            if done == policy.per_tick {
                break;
            }
            if self.promotable(task).is_ok() {
                self.apply_promotion(now, task, effects);
                done += 1;
            }
        }
    }
}
