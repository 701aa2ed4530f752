//! A job's DAG (Carbyne, and "run this after that"): the job's tasks grouped into
//! stages, and edges between stages. A stage's tasks are queued only when every
//! parent stage ended; a stage ends when each of its tasks ended for good (finished,
//! or failed past its job's retries). A stage *failed* when one of its tasks failed
//! for good, or when it never ran because a parent failed.
//!
//! What a stage does when a parent failed is its own choice ([`OnParentFailure`]):
//! by default it fails without running (each task ends failed with the reason
//! "parent stage X failed", and so do its descendants that do not continue); with
//! `continue` it runs once every parent ended, whatever their outcome.
//!
//! A job may also run after other jobs ([`AfterJob`]: once they finished, ended,
//! or failed): its stages without parents wait for them, and when one ends in a way
//! that does not let it run, the whole job ends failed without running.
//!
//! Stages are numbered by their position; the public API names them and turns the
//! names into these numbers. [`JobDag::check`] refuses what cannot run: an edge to
//! a stage that does not exist, a self edge, a cycle, a stage with no task.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Stages of one job at most (the wire carries stage numbers as `u16`).
pub const MAX_STAGES: usize = 1024;

/// What a stage does when one of its parents failed.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnParentFailure {
    /// It fails without running, with the reason "parent stage X failed".
    #[default]
    Fail,
    /// It runs once every parent ended, whatever their outcome.
    Continue,
}

/// When a job that runs after another may start (Slurm's `afterok`, `afterany`,
/// `afternotok`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterWhen {
    /// Once the other job finished (every task finished).
    #[default]
    Ok,
    /// Once the other job ended, whatever its outcome.
    Any,
    /// Once the other job ended failed or cancelled.
    Failed,
}

impl AfterWhen {
    /// Whether an end of the other job (`ok`: it finished) lets this job run.
    pub fn allows(self, ok: bool) -> bool {
        match self {
            AfterWhen::Ok => ok,
            AfterWhen::Any => true,
            AfterWhen::Failed => !ok,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AfterWhen::Ok => "ok",
            AfterWhen::Any => "any",
            AfterWhen::Failed => "failed",
        }
    }
}

/// Another job this job runs after.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfterJob {
    pub job: crate::JobId,
    pub when: AfterWhen,
}

/// One stage of a job's DAG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    pub name: Arc<str>,
    /// Parent stages, by number: this stage's tasks wait until each ended.
    pub after: Vec<u16>,
    #[serde(default)]
    pub on_parent_failure: OnParentFailure,
}

/// The DAG of one job: its stages, and the stage of each of its tasks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDag {
    pub stages: Vec<Stage>,
    /// The stage of each task, by the task's index in its job
    /// ([`crate::TaskId::index`]).
    pub task_stage: Vec<u16>,
    /// Jobs this job runs after: its stages without parents wait for them.
    #[serde(default)]
    pub after_jobs: Vec<AfterJob>,
}

/// Why a DAG cannot run. `stage` is a stage number (the API names the stage).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    #[error("a job has at most {MAX_STAGES} stages, not {0}")]
    TooManyStages(usize),
    #[error("stage {stage} names stage {parent} as a parent, and there is no such stage")]
    UnknownParent { stage: usize, parent: usize },
    #[error("stage {stage} names itself as a parent")]
    SelfEdge { stage: usize },
    #[error("stage {stage} names stage {parent} as a parent twice")]
    DuplicateEdge { stage: usize, parent: usize },
    #[error("the stages form a cycle through stage {stage}")]
    Cycle { stage: usize },
    #[error("stage {stage} has no task")]
    EmptyStage { stage: usize },
    #[error("task {task} is in stage {stage}, and there is no such stage")]
    UnknownStage { task: usize, stage: usize },
    #[error("the DAG names the stages of {named} tasks, and the job has {tasks}")]
    TaskCount { named: usize, tasks: usize },
}

