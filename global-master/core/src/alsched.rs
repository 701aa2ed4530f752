//! Soft constraints (alsched, issue 36): the jobs that carry a utility tree, the
//! greedy step that places one of their tasks, and what was chosen for each task.
//!
//! For a task of such a job, the branches of its tree ([`common::utility::Branch`])
//! are ranked by the relaxed utility they would add given where the job's tasks
//! already run; each, best first, goes through the soft stage
//! ([`crate::placement::soft`]): the task's hard constraints, then the branch's set,
//! then room, over the candidate partitions in Megha's order (internal, then
//! external). The first branch with a node wins. When none has one the task takes
//! the ordinary pipeline (hard constraints only) instead of waiting: a lower-utility
//! branch, recorded with why each better one was not taken. Jobs without a tree never
//! reach this part. A preference never reaches an LM: the task's constraints are sent
//! unchanged, so the LM verifies exactly what it verified before.
//!
//! Delay scheduling (Zaharia et al.; YARN's locality delay): a tree with
//! `relax_after_s` holds a task back instead of falling back, until the job has
//! waited that long since a task of it was first held back; then its tasks fall back
//! as above. The wait starts at the first hold and is not reset when a task of the
//! job launches (the SPARK-18886 trap: a job with short tasks would keep one node
//! forever); only a preferred launch while no task of the job is held ends it. Held
//! tasks go back to the ready queues at the next pass ([`SoftPlacement::begin_pass`]),
//! and the GM asks for a pass when the earliest wait is over. `relax_after_passes`
//! counts the wait in passes in which a task of the job was held (YARN's
//! node-locality delay); with both limits, the first reached ends the wait.

use crate::placement::select::RoundRobin;
use crate::placement::soft::{count_set, room_in_set, scan_set};
use crate::placement::{Effort, Found, Views};
use crate::queue::Pending;
use common::utility::Utility;
use common::{ConstraintSet, JobId, Micros, TaskId, TaskSpec};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

mod batch;

/// What was chosen for one task of a job with a utility tree.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftChoice {
    /// The branch taken (its path in the tree); `None`: no branch would gain or
    /// none had room, so the task went where its hard constraints alone put it.
    pub branch: Option<String>,
    /// The relaxed utility the branch was to add.
    pub gain: f64,
    /// The job's utility once this task landed.
    pub utility: f64,
    /// The better branches not taken, best first, and why.
    pub passed_over: Vec<PassedOver>,
}

/// A better branch not taken.
#[derive(Clone, Debug, PartialEq)]
pub struct PassedOver {
    pub branch: String,
    pub gain: f64,
    pub why: NotTaken,
}

/// Why a better branch was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotTaken {
    /// No node the GM knows is in the set and has the task's hard constraints.
    NoNodeInSet,
    /// `nodes` are, `free` of them with something free, none with room for the task.
    NoRoomInSet { nodes: u64, free: u64 },
    /// An `nCk` of the branch pays only once `need` more of the job's tasks are in
    /// its set, and the set has room for `room` of them: taking it would spend the
    /// set's room on a placement worth nothing (a job ends with its last task).
    CannotComplete { room: u64, need: u64 },
}

impl NotTaken {
    /// A short reason for APIs and reports.
    pub fn describe(&self) -> String {
        match self {
            NotTaken::NoNodeInSet => "no node in the set".into(),
            NotTaken::NoRoomInSet { nodes, free } => {
                format!("no room: {nodes} nodes in the set, {free} with something free, none large enough")
            }
            NotTaken::CannotComplete { room, need } => format!(
                "cannot complete: its nCk needs {need} more tasks in the set, which has room for {room}"
            ),
        }
    }
}

/// The variable an `exec` task of a job with a utility tree finds its branch in
/// ([`SoftPlacement::tell_branch`]).
pub const BRANCH_VARIABLE: &str = "MEGHA_BRANCH";

/// The `relax_at` of a wait counted in passes only.
pub const NO_RELAX_TIME: Micros = Micros(u64::MAX);

