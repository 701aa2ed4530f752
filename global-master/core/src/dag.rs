//! DAG jobs for the GM that owns them (see [`common::dag`]): the tasks of a stage
//! wait here, out of every queue, until each parent stage ended; then they are
//! released to their queues, or, when a parent failed and the stage does not
//! continue, they end failed without running ("parent stage X failed").
//!
//! The part counts, per stage, the tasks not yet ended for good; the GM tells it of
//! every end for good of a DAG job's task (finished, failed past its retries,
//! unplaceable). Jobs without a DAG are not kept here and cost one lookup per end.
//! A cancelled job leaves at once: its held tasks end cancelled.

use common::dag::{AfterJob, JobDag, OnParentFailure};
use common::{JobId, TaskId, TaskSpec};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StageState {
    /// Its tasks wait for a parent.
    Blocked,
    /// Its tasks are (or were) in the queues.
    Released,
    /// Every task ended for good; `failed`: one of them failed.
    Ended { failed: bool },
}

#[derive(Debug)]
struct DagJob {
    dag: Arc<JobDag>,
    children: Vec<Vec<usize>>,
    state: Vec<StageState>,
    /// Per stage: its tasks not yet ended for good.
    open: Vec<u32>,
    /// Per stage: one of its tasks failed for good so far.
    failed: Vec<bool>,
    /// Per blocked stage: its tasks, held until released.
    held: Vec<Vec<TaskSpec>>,
    /// Per task (by index): it ended for good (a repeated end counts once).
    ended: Vec<bool>,
    /// Stages not ended yet (the job leaves when none is left).
    stages_open: usize,
    /// Jobs it runs after, and how each ended (`None`: not yet; `Some(ok)`).
    deps: Vec<(AfterJob, Option<bool>)>,
}

/// A DAG job's stages as they stand ([`Dags::stages_of`]): its DAG, per stage the
/// tasks not ended yet, per stage the tasks held behind a parent.
pub type StagesOf<'a> = (&'a JobDag, &'a [u32], &'a [Vec<TaskSpec>]);

/// A task that waits for a parent stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub task: TaskId,
    /// The stage the task is in.
    pub stage: Arc<str>,
    /// The first parent stage (in the order the job names them) not ended yet.
    pub waits_for: Arc<str>,
}

/// A task that will never run: a parent stage of its stage failed, or a job it
/// runs after ended in a way that does not let it run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeverRun {
    pub task: TaskId,
    pub stage: Arc<str>,
    /// Why, in words: "parent stage `b` failed", or "job 7 ended failed; this job
    /// runs after it when ok".
    pub cause: Arc<str>,
}

/// What an end for good changed: tasks released to their queues, tasks that will
/// never run, tasks still blocked that now wait for another parent.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DagProgress {
    pub released: Vec<TaskSpec>,
    pub never_run: Vec<NeverRun>,
    pub blocked: Vec<Blocked>,
}

impl DagProgress {
    pub fn is_empty(&self) -> bool {
        self.released.is_empty() && self.never_run.is_empty() && self.blocked.is_empty()
    }

    pub fn append(&mut self, mut other: DagProgress) {
        self.released.append(&mut other.released);
        self.never_run.append(&mut other.never_run);
        self.blocked.append(&mut other.blocked);
    }
}

/// The DAG jobs of one GM that still have a stage to run.
#[derive(Debug, Default)]
pub struct Dags {
    jobs: HashMap<JobId, DagJob>,
    /// Per job others run after: the jobs waiting for its end.
    dependents: HashMap<JobId, Vec<JobId>>,
    /// Jobs accepted with a DAG, ever (a counter).
    pub accepted: u64,
    /// Tasks released from a stage whose parents ended.
    pub released: u64,
    /// Tasks ended without running: a parent stage failed.
    pub never_run: u64,
    /// Tasks held now (see [`Dags::held`]).
    held_tasks: usize,
}

impl Dags {
    /// DAG jobs with a stage still to end.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Tasks held because a parent stage (or a job they run after) has not ended
    /// (a count kept up to date: the GM's admission adds it to its queues').
    pub fn held(&self) -> usize {
        self.held_tasks
    }

    /// Adds `after - before` to the count of held tasks.
    fn held_moved(&mut self, before: usize, after: usize) {
        self.held_tasks = (self.held_tasks + after).saturating_sub(before);
    }

