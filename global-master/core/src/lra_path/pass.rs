//! One run of the LRA placer: the problem from the GM's view and the waiting LRAs,
//! the placer's answer checked against capacities, and the placed containers sent as
//! launch requests through the GM's dispatcher.

use super::cluster::build_cluster;
use super::{container_task, ContainerState, LraPassOutput, LraPath, LraWait};
use crate::cluster_view::ClusterView;
use crate::dispatch::Dispatcher;
use crate::outputs::{Decision, DecisionOutcome, GmStats, PassOutput};
use crate::queue::Pending;
use common::{GmId, LmId, Micros, NodeId, TaskKind, TaskSpec};
use lra_placer::{ConstraintError, LraId, LraOutcome, LraRequest, Problem};

/// The parts of the GM a pass works with.
#[derive(Debug)]
pub struct PassParts<'a> {
    pub view: &'a mut ClusterView,
    pub dispatcher: &'a mut Dispatcher,
    pub stats: &'a mut GmStats,
    /// This GM (to tell internal placements from repartitions).
    pub me: GmId,
}

/// Where the containers of one placed LRA go: `index[k]` is the container number of
/// request container `k`, `at[k]` its placer node, `nodes` the placer's numbering.
struct Sending<'a> {
    index: &'a [usize],
    at: &'a [NodeId],
    nodes: &'a [(usize, NodeId)],
}

impl LraPath {
    /// Runs the LRA placer if LRAs wait, the interval has elapsed and the view is
    /// complete; `None` otherwise.
    pub fn pass(&mut self, now: Micros, parts: PassParts<'_>) -> Option<LraPassOutput> {
        let PassParts {
            view,
            dispatcher,
            stats,
            me,
        } = parts;
        if self.queue.is_empty() || now < self.next_pass || !view.is_full() {
            return None;
        }
        self.next_pass = now + self.config.interval;
        stats.lra_passes += 1;
        let mut out = LraPassOutput {
            placer: self.config.placer.name(),
            ..LraPassOutput::default()
        };
        let (cluster, nodes) = build_cluster(
            view.lms(),
            self.records.values().flat_map(|r| {
                r.containers
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.is_deployed())
                    .filter_map(move |(j, c)| c.at().map(|at| (&r.submission.request, j, at)))
            }),
            self.config.nodes_per_rack,
            &self.config.groups,
        );
        // Each waiting LRA asks for its pending containers only; `index[k]` is the
        // container number of request container `k`.
        let mut batch: Vec<(LraRequest, Vec<usize>)> = Vec::new();
        for id in std::mem::take(&mut self.queue) {
            let Some(r) = self.records.get(&id) else {
                continue;
            };
            let index: Vec<usize> = (0..r.containers.len())
                .filter(|j| r.containers[*j] == ContainerState::Pending)
                .collect();
            let full = &r.submission.request;
            let request = LraRequest {
                id,
                containers: index.iter().map(|j| full.containers[*j].clone()).collect(),
                constraints: full.constraints.clone(),
            };
            batch.push((request, index));
        }
        let solution = loop {
            let lras: Vec<LraRequest> = batch.iter().map(|(r, _)| r.clone()).collect();
            match Problem::new(&cluster, &lras, &self.manager) {
                Ok(problem) => {
                    let solution = self.config.placer.solve(&problem);
                    if let Err(e) = solution.check(&problem) {
                        break Err(e.to_string());
                    }
                    break Ok(solution);
                }
                Err(e) => {
                    // Drop the LRA at fault (its constraints no longer validate) and
                    // place the others.
                    let culprit = match &e {
                        lra_placer::problem::ProblemError::Lra { lra, .. } => Some(*lra),
                        lra_placer::problem::ProblemError::Constraint(
                            ConstraintError::InApplication { lra, .. },
                        ) => Some(*lra),
                        _ => None,
                    };
                    let Some(lra) = culprit.filter(|l| batch.iter().any(|(r, _)| r.id == *l))
                    else {
                        break Err(e.to_string());
                    };
                    batch.retain(|(r, _)| r.id != lra);
                    self.records.remove(&lra);
                    out.refused.push((lra, e.to_string()));
                }
            }
        };
        let solution = match solution {
            Ok(s) => s,
            Err(e) => {
                for (request, _) in batch {
                    self.wait(request.id, LraWait::CheckFailed(e.clone()), &mut out);
                }
                return Some(out);
            }
        };
        out.fallback = solution.fallback.clone();
        for ((request, index), (_, outcome)) in batch.into_iter().zip(solution.outcomes) {
            match outcome {
                LraOutcome::Placed(at) => {
                    let to = Sending {
                        index: &index,
                        at: &at,
                        nodes: &nodes,
                    };
                    let sent = self.send(&request, to, view, dispatcher, me, &mut out.pass);
                    stats.lra_placed += 1;
                    out.placed.push((request.id, sent));
                }
                LraOutcome::NotPlaced(why) => {
                    stats.lra_not_placed += 1;
                    self.wait(request.id, LraWait::NotPlaced(why), &mut out);
                }
            }
        }
        Some(out)
    }

    fn wait(&mut self, id: LraId, why: LraWait, out: &mut LraPassOutput) {
        if let Some(r) = self.records.get_mut(&id) {
            r.wait = Some(why.clone());
            self.queue.push(id);
            out.waiting.push((id, why));
        }
    }

    /// Dispatches the containers of a placed LRA; answers where each went.
    fn send(
        &mut self,
        request: &LraRequest,
        to: Sending<'_>,
        view: &mut ClusterView,
        dispatcher: &mut Dispatcher,
        me: GmId,
        pass: &mut PassOutput,
    ) -> Vec<(LmId, NodeId)> {
        let Sending { index, at, nodes } = to;
        let id = request.id;
        let mut sent = Vec::with_capacity(at.len());
        for (k, global) in at.iter().enumerate() {
            let (l, node) = nodes[global.index()];
            let j = index[k];
            let Some(r) = self.records.get(&id) else {
                break;
            };
            let container = &r.submission.request.containers[j];
            let task = TaskSpec {
                id: container_task(id, j),
                queue: r.submission.queue,
                kind: TaskKind::LongRunning,
                resources: container.resources,
                constraints: common::ConstraintSet::EMPTY,
                duration: r.submission.durations[j],
                tags: container.tags.clone(),
                executor: None,
                attempt: 1,
                preemptions: 0,
                priority: 0,
            };
            let pending = Pending {
                task,
                submitted_at: r.submitted_at,
                attempts: r.placements,
                reason: None,
                preempting: None,
                contended_since: None,
            };
            let placement = view.placement_of(l, node, me);
            let task = pending.task.id;
            let batch =
                dispatcher.dispatch(view, l, node, placement, Box::new(pending), pass, true);
            let lm = LmId(l as u16);
            pass.decisions.push(Decision {
                task,
                partitions: 0,
                words: 0,
                outcome: DecisionOutcome::Dispatched {
                    lm,
                    node,
                    placement,
                    batch,
                },
            });
            sent.push((lm, node));
        }
        if let Some(r) = self.records.get_mut(&id) {
            for (k, &(lm, node)) in sent.iter().enumerate() {
                r.containers[index[k]] = ContainerState::Launching { lm, node };
            }
            r.wait = None;
            r.round_refused = None;
            r.placements += 1;
        }
        sent
    }
}