#[derive(Debug)]
struct JobUtility {
    utility: Arc<Utility>,
    /// Tasks of the job placed in each leaf's set.
    counts: Vec<u32>,
    /// Delay scheduling: since when the job waits (its first task held back).
    held_since: Option<Micros>,
    /// Passes in which a task of the job was held back since its wait began (the
    /// `relax_after_passes` count).
    held_passes: u32,
    /// Its tasks held back now.
    held: FxHashSet<TaskId>,
    /// Its tasks counted in `counts`, by index, with the attributes of their node
    /// (taken back if the LM refuses the launch).
    counted: FxHashMap<u32, ConstraintSet>,
}

/// What the soft step made of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftTry {
    /// A node of a branch that gains.
    Found(Found),
    /// No such branch has room: place by the hard constraints alone.
    Fallback,
    /// No such branch has room and the job waits for one until `relax_at`.
    Hold { relax_at: Micros },
}

/// The soft-constraint part of a GM.
#[derive(Debug, Default)]
pub struct SoftPlacement {
    jobs: FxHashMap<JobId, JobUtility>,
    /// Per job, per task index: what was chosen (kept until the job is forgotten).
    choices: FxHashMap<JobId, FxHashMap<u32, SoftChoice>>,
    rr: RoundRobin,
    /// The choice made for the task tried last, until it lands.
    open: Option<(TaskId, SoftChoice)>,
    /// The time of the pass under way.
    now: Micros,
    /// Tasks held back (delay scheduling), each with the time its wait ends.
    held: Vec<(Micros, Box<Pending>)>,
    /// The node the last batch solve gave each task ([`SoftPlacement::plan_batch`]).
    planned: FxHashMap<TaskId, Found>,
}

impl SoftPlacement {
    /// The job's tasks are placed by `utility` from now on.
    pub fn set(&mut self, job: JobId, utility: Arc<Utility>) {
        let counts = vec![0; utility.leaves.len()];
        let job_utility = JobUtility {
            utility,
            counts,
            held_since: None,
            held_passes: 0,
            held: FxHashSet::default(),
            counted: FxHashMap::default(),
        };
        self.jobs.insert(job, job_utility);
    }

    /// True when the job carries a utility tree.
    #[inline]
    pub fn has(&self, job: JobId) -> bool {
        !self.jobs.is_empty() && self.jobs.contains_key(&job)
    }

    /// The job's utility so far (`None` without a tree).
    pub fn job_utility(&self, job: JobId) -> Option<f64> {
        self.jobs.get(&job).map(|j| j.utility.value(&j.counts))
    }

    /// The job is forgotten: its tree and its tasks' choices go.
    pub fn forget_job(&mut self, job: JobId) {
        self.jobs.remove(&job);
        self.choices.remove(&job);
    }

    /// A restarted GM takes `task` up as running on a node with attributes `node`
    /// (an LM still holds it): it counts in its job's utility again, as it did
    /// before the restart. No choice is recorded: the branch it took is not known.
    pub fn running(&mut self, task: TaskId, node: ConstraintSet) {
        if let Some(job) = self.jobs.get_mut(&task.job) {
            if let Some(before) = job.counted.insert(task.index, node) {
                job.utility.uncount(before, &mut job.counts);
            }
            job.utility.count(node, &mut job.counts);
        }
    }

    /// The LM refused the launch of `task`: it no longer counts in its job's
    /// utility, and its choice goes (it is placed again).
    pub fn refused(&mut self, task: TaskId) {
        if let Some(job) = self.jobs.get_mut(&task.job) {
            if let Some(node) = job.counted.remove(&task.index) {
                job.utility.uncount(node, &mut job.counts);
            }
        }
        if let Some(choices) = self.choices.get_mut(&task.job) {
            choices.remove(&task.index);
        }
    }

    /// Keeps the trees and choices of the jobs `keep` names only (a driver that
    /// forgets ended jobs calls it; a cost per job with a tree, not per task).
    pub fn retain_jobs(&mut self, keep: impl Fn(JobId) -> bool) {
        self.jobs.retain(|job, _| keep(*job));
        self.choices.retain(|job, _| keep(*job));
    }

    /// Jobs with a tree or a recorded choice.
    pub fn jobs_held(&self) -> usize {
        self.jobs.len().max(self.choices.len())
    }

    /// What was chosen for a task (its last placement).
    pub fn choice(&self, task: TaskId) -> Option<&SoftChoice> {
        self.choices.get(&task.job)?.get(&task.index)
    }

