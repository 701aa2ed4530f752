//! The designated GM's path for long-running applications (MEDEA section 5.4, the
//! "two-scheduler" design).
//!
//! The designated GM accepts LRA submissions and holds them until the next scheduling
//! interval. Once per interval (time is an input: [`LraPath::pass`] does
//! nothing before the interval has elapsed) it builds a [`ClusterState`] from its LM
//! views (`cluster.rs`), runs the configured [`Placer`](lra_placer::Placer) over every waiting
//! LRA at once, checks the answer against capacities and turns each placed LRA into
//! launch requests for the chosen nodes. Those go out in the same [`LaunchBatch`]es,
//! with the same in-flight deductions, as every other task of this GM, and the LMs
//! validate them like any other launch.
//!
//! The LM's answer decides:
//! - a launched container is recorded; its tags count for later placements until it
//!   ends (the GM learns ends from the `Finished`/`Preempted` task events the LMs
//!   publish: [`LraPath::container_ended`]);
//! - a refused container (the LM's state changed since the placement) makes the LRA a
//!   *conflict*: once every container of the round is answered, the refused ones are
//!   resubmitted to the next interval, and the launched ones stay and count as
//!   deployed containers of the same application (their tags and resources are in the
//!   next problem). We keep them rather than kill them: they are valid where they
//!   are (the LM accepted them), killing would waste the work the LM just did and
//!   could conflict again the same way, and the placer still sees the whole
//!   application through its `appID` tag, so its constraints are honoured jointly.
//! - an LRA the placer cannot place stays waiting with the placer's reason.
//!
//! The pass itself (problem, placer, launch requests) is in `pass.rs`; the GM
//! drives this path through `master/lra.rs`.
//!
//! [`LaunchBatch`]: common::messages::LaunchBatch

mod cluster;
pub mod pass;
pub mod types;

#[cfg(test)]
mod tests;

pub use types::{
    ContainerState, ContainerStatus, LraPassOutput, LraPathConfig, LraRefused, LraStatus,
    LraSubmission, LraWait,
};

use crate::outputs::GmStats;
use common::messages::LaunchOutcome;
use common::{JobId, LmId, Micros, Resources, TaskId, TaskKind, TaskSpec};
use lra_placer::model::ModelError;
use lra_placer::{
    ClusterState, ConstraintError, ConstraintManager, LraId, NodeGroupSpec, NodeState,
    PlacementConstraint, Problem,
};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
struct LraRecord {
    submission: LraSubmission,
    submitted_at: Micros,
    containers: Vec<ContainerState>,
    /// `Some` while the LRA waits in the queue for an interval.
    wait: Option<LraWait>,
    /// Refusals in the current launch round (the first reason is kept).
    round_refused: Option<(u32, LraWait)>,
    placements: u32,
    resubmissions: u32,
    /// Its constraints are in the constraint manager (it runs, nothing pending).
    registered: bool,
}

/// The LRA state of a GM (empty on every GM but the designated one).
#[derive(Debug)]
pub struct LraPath {
    config: LraPathConfig,
    /// The node groups constraints may name (`node`, `rack`, the operator's), built
    /// once from the configuration to check submissions.
    group_names: ClusterState,
    manager: ConstraintManager,
    records: BTreeMap<LraId, LraRecord>,
    /// LRAs waiting for an interval, in arrival (or resubmission) order.
    queue: Vec<LraId>,
    next_pass: Micros,
}

impl LraPath {
    pub fn new(config: LraPathConfig) -> Self {
        LraPath {
            group_names: lra_groups(&config.groups),
            config,
            manager: ConstraintManager::new(),
            records: BTreeMap::new(),
            queue: Vec::new(),
            next_pass: Micros::ZERO,
        }
    }

    /// The status of an LRA this GM holds.
    pub fn status(&self, id: LraId) -> Option<LraStatus> {
        let r = self.records.get(&id)?;
        let any = |f: fn(&ContainerState) -> bool| r.containers.iter().any(f);
        let state = if r.wait.is_some() {
            "pending"
        } else if any(|c| matches!(c, ContainerState::Launching { .. })) {
            "launching"
        } else if any(|c| matches!(c, ContainerState::Running { .. })) {
            "running"
        } else {
            "finished"
        };
        Some(LraStatus {
            lra: id.0,
            state,
            reason: r.wait.as_ref().map(ToString::to_string),
            containers: r
                .containers
                .iter()
                .enumerate()
                .map(|(j, c)| ContainerStatus {
                    task: container_task(id, j).to_string(),
                    state: *c,
                })
                .collect(),
            placements: r.placements,
            resubmissions: r.resubmissions,
        })
    }

    /// Accepts an LRA for the next interval. Validates it (containers, tags,
    /// constraints naming `node` or `rack`) and refuses it whole when it is invalid.
    pub fn submit(&mut self, now: Micros, submission: LraSubmission) -> Result<(), LraRefused> {
        let id = submission.request.id;
        if self.records.contains_key(&id) {
            return Err(LraRefused::Duplicate(id));
        }
        let containers = submission.request.containers.len();
        if submission.durations.len() != containers {
            return Err(LraRefused::Durations {
                given: submission.durations.len(),
                containers,
            });
        }
        Problem::new(
            &self.group_names,
            std::slice::from_ref(&submission.request),
            &self.manager,
        )?;
        self.records.insert(
            id,
            LraRecord {
                submission,
                submitted_at: now,
                containers: vec![ContainerState::Pending; containers],
                wait: Some(LraWait::NextInterval),
                round_refused: None,
                placements: 0,
                resubmissions: 0,
                registered: false,
            },
        );
        self.queue.push(id);
        Ok(())
    }

