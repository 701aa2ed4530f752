//! What the planner knows of a job: what it runs now, its runnable tasks (waiting in
//! the GM's queues) and, per stage, the tasks not yet ended with their demand and
//! duration (a job without a DAG is one stage).

use common::{JobId, Micros, Resources, TaskId};

/// A task the GM could start now.
#[derive(Clone, Debug, PartialEq)]
pub struct Runnable {
    pub task: TaskId,
    pub resources: Resources,
    pub duration: Micros,
    /// Its stage (an index into [`JobWork::stages`]).
    pub stage: usize,
}

/// One stage of a job, as far as it is not done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageWork {
    /// Parent stages (indices into [`JobWork::stages`]).
    pub parents: Vec<usize>,
    /// Tasks not ended yet: running, runnable, or held behind a parent.
    pub remaining: u32,
    /// Of those, the tasks in the GM's queues (runnable now).
    pub runnable: u32,
    /// A task's demand and duration (the stage's tasks are alike, as Carbyne
    /// assumes; the mean over the tasks the GM holds).
    pub demand: Resources,
    pub duration: Micros,
}

/// A job as the planner sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobWork {
    pub job: JobId,
    /// What its running tasks hold.
    pub used: Resources,
    /// Its runnable tasks, in the order the job would start them.
    pub runnable: Vec<Runnable>,
    pub stages: Vec<StageWork>,
}

impl JobWork {
    /// A job of independent tasks (one stage, every task runnable).
    pub fn flat(job: JobId, used: Resources, runnable: Vec<Runnable>) -> Self {
        let n = runnable.len() as u32;
        let (demand, duration) = runnable
            .first()
            .map_or((Resources::ZERO, Micros::ZERO), |r| {
                (r.resources, r.duration)
            });
        let runnable = runnable
            .into_iter()
            .map(|r| Runnable { stage: 0, ..r })
            .collect();
        JobWork {
            job,
            used,
            runnable,
            stages: vec![StageWork {
                parents: Vec::new(),
                remaining: n,
                runnable: n,
                demand,
                duration,
            }],
        }
    }

    /// Remaining work (SRTF's measure): per stage, tasks left x duration x the
    /// dominant share of one task's demand, in share-seconds.
    pub fn remaining_work(&self, total: &Resources) -> f64 {
        self.stages
            .iter()
            .map(|s| {
                f64::from(s.remaining) * s.duration.0 as f64 / 1e6 * s.demand.dominant_share(total)
            })
            .sum()
    }

    /// The remaining critical path with unlimited resources (SJF's measure): the
    /// longest chain of stage durations over stages with tasks left.
    pub fn critical_path(&self) -> Micros {
        let len: Vec<Micros> = self
            .stages
            .iter()
            .map(|s| match s.remaining {
                0 => Micros::ZERO,
                _ => s.duration,
            })
            .collect();
        let (head, tail) = self.head_tail(&len);
        head.iter()
            .zip(&tail)
            .map(|(h, t)| Micros(h.0 + t.0))
            .max()
            .unwrap_or(Micros::ZERO)
    }

    /// For stage lengths `len`: per stage, the longest chain of its ancestors'
    /// lengths (head) and the longest chain from it to a sink, itself included
    /// (tail). Stages are in an order where parents come first (as [`common::dag`]
    /// checks when a job is accepted); a parent index that is not is ignored.
    pub fn head_tail(&self, len: &[Micros]) -> (Vec<Micros>, Vec<Micros>) {
        let n = self.stages.len();
        let mut head = vec![Micros::ZERO; n];
        for s in 0..n {
            for &p in &self.stages[s].parents {
                if p < s {
                    head[s] = head[s].max(Micros(head[p].0 + len[p].0));
                }
            }
        }
        let mut tail: Vec<Micros> = len.to_vec();
        for s in (0..n).rev() {
            for &p in &self.stages[s].parents {
                if p < s {
                    tail[p] = tail[p].max(Micros(len[p].0 + tail[s].0));
                }
            }
        }
        (head, tail)
    }
}