    /// A pass begins at `now`: the held tasks go back to the ready queues (each is
    /// tried once per pass).
    pub fn begin_pass(&mut self, now: Micros) -> Vec<Box<Pending>> {
        self.now = now;
        if self.held.is_empty() {
            return Vec::new();
        }
        // One more pass of waiting for each job with a task held in the last one.
        let mut waited: Vec<JobId> = self.held.iter().map(|(_, p)| p.task.id.job).collect();
        waited.sort_unstable();
        waited.dedup();
        for job in waited {
            if let Some(j) = self.jobs.get_mut(&job) {
                j.held_passes = j.held_passes.saturating_add(1);
            }
        }
        self.held.drain(..).map(|(_, p)| p).collect()
    }

    /// Holds a task back (after [`SoftTry::Hold`]) until the next pass.
    pub fn hold(&mut self, relax_at: Micros, pending: Box<Pending>) {
        self.held.push((relax_at, pending));
    }

    /// True when a task is held back (its timer is then worth asking about).
    #[inline]
    pub fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// The tasks held back now.
    pub fn held(&self) -> impl Iterator<Item = &Pending> {
        self.held.iter().map(|(_, p)| p.as_ref())
    }

    /// When the earliest wait of a held task is over (a pass is due then); a wait
    /// counted in passes only has no time ([`NO_RELAX_TIME`]).
    pub fn next_relax(&self) -> Option<Micros> {
        self.held
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| *t != NO_RELAX_TIME)
            .min()
    }

    /// True when the wait of some held task is over at `now`.
    pub fn relax_due(&self, now: Micros) -> bool {
        self.next_relax().is_some_and(|t| t <= now)
    }

    /// The greedy step for one task of a job with a tree: the node of the best
    /// branch that has one; or hold the task back (delay scheduling); or fall back
    /// (the caller then places the task by its hard constraints alone and calls
    /// [`SoftPlacement::landed`] all the same).
    pub fn place(&mut self, views: &Views, task: &TaskSpec, effort: &mut Effort) -> SoftTry {
        if !self.planned.is_empty() {
            if let Some(found) = self.take_planned(views, task) {
                return SoftTry::Found(found);
            }
        }
        let now = self.now;
        let SoftPlacement { jobs, rr, open, .. } = self;
        let Some(job) = jobs.get_mut(&task.id.job) else {
            return SoftTry::Fallback;
        };
        let mut passed_over = Vec::new();
        let lms = views.lms.len();
        for (b, gain) in job.utility.ranked(&job.counts) {
            let branch = &job.utility.branches[b];
            // An nCk pays nothing until its k-th task: the branch is taken only when
            // the set has room for every task it still needs.
            let need = branch
                .leaves
                .iter()
                .filter_map(|&i| {
                    let leaf = &job.utility.leaves[i];
                    let have = job.counts.get(i).copied().unwrap_or(0);
                    (!leaf.linear && have < leaf.k).then(|| u64::from(leaf.k - have))
                })
                .max()
                .unwrap_or(0);
            if need > 1 {
                let room = room_in_set(views, task.constraints, &branch.set, &task.resources, need);
                if room < need {
                    passed_over.push(PassedOver {
                        branch: branch.label.clone(),
                        gain,
                        why: NotTaken::CannotComplete { room, need },
                    });
                    continue;
                }
            }
            let mut try_one = |c| {
                scan_set(
                    views,
                    c,
                    task.constraints,
                    &branch.set,
                    &task.resources,
                    effort,
                )
            };
            let found = rr
                .internal(lms, views.me)
                .find_map(&mut try_one)
                .or_else(|| rr.external(lms, views.gms, views.me).find_map(&mut try_one));
            if let Some(found) = found {
                let choice = SoftChoice {
                    branch: Some(branch.label.clone()),
                    gain,
                    utility: 0.0,
                    passed_over,
                };
                *open = Some((task.id, choice));
                return SoftTry::Found(found);
            }
            let why = match count_set(views, task.constraints, &branch.set) {
                (0, _) => NotTaken::NoNodeInSet,
                (nodes, free) => NotTaken::NoRoomInSet { nodes, free },
            };
            passed_over.push(PassedOver {
                branch: branch.label.clone(),
                gain,
                why,
            });
        }
        let (time, passes) = (job.utility.relax_after_us, job.utility.relax_after_passes);
        if (time.is_some() || passes.is_some()) && !passed_over.is_empty() {
            let since = *job.held_since.get_or_insert(now);
            let relax_at = time.map_or(NO_RELAX_TIME, |wait| since + Micros(wait));
            // The wait ends at whichever limit comes first.
            let waiting = now < relax_at && passes.is_none_or(|p| job.held_passes < p);
            if waiting {
                job.held.insert(task.id);
                *open = None;
                return SoftTry::Hold { relax_at };
            }
        }
        let choice = SoftChoice {
            branch: None,
            gain: 0.0,
            utility: 0.0,
            passed_over,
        };
        *open = Some((task.id, choice));
        SoftTry::Fallback
    }

    /// The soft step for a QUEUEABLE task (Mercury's top-k placement, where a task
    /// queues at its node instead of needing room): the first branch that gains and
    /// whose set `in_set` finds a node in; `None` (the choice records every branch
    /// passed over) sends the task to the top-k over every node. A QUEUEABLE task
    /// never waits for its preference (`relax_after` does not apply).
    pub fn choose_queueable<T>(
        &mut self,
        task: &TaskSpec,
        mut in_set: impl FnMut(&common::utility::BitExpr) -> Option<T>,
    ) -> Option<T> {
        let SoftPlacement { jobs, open, .. } = self;
        let job = jobs.get(&task.id.job)?;
        let mut passed_over = Vec::new();
        for (b, gain) in job.utility.ranked(&job.counts) {
            let branch = &job.utility.branches[b];
            if let Some(found) = in_set(&branch.set) {
                let choice = SoftChoice {
                    branch: Some(branch.label.clone()),
                    gain,
                    utility: 0.0,
                    passed_over,
                };
                *open = Some((task.id, choice));
                return Some(found);
            }
            passed_over.push(PassedOver {
                branch: branch.label.clone(),
                gain,
                why: NotTaken::NoNodeInSet,
            });
        }
        let choice = SoftChoice {
            branch: None,
            gain: 0.0,
            utility: 0.0,
            passed_over,
        };
        *open = Some((task.id, choice));
        None
    }

    /// A task of a job with a tree, about to be dispatched after the soft step, is
    /// told the branch it got: an `exec` task in [`BRANCH_VARIABLE`] in its
    /// environment (the branch's tree path, or `none`), replacing any value its spec
    /// gave; a burn by placement in its `preferred` flag (a branch: it burns its
    /// `duration`; none: its `slow_duration`), set again at each placement. Other
    /// executors run nothing that could read it.
    pub fn tell_branch(&self, task: &mut TaskSpec) {
        let Some((id, choice)) = &self.open else {
            return;
        };
        if *id != task.id {
            return;
        }
        match &mut task.executor {
            Some(common::Executor::Exec(cmd)) => {
                let branch = choice.branch.clone().unwrap_or_else(|| "none".to_owned());
                Arc::make_mut(cmd)
                    .env
                    .insert(BRANCH_VARIABLE.to_owned(), branch);
            }
            Some(common::Executor::BurnByPlacement(burn)) => {
                burn.preferred = choice.branch.is_some();
            }
            _ => {}
        }
    }

    /// The task just tried was dispatched to a node with attributes `node`: the
    /// job's counts and the task's choice are booked.
    pub fn landed(&mut self, task: TaskId, node: ConstraintSet) {
        let Some((id, mut choice)) = self.open.take() else {
            return;
        };
        if id != task {
            return;
        }
        if let Some(job) = self.jobs.get_mut(&task.job) {
            if let Some(before) = job.counted.insert(task.index, node) {
                // Placed again (a retry): its earlier run no longer counts.
                job.utility.uncount(before, &mut job.counts);
            }
            job.utility.count(node, &mut job.counts);
            choice.utility = job.utility.value(&job.counts);
            job.held.remove(&task);
            // The wait ends only with a preferred launch while no task of the job
            // is held back, never with any launch (SPARK-18886).
            if choice.branch.is_some() && job.held.is_empty() {
                job.held_since = None;
                job.held_passes = 0;
            }
        }
        self.choices
            .entry(task.job)
            .or_default()
            .insert(task.index, choice);
    }
}
