//! The LM state machine. Inputs: launch batches from GMs, reports from workers, and
//! the passage of time. Outputs ([`LmEffects`]): responses and heartbeats for GMs,
//! start orders for workers, lifecycle events.

use crate::queueable::{QueueableConfig, Queued};
use crate::validate::validate_placement;
use common::cluster::LmSpec;
use common::events::{TaskEvent, TaskEventKind};
use common::fairness::FairnessConfig;
use common::messages::{
    KillTask, LaunchBatch, LaunchOutcome, LaunchResponse, LmSnapshot, LmTopology, Placement,
    PreemptResponse, PreemptedTasks, PromoteTask, StartTask, WorkerReport,
};
use common::quota::JobContainers;
use common::{GmId, JobId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskKind, TaskSpec};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// The outcome of each request of one launch batch.
type BatchOutcomes = Vec<(TaskId, LaunchOutcome)>;

/// How many recent batch answers per GM the LM keeps for retried batches.
const ANSWERS_KEPT: usize = 256;

#[derive(Clone, Debug)]
pub struct LmConfig {
    /// How often the LM sends its state to every GM (the paper uses 10 s).
    pub heartbeat_period: Micros,
}

impl Default for LmConfig {
    fn default() -> Self {
        LmConfig {
            heartbeat_period: Micros::from_secs(10),
        }
    }
}

/// Resources held by one task. A repartitioned task holds them on behalf of the
/// requesting GM's partition (the paper's logical node) until it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub node: NodeId,
    pub resources: Resources,
    pub gm: GmId,
    pub placement: Placement,
    pub queue: QueueId,
    pub started: bool,
    /// When the worker reported the start (for lost-work accounting).
    pub started_at: Option<Micros>,
    /// The task itself, to requeue it if it is preempted.
    pub task: TaskSpec,
    /// When a QUEUEABLE task was promoted to GUARANTEED (its kind is GUARANTEED
    /// from then on).
    pub promoted_at: Option<Micros>,
}

