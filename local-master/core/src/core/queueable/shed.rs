//! Queuing-delay estimates (Mercury 4.2) and load shedding (Mercury 4.3).

use crate::allocation::PendingKill;
use crate::core::LocalMaster;
use crate::effects::LmEffects;
use common::messages::KillTask;
use common::Micros;

impl LocalMaster {
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
                effects.kills.push(KillTask {
                    node: q.node,
                    task,
                    attempt: q.task.attempt,
                });
                self.pending_kills.insert(
                    task,
                    PendingKill {
                        gm: q.gm,
                        node: q.node,
                        task: q.task,
                        lost: Micros::ZERO,
                    },
                );
            }
        }
    }
}
