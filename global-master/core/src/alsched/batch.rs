//! The exact solve of a batch (an option, `GmConfig::soft_ilp_ms`): at the start
//! of a pass the GM places the ready tasks of its jobs with trees together, with the
//! ILP of [`lra_placer::soft_ilp`] (the LRA placer's HiGHS backend) over the nodes
//! its view shows with something free, maximising the jobs' total utility under the
//! nodes' room and the tasks' hard constraints. Each task then takes its planned
//! node in the pass if the node still has room for it (else the greedy step, as
//! without the option); a task the plan left out takes the greedy step. On a
//! timeout or a solver fault the whole batch takes the greedy step (the caller logs
//! and counts it).

use super::{SoftChoice, SoftPlacement};
use crate::placement::{Found, Views};
use common::messages::Placement;
use common::{TaskId, TaskSpec};
use lra_placer::soft_ilp::{solve, SoftJob, SoftNode, SoftTask};
use rustc_hash::FxHashMap;

/// The most nodes a batch is solved over (those with the most free CPU first):
/// the model grows with tasks x nodes.
pub const MAX_BATCH_NODES: usize = 512;

impl SoftPlacement {
    /// Plans `tasks` (ready tasks of jobs with trees) over the view within
    /// `time_limit_ms`; answers how many tasks got a node, or why nothing was
    /// planned.
    pub fn plan_batch(
        &mut self,
        views: &Views,
        tasks: &[&TaskSpec],
        time_limit_ms: u64,
    ) -> Result<usize, String> {
        self.planned.clear();
        // Every slot with something free, as (LM, node, placement) and its model node.
        let mut where_: Vec<Found> = Vec::new();
        let mut nodes: Vec<SoftNode> = Vec::new();
        for (lm, view) in views.lms.iter().enumerate() {
            let Some(view) = view.as_ref().filter(|v| !v.is_busy()) else {
                continue;
            };
            for (p, part) in view.partitions.iter().enumerate() {
                let placement = match p == views.me {
                    true => Placement::Internal,
                    false => Placement::Repartition,
                };
                for slot in part.available.iter_ones() {
                    let node = part.nodes[slot];
                    let attributes = view
                        .topology
                        .constraints
                        .get(node.index())
                        .copied()
                        .unwrap_or_default();
                    where_.push(Found {
                        lm,
                        node,
                        placement,
                    });
                    nodes.push(SoftNode {
                        attributes,
                        free: part.free[slot],
                    });
                }
            }
        }
        if nodes.len() > MAX_BATCH_NODES {
            let mut order: Vec<usize> = (0..nodes.len()).collect();
            order.sort_by_key(|&i| std::cmp::Reverse(nodes[i].free.cpu_millis));
            order.truncate(MAX_BATCH_NODES);
            order.sort_unstable();
            where_ = order.iter().map(|&i| where_[i]).collect();
            nodes = order.iter().map(|&i| nodes[i]).collect();
        }
        // The batch's jobs, in the order their first task comes.
        let mut index: FxHashMap<common::JobId, usize> = FxHashMap::default();
        let mut ids: Vec<Vec<TaskId>> = Vec::new();
        let mut jobs: Vec<SoftJob<'_>> = Vec::new();
        for task in tasks {
            let Some(job) = self.jobs.get(&task.id.job) else {
                continue;
            };
            let j = *index.entry(task.id.job).or_insert_with(|| {
                ids.push(Vec::new());
                jobs.push(SoftJob {
                    utility: &job.utility,
                    counts: job.counts.clone(),
                    tasks: Vec::new(),
                });
                jobs.len() - 1
            });
            ids[j].push(task.id);
            jobs[j].tasks.push(SoftTask {
                resources: task.resources,
                constraints: task.constraints,
            });
        }
        if jobs.is_empty() || nodes.is_empty() {
            return Ok(0);
        }
        let plan = solve(&nodes, &jobs, time_limit_ms)?;
        let mut planned = FxHashMap::default();
        for (j, per_task) in plan.nodes.iter().enumerate() {
            for (t, node) in per_task.iter().enumerate() {
                if let Some(n) = node {
                    planned.insert(ids[j][t], where_[*n]);
                }
            }
        }
        let count = planned.len();
        self.planned = planned;
        Ok(count)
    }

    /// The node the batch's plan gave `task`, if it still has room for it, with the
    /// choice to record: the best-gaining branch whose set holds the node (none when
    /// no such branch does).
    pub(super) fn take_planned(&mut self, views: &Views, task: &TaskSpec) -> Option<Found> {
        let found = self.planned.remove(&task.id)?;
        let view = views.lms.get(found.lm)?.as_ref()?;
        let (attributes, free) = view.node_now(found.node.0)?;
        if !free.fits(&task.resources) || !task.constraints.satisfied_by(attributes) {
            return None;
        }
        let job = self.jobs.get(&task.id.job)?;
        let mut choice = SoftChoice {
            branch: None,
            gain: 0.0,
            utility: 0.0,
            passed_over: Vec::new(),
        };
        for (b, gain) in job.utility.ranked(&job.counts) {
            let branch = &job.utility.branches[b];
            if branch.set.holds(attributes) {
                choice.branch = Some(branch.label.clone());
                choice.gain = gain;
                break;
            }
        }
        self.open = Some((task.id, choice));
        Some(found)
    }
}