/// What the LM wants done after handling an input.
#[derive(Debug, Default)]
pub struct LmEffects {
    /// The answer to a launch batch (send to that GM).
    pub response: Option<LaunchResponse>,
    /// State to broadcast to every GM.
    pub heartbeat: Option<LmSnapshot>,
    /// Tasks to start on workers.
    pub starts: Vec<StartTask>,
    pub events: Vec<TaskEvent>,
    /// The answer to a preemption request (send to that GM).
    pub preempt_response: Option<PreemptResponse>,
    /// Tasks to stop on workers (preempted).
    pub kills: Vec<KillTask>,
    /// Preempted tasks to hand back to the GMs that own their queues.
    pub requeues: Vec<PreemptedTasks>,
    /// QUEUEABLE tasks promoted to GUARANTEED (tell their workers).
    pub promoted: Vec<PromoteTask>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LmError {
    #[error("worker report for task {task} on {node}, which is not running there")]
    UnknownTask { task: TaskId, node: NodeId },
    #[error("launch batch is addressed to {got}, this is {want}")]
    WrongLm { got: LmId, want: LmId },
}

#[derive(Debug)]
pub struct LocalMaster {
    pub(crate) topology: Arc<LmTopology>,
    pub(crate) free: Vec<Resources>,
    pub(crate) running: HashMap<TaskId, Allocation>,
    /// Tasks on each node (for preemption), in launch order.
    pub(crate) on_node: Vec<Vec<TaskId>>,
    pub(crate) usage: BTreeMap<QueueId, Resources>,
    pub(crate) total: Resources,
    pub(crate) fairness: Option<Arc<FairnessConfig>>,
    /// Preempted tasks waiting for the worker to confirm the kill: (GM, task, lost work).
    pub(crate) pending_kills: HashMap<TaskId, (GmId, TaskSpec, Micros)>,
    /// Per node: resources held by running QUEUEABLE tasks (included in `free`'s
    /// deduction, but reclaimable by any other task).
    pub(crate) q_held: Vec<Resources>,
    /// QUEUEABLE tasks sent to a worker's queue and not yet reported started.
    pub(crate) queued: HashMap<TaskId, Queued>,
    /// Per node: the queued QUEUEABLE tasks, in the order they were sent.
    pub(crate) queued_on: Vec<Vec<TaskId>>,
    pub(crate) queueable: Option<QueueableConfig>,
    /// Tasks this LM has shed once: never shed again, so shedding always ends.
    pub(crate) shed_once: std::collections::HashSet<TaskId>,
    /// Per job: outstanding QUEUEABLE and running GUARANTEED containers (quotas).
    pub(crate) jobs: HashMap<JobId, JobContainers>,
    applied_batches: Vec<u64>,
    /// Per GM, the outcomes of its most recent batches by sequence number, so that a
    /// batch sent again (its answer was lost) gets the same answer instead of being
    /// applied twice.
    answered: Vec<VecDeque<(u64, BatchOutcomes)>>,
    pub(crate) version: u64,
    /// Tasks the previous LM launched that have finished: those the workers reported
    /// finished when they registered again, and adopted tasks that finished since. A
    /// GM's launch of one of them (a batch resent because the old LM never answered)
    /// is answered `Duplicate`.
    pub(crate) finished_before: std::collections::HashSet<TaskId>,
    /// Tasks taken over from the previous LM ([`LocalMaster::adopt`]) still running.
    pub(crate) adopted: std::collections::HashSet<TaskId>,
    snapshot_cache: Option<(u64, Arc<Vec<Resources>>)>,
    config: LmConfig,
    next_heartbeat: Micros,
}

impl LocalMaster {
    /// An LM for `spec`, whose first heartbeat goes out at `now`.
    pub fn new(spec: &LmSpec, gms: u16, config: LmConfig, now: Micros) -> Self {
        let mut home = Vec::new();
        let mut constraints = Vec::new();
        let mut capacity = Vec::new();
        for (_, gm, node) in spec.nodes() {
            home.push(gm);
            constraints.push(node.constraints);
            capacity.push(node.capacity);
        }
        let topology = LmTopology {
            lm: spec.id,
            gms,
            home,
            constraints,
            capacity,
        };
        let total = topology.capacity.iter().sum::<Resources>();
        LocalMaster {
            free: topology.capacity.clone(),
            on_node: vec![Vec::new(); topology.node_count()],
            q_held: vec![Resources::ZERO; topology.node_count()],
            queued: HashMap::new(),
            queued_on: vec![Vec::new(); topology.node_count()],
            queueable: None,
            shed_once: std::collections::HashSet::new(),
            jobs: HashMap::new(),
            topology: Arc::new(topology),
            running: HashMap::new(),
            usage: BTreeMap::new(),
            total,
            fairness: None,
            pending_kills: HashMap::new(),
            applied_batches: vec![0; gms as usize],
            answered: vec![VecDeque::new(); gms as usize],
            // Versions start at the start time, so that the snapshots of a restarted LM
            // supersede those of its previous life in every GM's view (one change per
            // microsecond would be needed to catch up).
            version: now.0.max(1),
            finished_before: Default::default(),
            adopted: Default::default(),
            snapshot_cache: None,
            config,
            next_heartbeat: now,
        }
    }

    /// Enables QUEUEABLE support: the per-node cap, queuing-delay estimates in every
    /// snapshot, and load shedding if configured.
    pub fn with_queueable(mut self, config: QueueableConfig) -> Self {
        self.queueable = Some(config);
        self
    }

    /// QUEUEABLE tasks waiting in worker queues, as the LM knows them.
    pub fn queued_len(&self) -> usize {
        self.queued.len()
    }

    /// Enables preemption verified against these queue shares.
    pub fn with_fairness(mut self, fairness: Arc<FairnessConfig>) -> Self {
        self.fairness = Some(fairness);
        self
    }

    /// The sum of all node capacities.
    pub fn total_capacity(&self) -> Resources {
        self.total
    }

    pub fn id(&self) -> LmId {
        self.topology.lm
    }

    pub fn topology(&self) -> &Arc<LmTopology> {
        &self.topology
    }

    /// Free resources per node (authoritative).
    pub fn free(&self) -> &[Resources] {
        &self.free
    }

    pub fn running(&self) -> &HashMap<TaskId, Allocation> {
        &self.running
    }