    /// A job accepted with `dag` (checked: [`JobDag::check`]): returns the tasks to
    /// queue now (those of stages without parents) in submission order; the others
    /// are held, and listed in `blocked`.
    pub fn submitted(
        &mut self,
        job: JobId,
        dag: Arc<JobDag>,
        tasks: Vec<TaskSpec>,
        blocked: &mut Vec<Blocked>,
    ) -> Vec<TaskSpec> {
        let n = dag.stages.len();
        let mut entry = DagJob {
            children: dag.children(),
            state: dag
                .stages
                .iter()
                .map(|s| match s.after.is_empty() && dag.after_jobs.is_empty() {
                    true => StageState::Released,
                    false => StageState::Blocked,
                })
                .collect(),
            open: dag.task_stage.iter().fold(vec![0; n], |mut open, &s| {
                open[usize::from(s)] += 1;
                open
            }),
            failed: vec![false; n],
            held: vec![Vec::new(); n],
            ended: vec![false; dag.task_stage.len()],
            stages_open: n,
            deps: dag.after_jobs.iter().map(|a| (*a, None)).collect(),
            dag,
        };
        for after in &entry.dag.after_jobs {
            let waiting = self.dependents.entry(after.job).or_default();
            if !waiting.contains(&job) {
                waiting.push(job);
            }
        }
        let mut now = Vec::new();
        for task in tasks {
            let stage = entry.dag.stage_of(task.id.index).unwrap_or(0);
            match entry.state[stage] {
                StageState::Blocked => {
                    blocked.push(entry.blocked(task.id, stage));
                    entry.held[stage].push(task);
                }
                _ => now.push(task),
            }
        }
        self.accepted += 1;
        self.held_moved(0, entry.held_len());
        self.jobs.insert(job, entry);
        now
    }

    /// A DAG job a restarted GM read back from its journal: `tasks` are those to
    /// run (not ended, held by no LM), `ended` the tasks that ended for good in an
    /// earlier life (index, failed). The earlier ends are replayed, parents first,
    /// so the job resumes where it was: returns the tasks to queue now; the others
    /// are held (listed in `blocked`), or never run (`progress.never_run`: a
    /// parent failed, the earlier life had not said so yet).
    pub fn resumed(
        &mut self,
        job: JobId,
        dag: Arc<JobDag>,
        tasks: Vec<TaskSpec>,
        ended: &[(u32, bool)],
        progress: &mut DagProgress,
    ) -> Vec<TaskSpec> {
        if self.jobs.contains_key(&job) {
            // Resumed in parts (tasks in doubt came later): the DAG is here.
            return tasks.into_iter().filter_map(|t| self.admit(t)).collect();
        }
        let order = dag.topological_order().unwrap_or_default();
        let mut rank = vec![0; dag.stages.len()];
        for (k, &stage) in order.iter().enumerate() {
            rank[stage] = k;
        }
        let mut ended = ended.to_vec();
        ended.sort_by_key(|&(index, _)| dag.stage_of(index).map(|s| rank[s]));
        let mut now = self.submitted(job, dag, tasks, &mut Vec::new());
        for (index, failed) in ended {
            progress.append(self.ended(TaskId { job, index }, failed));
        }
        now.append(&mut progress.released);
        progress.blocked.clear();
        if let Some(entry) = self.jobs.get(&job) {
            for (stage, held) in entry.held.iter().enumerate() {
                for task in held {
                    progress.blocked.push(entry.blocked(task.id, stage));
                }
            }
        }
        now
    }

