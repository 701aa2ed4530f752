//! DAG jobs in the tracker: a job's stages and the jobs it runs after, and the
//! `blocked` state of a task whose stage waits (see `gm_core::dag`).

use super::{TaskState, Tracker};
use common::messages::TaskFailure;
use common::{JobId, Micros, TaskId};

impl Tracker {
    /// A DAG job's stages and the jobs it runs after (call once its tasks are
    /// accepted): each task shows its stage, the job its stages.
    pub fn job_dag(&mut self, job: JobId, dag: &common::dag::JobDag) {
        let name = |s: u16| dag.stages[usize::from(s)].name.to_string();
        if let Some(entry) = self.jobs.get_mut(&job) {
            entry.stages = dag
                .stages
                .iter()
                .map(|s| {
                    (
                        s.name.to_string(),
                        s.after.iter().map(|&p| name(p)).collect(),
                    )
                })
                .collect();
            entry.after_jobs = dag.after_jobs.iter().map(|a| a.job.0).collect();
        }
        for (index, &stage) in dag.task_stage.iter().enumerate() {
            if let Some(t) = self.tasks.get_mut(&TaskId {
                job,
                index: index as u32,
            }) {
                t.stage = Some(name(stage));
            }
        }
    }

    /// A task of a DAG job waits for parent stage `waits_for` of its stage.
    pub fn blocked(&mut self, task: TaskId, stage: &str, waits_for: &str) {
        if let Some(s) = self.live(task) {
            s.state = TaskState::Blocked;
            s.reason = Some(format!(
                "stage `{stage}` waits for its parent stage `{waits_for}` to end"
            ));
            s.reason_detail = None;
        }
    }

    /// A blocked task's parent stages ended: it is queued.
    pub fn released(&mut self, task: TaskId) {
        if let Some(s) = self.live(task).filter(|s| s.state == TaskState::Blocked) {
            s.state = TaskState::Queued;
            s.reason = None;
        }
    }

    /// A task of a DAG job that will never run (a parent stage failed): failed,
    /// on no node.
    pub fn never_run(&mut self, task: TaskId, failure: TaskFailure, now: Micros) {
        let Some(s) = self.live(task) else {
            return;
        };
        s.state = TaskState::Failed;
        s.reason = None;
        s.node = None;
        s.ended_at_us = Some(now.0);
        s.failure = Some(failure);
        self.closed(task.job, now);
    }
}