    /// Resources in use by a queue, as this LM knows it.
    pub fn usage(&self, queue: QueueId) -> Resources {
        self.usage.get(&queue).copied().unwrap_or_default()
    }

    /// When [`LocalMaster::tick`] next has something to do.
    pub fn next_wakeup(&self) -> Micros {
        self.next_heartbeat
    }

    /// The current state, as sent to GMs.
    pub fn snapshot(&mut self, now: Micros) -> LmSnapshot {
        let free = match &self.snapshot_cache {
            Some((v, free)) if *v == self.version => free.clone(),
            _ => {
                // QUEUEABLE work is invisible to the GMs' views: any other task may
                // take its place.
                let free = Arc::new(
                    self.free
                        .iter()
                        .zip(&self.q_held)
                        .map(|(f, q)| f.add(q))
                        .collect::<Vec<_>>(),
                );
                self.snapshot_cache = Some((self.version, free.clone()));
                free
            }
        };
        LmSnapshot {
            lm: self.topology.lm,
            version: self.version,
            taken_at: now,
            topology: self.topology.clone(),
            free,
            applied_batches: self.applied_batches.clone(),
            usage: self.usage.iter().map(|(q, r)| (*q, *r)).collect(),
            queue_delay: match self.queueable {
                Some(_) => Arc::new(self.queue_delays(now)),
                None => Arc::new(Vec::new()),
            },
            queueable_held: match self.queueable {
                Some(_) => Arc::new(self.q_held.clone()),
                None => Arc::new(Vec::new()),
            },
            jobs: match self.queueable {
                Some(_) => Arc::new(self.job_counts()),
                None => Arc::new(Vec::new()),
            },
        }
    }

    /// Sends the periodic heartbeat when it is due.
    pub fn tick(&mut self, now: Micros) -> LmEffects {
        let mut effects = LmEffects::default();
        if now >= self.next_heartbeat {
            self.promote_due(now, &mut effects);
            self.shed(now, &mut effects);
            effects.heartbeat = Some(self.snapshot(now));
            while self.next_heartbeat <= now {
                self.next_heartbeat += self.config.heartbeat_period.max(Micros(1));
            }
        }
        effects
    }