    /// A task ended for good (`failed`: it failed, or can never be placed). Stages
    /// whose parents all ended now are released or, when a parent failed and they
    /// do not continue, end with every task never run (and so on down the DAG).
    /// An end of a task of no DAG job, or a repeat, changes nothing.
    pub fn ended(&mut self, task: TaskId, failed: bool) -> DagProgress {
        let mut progress = DagProgress::default();
        let Some(job) = self.jobs.get_mut(&task.job) else {
            return progress;
        };
        let Some(stage) = job.dag.stage_of(task.index) else {
            return progress;
        };
        let seen = &mut job.ended[task.index as usize];
        if std::mem::replace(seen, true)
            || matches!(job.state[stage], StageState::Ended { .. })
            || job.open[stage] == 0
        {
            return progress;
        }
        let before = job.held_len();
        job.open[stage] -= 1;
        job.failed[stage] |= failed;
        match job.state[stage] {
            StageState::Released if job.open[stage] == 0 => job.stage_ended(stage, &mut progress),
            // A run of a blocked stage ended (a restarted GM's LM held it, its
            // parents' ends not yet heard again): it is no longer held; the
            // stage ends once released if nothing else of it is open.
            StageState::Blocked => job.held[stage].retain(|t| t.id != task),
            _ => {}
        }
        let (after, done) = (job.held_len(), job.stages_open == 0);
        self.held_moved(before, after);
        self.released += progress.released.len() as u64;
        self.never_run += progress.never_run.len() as u64;
        if done {
            self.jobs.remove(&task.job);
        }
        progress
    }

    /// Jobs waiting for other jobs to end (the driver reports those ends:
    /// [`Dags::job_ended`]).
    pub fn awaited_jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.dependents.keys().copied()
    }

    /// True if a job runs after `job` and has not heard of its end.
    pub fn awaits(&self, job: JobId) -> bool {
        self.dependents.contains_key(&job)
    }

    /// Job `other` ended (`ok`: every task finished). The jobs that run after it
    /// go on: once every job they run after ended as they asked, their stages
    /// without parents are released; as soon as one ended otherwise, every task of
    /// theirs ends without running. A repeat changes nothing.
    pub fn job_ended(&mut self, other: JobId, ok: bool) -> DagProgress {
        let mut progress = DagProgress::default();
        for job in self.dependents.remove(&other).unwrap_or_default() {
            let Some(entry) = self.jobs.get_mut(&job) else {
                continue;
            };
            let before = entry.held_len();
            entry.dependency_ended(other, ok, &mut progress);
            let (after, done) = (entry.held_len(), entry.stages_open == 0);
            self.held_moved(before, after);
            if done {
                self.jobs.remove(&job);
            }
        }
        self.released += progress.released.len() as u64;
        self.never_run += progress.never_run.len() as u64;
        progress
    }

    /// The job was cancelled: it leaves, and its held tasks are returned (they end
    /// cancelled without running).
    pub fn cancelled(&mut self, job: JobId) -> Vec<TaskId> {
        let Some(entry) = self.jobs.remove(&job) else {
            return Vec::new();
        };
        self.held_moved(entry.held_len(), 0);
        entry.held.into_iter().flatten().map(|t| t.id).collect()
    }

    /// A task of a DAG job this GM knows, to be queued (a restarted GM's task
    /// resumed late, after its job's DAG): held if its stage waits for a parent
    /// (`None`), else returned.
    pub fn admit(&mut self, task: TaskSpec) -> Option<TaskSpec> {
        let Some(job) = self.jobs.get_mut(&task.id.job) else {
            return Some(task);
        };
        match job.dag.stage_of(task.id.index) {
            Some(stage) if job.state[stage] == StageState::Blocked => {
                if !job.held[stage].iter().any(|t| t.id == task.id) {
                    job.held[stage].push(task);
                    self.held_tasks += 1;
                }
                None
            }
            _ => Some(task),
        }
    }

    /// A DAG job's stages as they stand: its DAG, per stage the tasks not ended
    /// yet, and per stage the tasks held behind a parent (for the job ordering's
    /// planner, [`crate::carbyne`]).
    pub fn stages_of(&self, job: JobId) -> Option<StagesOf<'_>> {
        let j = self.jobs.get(&job)?;
        Some((&j.dag, &j.open, &j.held))
    }

    /// True if the task waits for a parent stage.
    pub fn is_held(&self, task: TaskId) -> bool {
        self.jobs.get(&task.job).is_some_and(|j| {
            j.dag
                .stage_of(task.index)
                .is_some_and(|s| j.state[s] == StageState::Blocked)
        })
    }
}

impl DagJob {
    /// Tasks it holds.
    fn held_len(&self) -> usize {
        self.held.iter().map(Vec::len).sum()
    }

    fn name(&self, stage: usize) -> Arc<str> {
        self.dag.stages[stage].name.clone()
    }

