//! DAG jobs as a stage of the GM core: a job submitted with a DAG queues only the
//! tasks of its stages without parents; every end for good of one of its tasks
//! (finished, failed past its retries, unplaceable) may release a stage to the
//! queues or end one without running (see [`crate::dag`]).

use super::step::{GmOutput, ResumedDag};
use super::GlobalMaster;
use crate::dag::DagProgress;
use common::dag::JobDag;
use common::{JobId, Micros, TaskId, TaskSpec};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

impl GlobalMaster {
    /// Accepts a job's tasks: with a DAG, those of stages with parents are held
    /// (listed in `out.blocked`), the others queued.
    pub(super) fn submit_job(
        &mut self,
        now: Micros,
        tasks: Vec<TaskSpec>,
        dag: Option<Arc<JobDag>>,
        out: &mut GmOutput,
    ) {
        let tasks = match (dag, tasks.first()) {
            (Some(dag), Some(first)) => {
                let job = first.id.job;
                self.dags.submitted(job, dag, tasks, &mut out.blocked)
            }
            _ => tasks,
        };
        for task in tasks {
            self.submit(now, task);
        }
        out.wants_pass = true;
    }

    /// `task` ended for good (`failed`: it failed or can never be placed): its DAG
    /// job, if it has one, moves on. Released tasks are queued (`out.released`),
    /// tasks that will never run end here (`out.never_run`).
    pub(super) fn dag_task_ended(
        &mut self,
        now: Micros,
        task: TaskId,
        failed: bool,
        out: &mut GmOutput,
    ) {
        if self.dags.is_empty() {
            return;
        }
        let progress = self.dags.ended(task, failed);
        self.dag_moved_on(now, progress, out);
    }

    /// Released tasks are queued (`out.released`), tasks that will never run end
    /// here (`out.never_run`), blocked ones listed again (`out.blocked`).
    fn dag_moved_on(&mut self, now: Micros, progress: DagProgress, out: &mut GmOutput) {
        if progress.is_empty() {
            return;
        }
        for never in &progress.never_run {
            self.lifecycle.end_for_good(never.task);
            self.stats.tasks_failed += 1;
        }
        out.wants_pass |= !progress.released.is_empty();
        out.released.extend(progress.released.iter().map(|t| t.id));
        for task in progress.released {
            self.submit(now, task);
        }
        out.never_run.extend(progress.never_run);
        out.blocked.extend(progress.blocked);
    }

    /// Job `job` ended (`ok`: finished): the DAG jobs that run after it go on.
    pub(super) fn dependency_ended(
        &mut self,
        now: Micros,
        job: JobId,
        ok: bool,
        out: &mut GmOutput,
    ) {
        let progress = self.dags.job_ended(job, ok);
        self.dag_moved_on(now, progress, out);
    }

    /// A restarted GM's tasks to run again: those of its DAG jobs resume their DAGs
    /// (held while a parent stage has not ended; never run when one failed); the
    /// rest, and the DAG tasks free to go, are returned to be queued.
    pub(super) fn resume_dags(
        &mut self,
        tasks: Vec<TaskSpec>,
        dags: Vec<ResumedDag>,
        out: &mut GmOutput,
    ) -> Vec<TaskSpec> {
        if dags.is_empty() && self.dags.is_empty() {
            return tasks;
        }
        let mut of_dag: HashMap<JobId, Vec<TaskSpec>> =
            dags.iter().map(|d| (d.job, Vec::new())).collect();
        let mut tasks: Vec<TaskSpec> = tasks
            .into_iter()
            .filter_map(|t| match of_dag.get_mut(&t.id.job) {
                Some(held) => {
                    held.push(t);
                    None
                }
                // A DAG job resumed earlier (these tasks were in doubt).
                None => self.dags.admit(t),
            })
            .collect();
        for resumed in dags {
            let of_job = of_dag.remove(&resumed.job).unwrap_or_default();
            let mut progress = DagProgress::default();
            let now = self.dags.resumed(
                resumed.job,
                resumed.dag,
                of_job,
                &resumed.ended,
                &mut progress,
            );
            tasks.extend(now);
            for never in &progress.never_run {
                self.lifecycle.end_for_good(never.task);
                self.stats.tasks_failed += 1;
            }
            out.never_run.extend(progress.never_run);
            out.blocked.extend(progress.blocked);
        }
        tasks
    }
}
