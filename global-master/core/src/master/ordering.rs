//! The job-ordering stage of a pass ([`crate::carbyne`]): at a replanning point the
//! waiting tasks leave their queues, the policy orders them, and they are queued
//! again in that order (each queue serves its tasks in that order; queues are still
//! taken in turn).

use super::GlobalMaster;
use crate::carbyne::{plan, JobWork, Runnable, StageWork};
use crate::queue::Pending;
use common::dag::JobDag;
use common::{JobId, Micros, Resources, TaskSpec};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

impl GlobalMaster {
    /// Orders the waiting tasks by the configured policy, if a replan is due.
    pub(super) fn reorder(&mut self, now: Micros) {
        if !self.ordering.replan_due(now) {
            return;
        }
        let waiting = self.backlog.take_all();
        if waiting.is_empty() {
            return;
        }
        let mut by_job: BTreeMap<JobId, Vec<Box<Pending>>> = BTreeMap::new();
        for p in waiting {
            by_job.entry(p.task.id.job).or_default().push(p);
        }
        let jobs: Vec<JobWork> = by_job
            .iter_mut()
            .map(|(job, tasks)| {
                tasks.sort_by_key(|p| p.task.id.index);
                let used = self.ordering.used(*job);
                match self.dags.stages_of(*job) {
                    Some((dag, open, held)) => dag_work(*job, used, tasks, dag, open, held),
                    None => JobWork::flat(
                        *job,
                        used,
                        tasks.iter().map(|p| runnable(&p.task, 0)).collect(),
                    ),
                }
            })
            .collect();
        let total = self
            .view
            .lms()
            .iter()
            .flatten()
            .fold(Resources::ZERO, |a, v| a.add(&v.total_capacity));
        let free = total.saturating_sub(&self.ordering.used_total());
        let order = plan(&jobs, &total, &free, self.ordering.config());
        let rank: HashMap<common::TaskId, usize> =
            order.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let mut all: Vec<Box<Pending>> = by_job.into_values().flatten().collect();
        all.sort_by_key(|p| rank.get(&p.task.id).copied().unwrap_or(usize::MAX));
        self.backlog.push_all_ready(all);
    }
}

fn runnable(task: &TaskSpec, stage: usize) -> Runnable {
    Runnable {
        task: task.id,
        resources: task.resources,
        duration: task.duration,
        stage,
    }
}

/// A DAG job's work: its stages in an order where parents come first, each with
/// the tasks not ended, those waiting in the queues (`tasks`), and a task's demand
/// and duration (the mean over the tasks the GM holds of that stage).
fn dag_work(
    job: JobId,
    used: Resources,
    tasks: &[Box<Pending>],
    dag: &JobDag,
    open: &[u32],
    held: &[Vec<TaskSpec>],
) -> JobWork {
    let order = dag
        .topological_order()
        .unwrap_or_else(|_| (0..dag.stages.len()).collect());
    let mut at = vec![0usize; dag.stages.len()];
    for (i, &s) in order.iter().enumerate() {
        at[s] = i;
    }
    let mut stages: Vec<StageWork> = order
        .iter()
        .map(|&s| StageWork {
            parents: dag.stages[s]
                .after
                .iter()
                .map(|&p| at[usize::from(p)])
                .collect(),
            remaining: open.get(s).copied().unwrap_or(0),
            ..StageWork::default()
        })
        .collect();
    let mut sums = vec![(Resources::ZERO, 0u64, 0u64); stages.len()];
    let mut add = |stage: usize, t: &TaskSpec| {
        let s = &mut sums[stage];
        s.0 = s.0.add(&t.resources);
        s.1 += t.duration.0;
        s.2 += 1;
    };
    let mut runnable_tasks = Vec::with_capacity(tasks.len());
    for p in tasks {
        let stage = dag.stage_of(p.task.id.index).map_or(0, |s| at[s]);
        add(stage, &p.task);
        stages[stage].runnable += 1;
        runnable_tasks.push(runnable(&p.task, stage));
    }
    for (s, held) in held.iter().enumerate() {
        held.iter().for_each(|t| add(at[s], t));
    }
    for (stage, (r, d, n)) in stages.iter_mut().zip(sums) {
        if let (Some(cpu), Some(mem), Some(d)) = (
            r.cpu_millis.checked_div(n),
            r.memory_mb.checked_div(n),
            d.checked_div(n),
        ) {
            stage.demand = Resources::new(cpu, mem);
            stage.duration = Micros(d);
        }
        stage.remaining = stage.remaining.max(stage.runnable);
    }
    JobWork {
        job,
        used,
        runnable: runnable_tasks,
        stages,
    }
}