    /// `task` of blocked `stage`, and the first parent it waits for (a stage
    /// without parents waits for the first job it runs after not ended yet).
    fn blocked(&self, task: TaskId, stage: usize) -> Blocked {
        let parents = &self.dag.stages[stage].after;
        let waits_for = match parents.is_empty() {
            true => self
                .deps
                .iter()
                .find(|(_, ended)| ended.is_none())
                .map_or_else(
                    || self.name(stage),
                    |(a, _)| format!("job {}", a.job.0).into(),
                ),
            false => {
                let parent = parents
                    .iter()
                    .map(|&p| usize::from(p))
                    .find(|&p| !matches!(self.state[p], StageState::Ended { .. }))
                    .unwrap_or(stage);
                self.name(parent)
            }
        };
        Blocked {
            task,
            stage: self.name(stage),
            waits_for,
        }
    }

    /// Job `other`, which this job runs after, ended (`ok`: it finished).
    fn dependency_ended(&mut self, other: JobId, ok: bool, progress: &mut DagProgress) {
        let mut refused = None;
        for (after, ended) in &mut self.deps {
            if after.job == other && ended.is_none() {
                *ended = Some(ok);
                if !after.when.allows(ok) {
                    refused = Some(*after);
                }
            }
        }
        let roots: Vec<usize> = (0..self.dag.stages.len())
            .filter(|&s| self.dag.stages[s].after.is_empty())
            .filter(|&s| self.state[s] == StageState::Blocked)
            .collect();
        if let Some(after) = refused {
            let cause: Arc<str> = format!(
                "job {} ended {}; this job runs after it when {}",
                other.0,
                if ok {
                    "finished"
                } else {
                    "failed or cancelled"
                },
                after.when.label()
            )
            .into();
            for stage in roots {
                self.never_runs(stage, cause.clone(), progress);
            }
        } else if self.deps.iter().all(|(_, ended)| ended.is_some()) {
            for stage in roots {
                self.state[stage] = StageState::Released;
                progress.released.append(&mut self.held[stage]);
            }
        } else {
            for &stage in &roots {
                for task in &self.held[stage] {
                    progress.blocked.push(self.blocked(task.id, stage));
                }
            }
        }
    }

    /// `stage` ended: its children whose parents all ended go on.
    fn stage_ended(&mut self, stage: usize, progress: &mut DagProgress) {
        self.state[stage] = StageState::Ended {
            failed: self.failed[stage],
        };
        self.stages_open -= 1;
        for child in self.children[stage].clone() {
            if self.state[child] != StageState::Blocked {
                continue;
            }
            let parents = &self.dag.stages[child].after;
            let mut failed_parent = None;
            let mut all_ended = true;
            for &p in parents {
                match self.state[usize::from(p)] {
                    StageState::Ended { failed: true } => {
                        failed_parent = failed_parent.or(Some(usize::from(p)))
                    }
                    StageState::Ended { failed: false } => {}
                    _ => all_ended = false,
                }
            }
            let fail = self.dag.stages[child].on_parent_failure == OnParentFailure::Fail;
            match (failed_parent, fail) {
                // It fails now, whatever its other parents do.
                (Some(parent), true) => {
                    let cause = format!("parent stage `{}` failed", self.name(parent));
                    self.never_runs(child, cause.into(), progress)
                }
                _ if all_ended => {
                    self.state[child] = StageState::Released;
                    progress.released.append(&mut self.held[child]);
                    if self.open[child] == 0 {
                        self.stage_ended(child, progress);
                    }
                }
                _ => {
                    // Still blocked: it may now wait for another parent.
                    for task in &self.held[child] {
                        progress.blocked.push(self.blocked(task.id, child));
                    }
                }
            }
        }
    }

    /// `stage` will never run (`cause` says why). Its tasks end failed, and the
    /// stage ends failed (its children learn of it).
    fn never_runs(&mut self, stage: usize, cause: Arc<str>, progress: &mut DagProgress) {
        let name = self.name(stage);
        for task in std::mem::take(&mut self.held[stage]) {
            progress.never_run.push(NeverRun {
                task: task.id,
                stage: name.clone(),
                cause: cause.clone(),
            });
        }
        self.open[stage] = 0;
        self.failed[stage] = true;
        self.state[stage] = StageState::Released;
        self.stage_ended(stage, progress);
    }
}

#[cfg(test)]
mod tests;
