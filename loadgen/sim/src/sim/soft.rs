//! Soft constraints in the simulator (alsched, issue 36): per job, the utility tree
//! its GM places it by (policy `soft`), and its placement-dependent run time: a task
//! runs its `duration` on a node of the job's preferred set and `slow_duration`
//! anywhere else (GPU jobs, rack-local jobs), whatever placed it, so that the value
//! of a preference can be measured against ignoring it or making it hard.

use common::utility::{BitExpr, Utility};
use common::{ConstraintSet, Micros, TaskSpec};
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
