//! Turns trace jobs into task specifications: default resources for tasks that carry
//! none, and placement constraints synthesised from the Megha model (seeded).

use crate::trace::TraceJob;
use common::constraint_model::synthesize_task_constraints;
use common::dag::{JobDag, OnParentFailure, Stage};
use common::rng::{seeded, streams};
use common::{ConstraintSet, JobId, Micros, QueueId, Resources, TaskId, TaskSpec};
use std::sync::Arc;

/// Where task constraints come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConstraintMode {
    /// One synthesised constraint set per job, shared by its tasks.
    PerJob,
    /// One synthesised constraint set per task.
    PerTask,
    /// No constraints (unless the trace carries its own).
    None,
}

#[derive(Clone, Debug)]
pub struct WorkloadOptions {
    /// Resources of a task whose trace record has none.
    pub default_task: Resources,
    pub constraints: ConstraintMode,
    pub seed: u64,
}

/// A job ready for a scheduler.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: u64,
    pub arrival: Micros,
    pub tasks: Vec<TaskSpec>,
    /// Its DAG, when its tasks are in stages (see [`common::dag`]).
    pub dag: Option<Arc<JobDag>>,
}

impl Job {
    /// The constraint set shared by every task, if they all share one.
    pub fn common_constraints(&self) -> Option<ConstraintSet> {
        let first = self.tasks.first()?.constraints;
        self.tasks
            .iter()
            .all(|t| t.constraints == first)
            .then_some(first)
    }
}

/// Builds the jobs, renumbered densely in trace order and sorted by arrival (stable).
pub fn build(trace: &[TraceJob], options: &WorkloadOptions) -> Vec<Job> {
    let mut rng = seeded(options.seed, streams::TASK_CONSTRAINTS);
    let mut jobs: Vec<Job> = trace
        .iter()
        .enumerate()
        .map(|(j, tj)| {
            let job_constraints = match options.constraints {
                ConstraintMode::PerJob => synthesize_task_constraints(&mut rng),
                _ => ConstraintSet::EMPTY,
            };
            let tasks = tj
                .tasks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let constraints = match (t.constraints, options.constraints) {
                        (Some(own), _) => own,
                        (None, ConstraintMode::PerJob) => job_constraints,
                        (None, ConstraintMode::PerTask) => synthesize_task_constraints(&mut rng),
                        (None, ConstraintMode::None) => ConstraintSet::EMPTY,
                    };
                    TaskSpec {
                        id: TaskId {
                            job: JobId(j as u64),
                            index: i as u32,
                        },
                        queue: QueueId(0),
                        kind: common::TaskKind::Short,
                        resources: t.resources.unwrap_or(options.default_task),
                        constraints,
                        duration: t.duration,
                        tags: Vec::new(),
                        executor: None,
                        attempt: 1,
                        preemptions: 0,
                        priority: 0,
                    }
                })
                .collect();
            Job {
                id: j as u64,
                arrival: tj.arrival,
                tasks,
                dag: job_dag(tj),
            }
        })
        .collect();
    jobs.sort_by_key(|j| j.arrival);
    jobs
}

/// The DAG of a trace job whose tasks are in stages (`None` when it has no stages,
/// or when a task is in none of them, or the stages cannot run: a cycle, an edge to
/// an unknown stage; the readers report those).
pub fn job_dag(tj: &TraceJob) -> Option<Arc<JobDag>> {
    if tj.stages.is_empty() {
        return None;
    }
    let number = |id: u32| tj.stages.iter().position(|s| s.id == id);
    let stages = tj
        .stages
        .iter()
        .map(|s| {
            let after = s
                .depends_on
                .iter()
                .map(|&p| number(p).map(|n| n as u16))
                .collect::<Option<Vec<u16>>>()?;
            Some(Stage {
                name: s.name.as_str().into(),
                after,
                on_parent_failure: OnParentFailure::Fail,
            })
        })
        .collect::<Option<Vec<Stage>>>()?;
    let task_stage = tj
        .tasks
        .iter()
        .map(|t| number(t.stage?).map(|n| n as u16))
        .collect::<Option<Vec<u16>>>()?;
    let dag = JobDag {
        stages,
        task_stage,
        after_jobs: Vec::new(),
    };
    dag.check(tj.tasks.len()).ok()?;
    Some(Arc::new(dag))
}

/// True for a job made of `long_running` tasks only.
pub(crate) fn is_lra(job: &Job) -> bool {
    !job.tasks.is_empty()
        && job
            .tasks
            .iter()
            .all(|t| t.kind == common::TaskKind::LongRunning)
}