impl JobDag {
    /// Checks that the DAG can run for a job of `tasks` tasks: every edge names
    /// another existing stage once, no cycle, every stage holds a task, every task
    /// is in a stage.
    pub fn check(&self, tasks: usize) -> Result<(), DagError> {
        let n = self.stages.len();
        if n > MAX_STAGES {
            return Err(DagError::TooManyStages(n));
        }
        if self.task_stage.len() != tasks {
            return Err(DagError::TaskCount {
                named: self.task_stage.len(),
                tasks,
            });
        }
        for (stage, s) in self.stages.iter().enumerate() {
            for (k, &parent) in s.after.iter().enumerate() {
                let parent = usize::from(parent);
                if parent >= n {
                    return Err(DagError::UnknownParent { stage, parent });
                }
                if parent == stage {
                    return Err(DagError::SelfEdge { stage });
                }
                if s.after[..k].contains(&(parent as u16)) {
                    return Err(DagError::DuplicateEdge { stage, parent });
                }
            }
        }
        let mut count = vec![0usize; n];
        for (task, &stage) in self.task_stage.iter().enumerate() {
            let stage = usize::from(stage);
            let Some(c) = count.get_mut(stage) else {
                return Err(DagError::UnknownStage { task, stage });
            };
            *c += 1;
        }
        if let Some(stage) = count.iter().position(|&c| c == 0) {
            return Err(DagError::EmptyStage { stage });
        }
        match self.topological_order() {
            Ok(_) => Ok(()),
            Err(stage) => Err(DagError::Cycle { stage }),
        }
    }

    /// The stages, parents before children (Kahn's algorithm, lowest number first
    /// among the ready ones); `Err(stage)`: a stage on a cycle.
    pub fn topological_order(&self) -> Result<Vec<usize>, usize> {
        let n = self.stages.len();
        let mut waiting: Vec<usize> = self.stages.iter().map(|s| s.after.len()).collect();
        let children = self.children();
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&s| waiting[s] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(stage) = ready.pop_first() {
            order.push(stage);
            for &child in &children[stage] {
                waiting[child] -= 1;
                if waiting[child] == 0 {
                    ready.insert(child);
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err((0..n).find(|&s| waiting[s] > 0).unwrap_or(0))
        }
    }

    /// Per stage, its children (by number, in order).
    pub fn children(&self) -> Vec<Vec<usize>> {
        let mut children = vec![Vec::new(); self.stages.len()];
        for (stage, s) in self.stages.iter().enumerate() {
            for &parent in &s.after {
                if let Some(c) = children.get_mut(usize::from(parent)) {
                    c.push(stage);
                }
            }
        }
        children
    }

    /// The stage of task `index`, if the DAG names one.
    pub fn stage_of(&self, index: u32) -> Option<usize> {
        self.task_stage.get(index as usize).map(|&s| usize::from(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, after: &[u16]) -> Stage {
        Stage {
            name: name.into(),
            after: after.to_vec(),
            on_parent_failure: OnParentFailure::Fail,
        }
    }

    /// a -> b, a -> c, (b, c) -> d, one task each.
    fn diamond() -> JobDag {
        JobDag {
            stages: vec![
                stage("a", &[]),
                stage("b", &[0]),
                stage("c", &[0]),
                stage("d", &[1, 2]),
            ],
            task_stage: vec![0, 1, 2, 3],
            after_jobs: Vec::new(),
        }
    }

    #[test]
    fn a_diamond_is_accepted_and_ordered() {
        let dag = diamond();
        assert_eq!(dag.check(4), Ok(()));
        assert_eq!(dag.topological_order(), Ok(vec![0, 1, 2, 3]));
        assert_eq!(dag.children(), vec![vec![1, 2], vec![3], vec![3], vec![]]);
    }

    #[test]
    fn what_cannot_run_is_refused() {
        let mut dag = diamond();
        dag.stages[0].after = vec![3];
        assert_eq!(dag.check(4), Err(DagError::Cycle { stage: 0 }));

        let mut dag = diamond();
        dag.stages[1].after = vec![1];
        assert_eq!(dag.check(4), Err(DagError::SelfEdge { stage: 1 }));

        let mut dag = diamond();
        dag.stages[3].after = vec![1, 1];
        assert_eq!(
            dag.check(4),
            Err(DagError::DuplicateEdge {
                stage: 3,
                parent: 1
            })
        );

        let mut dag = diamond();
        dag.stages[2].after = vec![9];
        assert_eq!(
            dag.check(4),
            Err(DagError::UnknownParent {
                stage: 2,
                parent: 9
            })
        );

        let mut dag = diamond();
        dag.task_stage = vec![0, 1, 2, 2];
        assert_eq!(dag.check(4), Err(DagError::EmptyStage { stage: 3 }));

        let mut dag = diamond();
        dag.task_stage[1] = 7;
        assert_eq!(
            dag.check(4),
            Err(DagError::UnknownStage { task: 1, stage: 7 })
        );

        assert_eq!(
            diamond().check(5),
            Err(DagError::TaskCount { named: 4, tasks: 5 })
        );
    }

    #[test]
    fn a_dag_round_trips_through_the_wire_codec() {
        let dag = diamond();
        let bytes = crate::codec::encode(&crate::ClusterName::default(), &dag).unwrap();
        assert_eq!(
            crate::codec::decode::<JobDag>(&crate::ClusterName::default(), &bytes).unwrap(),
            dag
        );
    }
}