    /// Adds an operator constraint (MEDEA section 3); it applies from the next pass.
    pub fn add_operator_constraint(
        &mut self,
        constraint: PlacementConstraint,
    ) -> Result<(), ConstraintError> {
        self.manager
            .add_operator(constraint, self.group_names.groups())
    }

    /// LRAs waiting for an interval.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Containers of LRAs that wait for a placement.
    pub fn pending_containers(&self) -> Vec<TaskId> {
        self.records
            .iter()
            .filter(|(_, r)| r.wait.is_some())
            .flat_map(|(id, r)| {
                r.containers
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c == ContainerState::Pending)
                    .map(|(j, _)| container_task(*id, j))
            })
            .collect()
    }

    /// The LRA scheduling interval.
    pub fn interval(&self) -> Micros {
        self.config.interval
    }

    /// When the next LRA pass may run.
    pub fn next_pass(&self) -> Micros {
        self.next_pass
    }

    /// True for a task that is a container of an LRA this GM placed.
    pub fn is_container(&self, task: &TaskSpec) -> bool {
        task.kind == TaskKind::LongRunning && self.records.contains_key(&LraId(task.id.job.0))
    }

    /// Applies the LM's answer for one container (with `None`: the batch carrying it
    /// never arrived).
    pub fn answer(
        &mut self,
        task: TaskId,
        lm: LmId,
        outcome: Option<&LaunchOutcome>,
        stats: &mut GmStats,
    ) {
        let id = LraId(task.job.0);
        let j = task.index as usize;
        let Some(r) = self.records.get_mut(&id) else {
            return;
        };
        let Some(state) = r.containers.get_mut(j) else {
            return;
        };
        let ContainerState::Launching { lm: sent_to, node } = *state else {
            // Already ended (its end event overtook the answer) or never sent.
            return;
        };
        let refused = match outcome {
            Some(LaunchOutcome::Launched { .. }) => {
                *state = ContainerState::Running { lm: sent_to, node };
                stats.lra_containers_launched += 1;
                None
            }
            Some(LaunchOutcome::Rejected(reason)) => Some(LraWait::Conflict {
                refused: 1,
                reason: reason.clone(),
            }),
            None => Some(LraWait::LmUnreachable { lm, containers: 1 }),
        };
        if let Some(why) = refused {
            *state = ContainerState::Pending;
            stats.lra_conflicts += 1;
            r.round_refused = Some(match r.round_refused.take() {
                None => (1, why),
                Some((n, first)) => (n + 1, first),
            });
        }
        if r.containers
            .iter()
            .any(|c| matches!(c, ContainerState::Launching { .. }))
        {
            return;
        }
        // The round is answered.
        match r.round_refused.take() {
            Some((n, first)) => {
                let why = match first {
                    LraWait::Conflict { reason, .. } => LraWait::Conflict { refused: n, reason },
                    LraWait::LmUnreachable { lm, .. } => {
                        LraWait::LmUnreachable { lm, containers: n }
                    }
                    other => other,
                };
                tracing::info!(lra = %id, refused = n, reason = %why, "LRA conflict: refused containers resubmitted to the next interval");
                r.wait = Some(why);
                r.resubmissions += 1;
                stats.lra_resubmissions += 1;
                self.queue.push(id);
            }
            None => {
                if !r.registered {
                    let constraints = r.submission.request.constraints.clone();
                    // Validated at submission against the same group names.
                    if self
                        .manager
                        .add_application(id, constraints, self.group_names.groups())
                        .is_ok()
                    {
                        r.registered = true;
                    }
                }
            }
        }
    }

    /// A container of an LRA ended (finished, preempted or killed): its resources are
    /// the LM's again and its tags stop counting. Answers false for a task that is no
    /// running LRA container of this GM. An LRA whose containers have all ended leaves
    /// the constraint manager.
    pub fn container_ended(&mut self, task: TaskId, stats: &mut GmStats) -> bool {
        let id = LraId(task.job.0);
        let Some(r) = self.records.get_mut(&id) else {
            return false;
        };
        let Some(state) = r.containers.get_mut(task.index as usize) else {
            return false;
        };
        let (ContainerState::Running { lm, node } | ContainerState::Launching { lm, node }) =
            *state
        else {
            return false;
        };
        *state = ContainerState::Ended { lm, node };
        stats.lra_containers_ended += 1;
        let done = r.wait.is_none()
            && r.containers
                .iter()
                .all(|c| matches!(c, ContainerState::Ended { .. }));
        if done {
            self.manager.remove_application(id);
            r.registered = false;
        }
        true
    }
}

/// The task id of container `j` of `lra`: the LRA id is the job id.
pub fn container_task(lra: LraId, j: usize) -> TaskId {
    TaskId {
        job: JobId(lra.0),
        index: j as u32,
    }
}

/// The groups every cluster has (`node`, `rack`) plus the operator's, to validate
/// submissions before the view is complete (`extra` was checked with
/// [`group_names`] when the configuration was read).
pub fn lra_groups(extra: &[NodeGroupSpec]) -> ClusterState {
    group_names(extra).unwrap_or_else(|_| ClusterState::uniform(1, 1, Resources::ZERO))
}

/// A cluster just large enough for the operator's `groups` (empty nodes), to check
/// them and to resolve group names: an error names the group and the problem.
pub fn group_names(groups: &[NodeGroupSpec]) -> Result<ClusterState, ModelError> {
    let nodes = groups
        .iter()
        .flat_map(|g| g.sets.iter().flatten())
        .max()
        .map_or(1, |&n| n as usize + 1);
    let empty = NodeState {
        capacity: Resources::ZERO,
        free: Resources::ZERO,
        rack: 0,
        containers: Vec::new(),
    };
    ClusterState::new(vec![empty; nodes], groups)
}
