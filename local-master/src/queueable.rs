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

use crate::core::{LmEffects, LmError, LocalMaster};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{KillTask, LaunchRequest};
use common::reasons::RejectReason;
use common::{GmId, Micros, NodeId, Resources, TaskId, TaskKind, TaskSpec};

/// How an LM treats QUEUEABLE work.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueableConfig {
    /// Share of each node's capacity running QUEUEABLE work may hold (1.0: no cap).
    pub cap: f64,
    /// T_l: the launch overhead added to every node's estimate.
    pub launch_overhead: Micros,
    /// Shed queued work from nodes whose estimate exceeds mean + k·sigma (k here).
    pub shed_sigma: Option<f64>,
}

impl Default for QueueableConfig {
    fn default() -> Self {
        QueueableConfig {
            cap: 1.0,
            launch_overhead: Micros::from_millis(10),
            shed_sigma: None,
        }
    }
}

/// A QUEUEABLE task sent to a worker's queue, not yet reported started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub node: NodeId,
    pub gm: GmId,
    pub task: TaskSpec,
}

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
        Ok(())
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
        effects.kills.push(KillTask {
            node: alloc.node,
            task,
        });
        effects.events.push(TaskEvent {
            task,
            at: now,
            kind: TaskEventKind::Preempted {
                lm: self.topology.lm,
                node: alloc.node,
            },
        });
        self.pending_kills
            .insert(task, (alloc.gm, alloc.task, lost));
        true
    }

    fn unqueue(&mut self, task: TaskId) -> Option<Queued> {
        let queued = self.queued.remove(&task)?;
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
            effects.kills.push(KillTask { node, task });
            effects.events.push(TaskEvent {
                task,
                at: now,
                kind: TaskEventKind::Preempted {
                    lm: self.topology.lm,
                    node,
                },
            });
            let lost = now.since(at);
            self.pending_kills
                .insert(task, (queued.gm, queued.task, lost));
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
    /// release it and hand it back to its GM.
    pub(crate) fn queueable_killed_by_worker(
        &mut self,
        node: NodeId,
        task: TaskId,
        at: Micros,
    ) -> Result<LmEffects, LmError> {
        let mut effects = LmEffects::default();
        let (gm, spec, lost) = match self.running.get(&task) {
            Some(a) if a.node == node && a.task.kind == TaskKind::Queueable => {
                let Some(alloc) = self.release(task) else {
                    return Err(LmError::UnknownTask { task, node });
                };
                let lost = alloc.started_at.map_or(Micros::ZERO, |s| at.since(s));
                (alloc.gm, alloc.task, lost)
            }
            _ => match self.queued.get(&task) {
                Some(q) if q.node == node => {
                    let Some(q) = self.unqueue(task) else {
                        return Err(LmError::UnknownTask { task, node });
                    };
                    (q.gm, q.task, Micros::ZERO)
                }
                _ => return Err(LmError::UnknownTask { task, node }),
            },
        };
        crate::preempt::push_requeue(&mut effects.requeues, self.topology.lm, gm, spec, lost);
        Ok(effects)
    }

    /// Estimated queuing delay of every node: R = T_q + T_r + T_l, each task's time
    /// weighted by its share of the node's CPU.
    pub fn queue_delays(&self, now: Micros) -> Vec<Micros> {
        let overhead = self
            .queueable
            .as_ref()
            .map_or(Micros::ZERO, |q| q.launch_overhead);
        (0..self.on_node.len())
            .map(|n| overhead + self.queued_work(n) + self.remaining_work(n, now))
            .collect()
    }

    fn queued_work(&self, n: usize) -> Micros {
        let capacity = &self.topology.capacity[n];
        self.queued_on[n]
            .iter()
            .filter_map(|t| self.queued.get(t))
            .map(|q| q.task.resources.node_time(q.task.duration, capacity))
            .fold(Micros::ZERO, |a, b| a + b)
    }

    fn remaining_work(&self, n: usize, now: Micros) -> Micros {
        let capacity = &self.topology.capacity[n];
        self.on_node[n]
            .iter()
            .filter_map(|t| self.running.get(t))
            .map(|a| {
                let end = a.started_at.unwrap_or(now) + a.task.duration;
                a.resources.node_time(end.since(now), capacity)
            })
            .fold(Micros::ZERO, |a, b| a + b)
    }

    /// Load shedding: on nodes whose estimate exceeds mean + k·sigma over this LM,
    /// drops queued work (latest queued first) until the estimate is under the
    /// threshold. The worker confirms each drop; the task then goes back to its GM.
    /// A task is shed at most once per LM, so that shedding cannot chase work around
    /// forever.
    pub(crate) fn shed(&mut self, now: Micros, effects: &mut LmEffects) {
        let Some(k) = self.queueable.as_ref().and_then(|q| q.shed_sigma) else {
            return;
        };
        if self.queued.is_empty() {
            return;
        }
        let delays = self.queue_delays(now);
        let n = delays.len().max(1) as f64;
        let mean = delays.iter().map(|d| d.0 as f64).sum::<f64>() / n;
        let var = delays
            .iter()
            .map(|d| (d.0 as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let threshold = mean + k * var.sqrt();
        for (node, delay) in delays.iter().enumerate() {
            let mut estimate = delay.0 as f64;
            while estimate > threshold {
                let Some(task) = self.queued_on[node]
                    .iter()
                    .rev()
                    .find(|t| !self.shed_once.contains(t))
                    .copied()
                else {
                    break;
                };
                self.shed_once.insert(task);
                let Some(q) = self.unqueue(task) else {
                    break;
                };
                let capacity = &self.topology.capacity[node];
                estimate -= q.task.resources.node_time(q.task.duration, capacity).0 as f64;
                effects.kills.push(KillTask { node: q.node, task });
                effects.events.push(TaskEvent {
                    task,
                    at: now,
                    kind: TaskEventKind::Preempted {
                        lm: self.topology.lm,
                        node: q.node,
                    },
                });
                self.pending_kills
                    .insert(task, (q.gm, q.task, Micros::ZERO));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::cluster::{LmSpec, NodeSpec};
    use common::messages::{LaunchBatch, LaunchOutcome, Placement, WorkerReport};
    use common::{ConstraintSet, LmId};

    fn lm(nodes: usize, cores: u64, config: QueueableConfig) -> LocalMaster {
        let node = NodeSpec {
            capacity: Resources::cores(cores, 1024),
            constraints: ConstraintSet::EMPTY,
        };
        let spec = LmSpec {
            id: LmId(0),
            partitions: vec![vec![node; nodes]],
        };
        LocalMaster::new(&spec, 1, crate::LmConfig::default(), Micros(0)).with_queueable(config)
    }

    fn task(id: u64, cores: u64, secs: u64, kind: TaskKind) -> TaskSpec {
        TaskSpec::short(
            TaskId::new(id, 0),
            Resources::cores(cores, 1),
            Micros::from_secs(secs),
        )
        .with_kind(kind)
    }

    fn send(lm: &mut LocalMaster, now: u64, seq: u64, tasks: &[(TaskSpec, u32)]) -> LmEffects {
        let batch = LaunchBatch {
            gm: GmId(0),
            lm: LmId(0),
            seq,
            requests: tasks
                .iter()
                .map(|(t, n)| LaunchRequest {
                    task: t.clone(),
                    node: NodeId(*n),
                    placement: Placement::Internal,
                })
                .collect(),
        };
        lm.handle_launch_batch(Micros(now), batch).unwrap()
    }

    fn started(lm: &mut LocalMaster, id: u64, node: u32, at: u64) -> LmEffects {
        lm.handle_worker_report(
            Micros(at),
            WorkerReport::Started {
                node: NodeId(node),
                task: TaskId::new(id, 0),
                at: Micros(at),
            },
        )
        .unwrap()
    }

    #[test]
    fn queueable_work_is_accepted_beyond_free_resources_and_estimated() {
        let mut lm = lm(2, 1, QueueableConfig::default());
        let q = |id| (task(id, 1, 10, TaskKind::Queueable), 0);
        let fx = send(&mut lm, 0, 1, &[q(1), q(2), q(3)]);
        assert_eq!(
            fx.starts.len(),
            3,
            "every QUEUEABLE task goes to the worker"
        );
        assert_eq!(lm.queued_len(), 3);
        started(&mut lm, 1, 0, 0);
        let delays = lm.queue_delays(Micros::from_secs(4));
        let overhead = QueueableConfig::default().launch_overhead;
        // Two queued tasks of 10 s plus 6 s left of the running one.
        assert_eq!(delays[0], overhead + Micros::from_secs(26));
        assert_eq!(delays[1], overhead);
        // Running QUEUEABLE work is invisible to the GMs' view of free resources.
        assert_eq!(lm.snapshot(Micros(5)).free[0], Resources::cores(1, 1024));
        assert_eq!(lm.snapshot(Micros(5)).queue_delay.len(), 2);
    }

    #[test]
    fn other_work_kills_the_fewest_queueable_tasks_most_recent_first() {
        let mut lm = lm(1, 4, QueueableConfig::default());
        let qs: Vec<_> = (1..=3)
            .map(|i| (task(i, 1, 100, TaskKind::Queueable), 0))
            .collect();
        send(&mut lm, 0, 1, &qs);
        for i in 1..=3 {
            started(&mut lm, i, 0, i * 10);
        }
        // 1 core free; a 2-core GUARANTEED task needs one QUEUEABLE task gone.
        let fx = send(&mut lm, 50, 2, &[(task(9, 2, 5, TaskKind::Guaranteed), 0)]);
        assert_eq!(
            fx.kills,
            vec![KillTask {
                node: NodeId(0),
                task: TaskId::new(3, 0)
            }]
        );
        assert!(matches!(
            fx.response.unwrap().outcomes[0].1,
            LaunchOutcome::Launched { .. }
        ));
        let fx = lm
            .handle_worker_report(
                Micros(60),
                WorkerReport::Killed {
                    node: NodeId(0),
                    task: TaskId::new(3, 0),
                    at: Micros(60),
                },
            )
            .unwrap();
        assert_eq!(fx.requeues.len(), 1);
        assert_eq!(fx.requeues[0].tasks[0].0.id, TaskId::new(3, 0));
        // A Short task that would need more than QUEUEABLE work frees is refused.
        let fx = send(&mut lm, 70, 3, &[(task(10, 3, 5, TaskKind::Short), 0)]);
        assert!(fx.kills.is_empty());
        assert!(matches!(
            fx.response.unwrap().outcomes[0].1,
            LaunchOutcome::Rejected(RejectReason::InsufficientResources { .. })
        ));
    }

    #[test]
    fn a_queueable_start_racing_other_work_is_killed_and_requeued_once() {
        let mut lm = lm(1, 1, QueueableConfig::default());
        send(&mut lm, 0, 1, &[(task(1, 1, 10, TaskKind::Queueable), 0)]);
        // The LM places GUARANTEED work before it hears that the QUEUEABLE task started.
        send(&mut lm, 1, 2, &[(task(2, 1, 10, TaskKind::Guaranteed), 0)]);
        let fx = started(&mut lm, 1, 0, 2);
        assert_eq!(fx.kills.len(), 1);
        let fx = lm
            .handle_worker_report(
                Micros(3),
                WorkerReport::Killed {
                    node: NodeId(0),
                    task: TaskId::new(1, 0),
                    at: Micros(3),
                },
            )
            .unwrap();
        assert_eq!(fx.requeues[0].tasks.len(), 1);
        assert_eq!(lm.free()[0], Resources::cores(0, 1023));
    }

    #[test]
    fn the_cap_refuses_tasks_larger_than_the_queueable_share() {
        let mut lm = lm(
            1,
            4,
            QueueableConfig {
                cap: 0.5,
                ..QueueableConfig::default()
            },
        );
        let fx = send(&mut lm, 0, 1, &[(task(1, 3, 1, TaskKind::Queueable), 0)]);
        assert!(matches!(
            fx.response.unwrap().outcomes[0].1,
            LaunchOutcome::Rejected(RejectReason::OverQueueableCap { .. })
        ));
    }

    #[test]
    fn shedding_drops_queued_work_from_outliers_only() {
        let mut lm = lm(
            4,
            1,
            QueueableConfig {
                shed_sigma: Some(0.5),
                ..QueueableConfig::default()
            },
        );
        let qs: Vec<_> = (1..=6)
            .map(|i| (task(i, 1, 10, TaskKind::Queueable), 0))
            .chain([(task(7, 1, 10, TaskKind::Queueable), 1)])
            .collect();
        send(&mut lm, 0, 1, &qs);
        started(&mut lm, 1, 0, 0);
        started(&mut lm, 7, 1, 0);
        let fx = lm.tick(Micros::from_secs(20));
        assert!(!fx.kills.is_empty());
        assert!(fx.kills.iter().all(|k| k.node == NodeId(0)));
        // Latest queued first; the running task is never shed.
        assert_eq!(fx.kills[0].task, TaskId::new(6, 0));
        assert!(fx.kills.iter().all(|k| k.task != TaskId::new(1, 0)));
    }
}
