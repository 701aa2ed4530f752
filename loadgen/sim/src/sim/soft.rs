//! Soft constraints in the simulator (alsched, issue 36): per job, the utility tree
//! its GM places it by (policy `soft`), and its placement-dependent run time: a task
//! runs its `duration` on a node of the job's preferred set and `slow_duration`
//! anywhere else (GPU jobs, rack-local jobs), whatever placed it, so that the value
//! of a preference can be measured against ignoring it or making it hard.

use super::ledger::TaskRecord;
use super::outcome::Branches;
use common::utility::{BitExpr, Utility};
use common::{ConstraintSet, JobId, Micros, TaskId, TaskSpec};
use gm_core::GlobalMaster;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// One job's preference.
#[derive(Clone, Debug)]
pub struct SoftJob {
    /// The tree its GM places it by; `None`: the GM is not told (policies `none` and
    /// `hard`), only the run time depends on the placement.
    pub utility: Option<Arc<Utility>>,
    /// The nodes where its tasks run at their `duration`.
    pub preferred: BitExpr,
    /// Per task (by index): its run time outside `preferred`.
    pub slow_duration: Vec<Micros>,
}

/// Per job id (the trace job's dense number, [`super::workload::Job::id`]).
pub type SoftJobs = FxHashMap<u64, SoftJob>;

/// The branch each task of a job with a tree got at its last placement, from the GM
/// that placed it (`none`: no branch had room, it ran by its hard constraints);
/// empty when no GM holds a tree.
pub fn branches_taken(gms: &[GlobalMaster], records: &[TaskRecord]) -> Branches {
    let mut taken = Branches::default();
    if gms.iter().all(|gm| gm.soft().jobs_held() == 0) {
        return taken;
    }
    let none: Arc<str> = Arc::from("none");
    for r in records {
        let id = TaskId {
            job: JobId(r.job),
            index: r.index,
        };
        let Some(gm) = r.gm.and_then(|g| gms.get(g.index())) else {
            continue;
        };
        if let Some(choice) = gm.soft().choice(id) {
            let branch = choice.branch.as_deref().map_or(none.clone(), Arc::from);
            taken.insert(id, branch);
        }
    }
    taken
}

impl SoftJob {
    /// True when a node with attributes `node` is in the preferred set.
    pub fn preferred_on(&self, node: ConstraintSet) -> bool {
        self.preferred.holds(node)
    }

    /// How long `task` runs on a node with attributes `node`.
    pub fn run_time(&self, task: &TaskSpec, node: ConstraintSet) -> Micros {
        if self.preferred_on(node) {
            task.duration
        } else {
            self.slow_duration
                .get(task.id.index as usize)
                .copied()
                .unwrap_or(task.duration)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Resources, TaskId};

    #[test]
    fn a_task_runs_slow_outside_its_preferred_set() {
        let job = SoftJob {
            utility: None,
            preferred: BitExpr::Bit(3),
            slow_duration: vec![Micros(50)],
        };
        let task = TaskSpec::short(TaskId::new(0, 0), Resources::cores(1, 1), Micros(10));
        let on = |ids: &[u64]| ConstraintSet::from_ids(ids.iter().copied()).unwrap();
        assert_eq!(job.run_time(&task, on(&[3, 4])), Micros(10));
        assert_eq!(job.run_time(&task, on(&[4])), Micros(50));
        let other = TaskSpec::short(TaskId::new(0, 1), Resources::cores(1, 1), Micros(10));
        assert_eq!(
            job.run_time(&other, on(&[])),
            Micros(10),
            "no slow run time"
        );
    }
}
