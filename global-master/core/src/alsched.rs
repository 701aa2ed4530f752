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

use crate::placement::select::RoundRobin;
use crate::placement::soft::{count_set, scan_set};
use crate::placement::{Effort, Found, Views};
use common::utility::Utility;
use common::{ConstraintSet, JobId, TaskId, TaskSpec};
use rustc_hash::FxHashMap;
use std::sync::Arc;

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
}

impl NotTaken {
    /// A short reason for APIs and reports.
    pub fn describe(&self) -> String {
        match self {
            NotTaken::NoNodeInSet => "no node in the set".into(),
            NotTaken::NoRoomInSet { nodes, free } => {
                format!("no room: {nodes} nodes in the set, {free} with something free, none large enough")
            }
        }
    }
}

#[derive(Debug)]
struct JobUtility {
    utility: Arc<Utility>,
    /// Tasks of the job placed in each leaf's set.
    counts: Vec<u32>,
}

/// The soft-constraint part of a GM.
#[derive(Debug, Default)]
pub struct SoftPlacement {
    jobs: FxHashMap<JobId, JobUtility>,
    choices: FxHashMap<TaskId, SoftChoice>,
    rr: RoundRobin,
    /// The choice made for the task tried last, until it lands.
    open: Option<(TaskId, SoftChoice)>,
}

impl SoftPlacement {
    /// The job's tasks are placed by `utility` from now on.
    pub fn set(&mut self, job: JobId, utility: Arc<Utility>) {
        let counts = vec![0; utility.leaves.len()];
        self.jobs.insert(job, JobUtility { utility, counts });
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

    /// The job ended: its tree and its tasks' choices go.
    pub fn forget_job(&mut self, job: JobId) {
        self.jobs.remove(&job);
        self.choices.retain(|t, _| t.job != job);
    }

    /// What was chosen for a task (its last placement).
    pub fn choice(&self, task: TaskId) -> Option<&SoftChoice> {
        self.choices.get(&task)
    }

    /// The greedy step for one task of a job with a tree: the node of the best
    /// branch that has one, or `None` (the caller then places the task by its hard
    /// constraints alone and calls [`SoftPlacement::landed`] all the same).
    pub fn place(&mut self, views: &Views, task: &TaskSpec, effort: &mut Effort) -> Option<Found> {
        let SoftPlacement { jobs, rr, open, .. } = self;
        let job = jobs.get(&task.id.job)?;
        let mut passed_over = Vec::new();
        let lms = views.lms.len();
        for (b, gain) in job.utility.ranked(&job.counts) {
            let branch = &job.utility.branches[b];
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
                return Some(found);
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
        let choice = SoftChoice {
            branch: None,
            gain: 0.0,
            utility: 0.0,
            passed_over,
        };
        *open = Some((task.id, choice));
        None
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
            job.utility.count(node, &mut job.counts);
            choice.utility = job.utility.value(&job.counts);
        }
        self.choices.insert(task, choice);
    }
}