    /// Validates and applies every request of a batch independently: valid ones start,
    /// invalid ones are refused with a reason. The response carries the new state.
    pub fn handle_launch_batch(
        &mut self,
        now: Micros,
        batch: LaunchBatch,
    ) -> Result<LmEffects, LmError> {
        if batch.lm != self.topology.lm {
            return Err(LmError::WrongLm {
                got: batch.lm,
                want: self.topology.lm,
            });
        }
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        let cached = self
            .answered
            .get(batch.gm.index())
            .and_then(|a| a.iter().find(|(seq, _)| *seq == batch.seq))
            .map(|(_, outcomes)| outcomes.clone());
        if let Some(outcomes) = cached {
            effects.response = Some(LaunchResponse {
                lm,
                gm: batch.gm,
                seq: batch.seq,
                outcomes,
                snapshot: self.snapshot(now),
            });
            return Ok(effects);
        }
        let mut outcomes = Vec::with_capacity(batch.requests.len());
        for request in batch.requests {
            let task_id = request.task.id;
            let checked = if self.running.contains_key(&task_id)
                || self.queued.contains_key(&task_id)
                || self.finished_before.contains(&task_id)
            {
                Err(common::reasons::RejectReason::Duplicate)
            } else if request.task.kind == TaskKind::Queueable {
                self.check_queueable(batch.gm, &request)
            } else {
                validate_placement(&self.topology, batch.gm, &request)
                    .and_then(|()| self.check_reclaimable(&request))
            };
            match checked {
                Ok(()) if request.task.kind == TaskKind::Queueable => {
                    let placement = request.placement;
                    self.admit_queueable(now, batch.gm, request, &mut effects);
                    outcomes.push((task_id, LaunchOutcome::Launched { placement }));
                }
                Ok(()) => {
                    self.reclaim(now, request.node, &request.task.resources, &mut effects);
                    self.allocate(
                        now,
                        batch.gm,
                        request.node,
                        request.placement,
                        request.task,
                        &mut effects,
                    );
                    outcomes.push((
                        task_id,
                        LaunchOutcome::Launched {
                            placement: request.placement,
                        },
                    ));
                }
                Err(reason) => {
                    effects.events.push(TaskEvent {
                        task: task_id,
                        at: now,
                        kind: TaskEventKind::Rejected {
                            lm,
                            reason: reason.clone(),
                        },
                    });
                    outcomes.push((task_id, LaunchOutcome::Rejected(reason)));
                }
            }
        }
        if let Some(last) = self.applied_batches.get_mut(batch.gm.index()) {
            *last = (*last).max(batch.seq);
        }
        if let Some(answered) = self.answered.get_mut(batch.gm.index()) {
            if answered.len() == ANSWERS_KEPT {
                answered.pop_front();
            }
            answered.push_back((batch.seq, outcomes.clone()));
        }
        effects.response = Some(LaunchResponse {
            lm,
            gm: batch.gm,
            seq: batch.seq,
            outcomes,
            snapshot: self.snapshot(now),
        });
        Ok(effects)
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
            },
        );
        self.version += 1;
        self.order_start(now, node, task, effects);
    }

    /// Records the launch and orders the worker to start the task.
    pub(crate) fn order_start(
        &self,
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
        effects.starts.push(StartTask { node, task });
    }

    /// Gives a task's resources back to its node and queue.
    pub(crate) fn release(&mut self, task: TaskId) -> Option<Allocation> {
        let alloc = self.running.remove(&task)?;
        let node = alloc.node.index();
        self.free[node] = self.free[node].add(&alloc.resources);
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

    /// A worker started or finished a task. Finishing returns the task's resources to
    /// the physical node (and so ends any repartition).
    pub fn handle_worker_report(
        &mut self,
        now: Micros,
        report: WorkerReport,
    ) -> Result<LmEffects, LmError> {
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        match report {
            WorkerReport::Started { node, task, at } if self.queued.contains_key(&task) => {
                self.queueable_started(now, node, task, at, &mut effects)?;
            }
            // Started after the LM ordered its kill (preempted, shed or reclaimed):
            // the kill is on its way to the worker. The start is still reported, so
            // an observer sees the run the kill (or a finish winning the race) ends.
            WorkerReport::Started { node, task, at } if self.pending_kills.contains_key(&task) => {
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Started { node, task, at } => {
                let alloc = self
                    .running
                    .get_mut(&task)
                    .filter(|a| a.node == node)
                    .ok_or(LmError::UnknownTask { task, node })?;
                alloc.started = true;
                alloc.started_at = Some(at);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Started { lm, node },
                });
            }
            WorkerReport::Killed { node, task, at } => {
                let Some((gm, spec, lost)) = self.pending_kills.remove(&task) else {
                    // The worker made room for other work on its own.
                    self.ended_adopted(task, false);
                    return self.queueable_killed_by_worker(node, task, at);
                };
                self.ended_adopted(task, false);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Preempted { lm, node, lost },
                });
                crate::preempt::push_requeue(&mut effects.requeues, lm, gm, spec, lost);
            }
            WorkerReport::Finished { node, task, at }
                if self.pending_kills.remove(&task).is_some() =>
            {
                // Finished before the kill reached the worker: the finish stands.
                self.ended_adopted(task, true);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Finished { lm, node },
                });
            }
            WorkerReport::Finished { node, task, at } => {
                match self.running.get(&task) {
                    Some(a) if a.node == node => {}
                    _ => return Err(LmError::UnknownTask { task, node }),
                }
                if self.release(task).is_none() {
                    return Err(LmError::UnknownTask { task, node });
                }
                self.ended_adopted(task, true);
                effects.events.push(TaskEvent {
                    task,
                    at,
                    kind: TaskEventKind::Finished { lm, node },
                });
            }
        }
        Ok(effects)
    }

    /// True when no node has anything allocated (every resource returned).
    pub fn is_idle(&self) -> bool {
        self.running.is_empty()
            && self.pending_kills.is_empty()
            && self.queued.is_empty()
            && self.free == self.topology.capacity
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
