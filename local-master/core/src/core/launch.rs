//! Launch batches from the GMs: each request validated against the true state and
//! applied or refused on its own, a batch sent again answered as the first time; and
//! taking and returning a task's resources.

use super::LocalMaster;
use crate::allocation::Allocation;
use crate::effects::{LmEffects, LmError};
use crate::validate::validate_placement;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{
    LaunchBatch, LaunchOutcome, LaunchRequest, LaunchResponse, Placement, StartTask,
};
use common::{GmId, Micros, NodeId, TaskId, TaskKind, TaskSpec};

impl LocalMaster {
    /// Validates and applies every request of a batch independently: valid ones start,
    /// invalid ones are refused with a reason. The response carries the new state.
    pub fn handle_launch_batch(
        &mut self,
        now: Micros,
        batch: LaunchBatch,
    ) -> Result<LmEffects, LmError> {
        self.check_addressed(batch.lm)?;
        self.check_life(batch.gm, batch.life)?;
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        // One start and one event per request, at most.
        effects.starts.reserve(batch.requests.len());
        effects.events.reserve(batch.requests.len());
        let outcomes = match self.answers.cached(batch.gm, batch.seq) {
            // A repeat may carry fewer requests than the first copy (the GM leaves
            // out runs it knows ended): it is answered for those it asks about.
            Some(outcomes) => outcomes
                .into_iter()
                .filter(|(task, _)| batch.requests.iter().any(|r| r.task.id == *task))
                .collect(),
            None => {
                let outcomes: Vec<_> = batch
                    .requests
                    .into_iter()
                    .map(|request| self.apply_request(now, batch.gm, request, &mut effects))
                    .collect();
                self.answers.record(batch.gm, batch.seq, &outcomes);
                // A `Duplicate` counts as launched at the GM, which deducts its room
                // until a snapshot shows the batch applied; a batch that changed
                // nothing else would leave the version as it was, and the GM would
                // discard that snapshot as stale (and the room stay deducted).
                let duplicate = LaunchOutcome::Rejected(common::reasons::RejectReason::Duplicate);
                if outcomes.iter().any(|(_, o)| *o == duplicate) {
                    self.version += 1;
                }
                outcomes
            }
        };
        effects.response = Some(LaunchResponse {
            lm,
            gm: batch.gm,
            seq: batch.seq,
            outcomes,
            snapshot: self.snapshot(now),
        });
        Ok(effects)
    }

    /// Validates one request of a batch and applies it if it is valid.
    fn apply_request(
        &mut self,
        now: Micros,
        gm: GmId,
        request: LaunchRequest,
        effects: &mut LmEffects,
    ) -> (TaskId, LaunchOutcome) {
        let lm = self.topology.lm;
        let task_id = request.task.id;
        let checked = if self.running.contains_key(&task_id)
            || self.queued.contains_key(&task_id)
            || (self.restarted).has_finished(&task_id, request.task.attempt)
        {
            Err(common::reasons::RejectReason::Duplicate)
        } else if self.is_down(request.node) {
            Err(common::reasons::RejectReason::NodeDown)
        } else if self.is_drained(request.node) {
            Err(common::reasons::RejectReason::NodeDrained)
        } else if request.task.kind == TaskKind::Queueable {
            self.check_queueable(gm, &request)
        } else {
            validate_placement(&self.topology, gm, &request)
                .and_then(|()| self.check_reclaimable(&request))
        };
        let outcome = match checked {
            Ok(()) if request.task.kind == TaskKind::Queueable => {
                let placement = request.placement;
                self.admit_queueable(now, gm, request, effects);
                LaunchOutcome::Launched { placement }
            }
            Ok(()) => {
                let placement = request.placement;
                self.reclaim(now, request.node, &request.task.resources, effects);
                self.allocate(now, gm, request.node, placement, request.task, effects);
                LaunchOutcome::Launched { placement }
            }
            Err(reason) => {
                let finished = reason == common::reasons::RejectReason::Duplicate
                    && !self.running.contains_key(&task_id)
                    && !self.queued.contains_key(&task_id);
                if finished {
                    // Remembered finished (its worker said so when it registered
                    // again, or an earlier life's run ended here): the GM counts
                    // the run launched, and hears its end, which may never have
                    // reached it (the LM that saw it died first).
                    let end = common::messages::TaskEnd {
                        used: None,
                        task: task_id,
                        attempt: request.task.attempt,
                        node: request.node,
                        at: now,
                        failure: None,
                    };
                    effects.ended(lm, gm, end);
                }
                effects.events.push(TaskEvent {
                    task: task_id,
                    at: now,
                    kind: TaskEventKind::Rejected {
                        lm,
                        reason: reason.clone(),
                    },
                });
                LaunchOutcome::Rejected(reason)
            }
        };
        (task_id, outcome)
    }

    /// Takes the task's resources on `node` and orders the worker to start it.
    pub(crate) fn allocate(
        &mut self,
        now: Micros,
        gm: GmId,
        node: NodeId,
        placement: Placement,
        task: TaskSpec,
        effects: &mut LmEffects,
    ) {
        let resources = task.resources;
        let slot = &mut self.free[node.index()];
        *slot = slot.saturating_sub(&resources);
        self.touch(node.index());
        let usage = self.usage.entry(task.queue).or_default();
        *usage = usage.add(&resources);
        if task.kind == TaskKind::Queueable {
            let held = &mut self.q_held[node.index()];
            *held = held.add(&resources);
        }
        self.count_job(task.id.job, task.kind, 1);
        self.on_node[node.index()].push(task.id);
        self.running.insert(
            task.id,
            Allocation {
                node,
                resources,
                gm,
                placement,
                queue: task.queue,
                started: false,
                started_at: None,
                task: task.clone(),
                promoted_at: None,
                gang: false,
            },
        );
        self.version += 1;
        self.order_start(now, node, task, effects);
    }

    /// Records the launch and orders the worker to start the task.
    pub(crate) fn order_start(
        &mut self,
        now: Micros,
        node: NodeId,
        task: TaskSpec,
        effects: &mut LmEffects,
    ) {
        effects.events.push(TaskEvent {
            task: task.id,
            at: now,
            kind: TaskEventKind::Launched {
                lm: self.topology.lm,
                node,
            },
        });
        self.dispatches += 1;
        let dispatch = common::messages::Dispatch {
            lm_life: self.incarnation,
            seq: self.dispatches,
        };
        effects.starts.push(StartTask {
            node,
            task,
            dispatch,
        });
    }

    /// Gives a task's resources back to its node and queue.
    pub(crate) fn release(&mut self, task: TaskId) -> Option<Allocation> {
        let alloc = self.running.remove(&task)?;
        let node = alloc.node.index();
        self.free[node] = self.free[node].add(&alloc.resources);
        self.touch(node);
        if alloc.task.kind == TaskKind::Queueable {
            self.q_held[node] = self.q_held[node].saturating_sub(&alloc.resources);
        }
        self.count_job(task.job, alloc.task.kind, -1);
        self.on_node[node].retain(|t| *t != task);
        if let Some(usage) = self.usage.get_mut(&alloc.queue) {
            *usage = usage.saturating_sub(&alloc.resources);
        }
        self.version += 1;
        Some(alloc)
    }
}
