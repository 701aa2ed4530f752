//! The GM's part for job ordering: what each job runs now (from its dispatches and
//! run ends) and when to replan: at a job's arrival or end always, at a task end at
//! most once per [`OrderConfig::replan_every`].

use super::config::{JobOrder, OrderConfig};
use common::{JobId, Micros, Resources, TaskId};
use rustc_hash::FxHashMap as HashMap;

#[derive(Debug, Default)]
pub struct JobOrdering {
    config: OrderConfig,
    /// Runs sent out and not ended, with what each holds.
    running: HashMap<TaskId, Resources>,
    /// Per job: the sum of its runs.
    used: HashMap<JobId, Resources>,
    /// A job arrived or ended since the last plan.
    jobs_changed: bool,
    /// A task ended since the last plan.
    tasks_ended: bool,
    last_plan: Option<Micros>,
    /// Plans made (each is one Carbyne decision over every waiting task).
    pub plans: u64,
}

impl JobOrdering {
    pub fn new(config: OrderConfig) -> Self {
        JobOrdering {
            config,
            ..JobOrdering::default()
        }
    }

    pub fn config(&self) -> &OrderConfig {
        &self.config
    }

    /// Whether the GM orders its tasks at all (not [`JobOrder::Fifo`]).
    pub fn active(&self) -> bool {
        self.config.order != JobOrder::Fifo
    }

    /// Tasks arrived (a new job or released stages).
    pub fn arrived(&mut self) {
        self.jobs_changed = true;
    }

    /// A run of `task` holding `resources` went out.
    pub fn dispatched(&mut self, task: TaskId, resources: Resources) {
        if !self.active() {
            return;
        }
        if let Some(before) = self.running.insert(task, resources) {
            self.release(task.job, &before);
        }
        let used = self.used.entry(task.job).or_default();
        *used = used.add(&resources);
    }

    /// A run of `task` ended (finished, failed, lost, killed).
    pub fn run_ended(&mut self, task: TaskId) {
        if let Some(r) = self.running.remove(&task) {
            self.release(task.job, &r);
            self.tasks_ended = true;
        }
    }

    fn release(&mut self, job: JobId, r: &Resources) {
        if let Some(used) = self.used.get_mut(&job) {
            *used = used.saturating_sub(r);
            if used.is_zero() {
                self.used.remove(&job);
                self.jobs_changed = true;
            }
        }
    }

    /// What `job` runs now.
    pub fn used(&self, job: JobId) -> Resources {
        self.used.get(&job).copied().unwrap_or_default()
    }

    /// What every job runs now.
    pub fn used_total(&self) -> Resources {
        self.used.values().fold(Resources::ZERO, |a, r| a.add(r))
    }

    /// Whether a pass at `now` should replan first; if so, the plan is counted.
    pub fn replan_due(&mut self, now: Micros) -> bool {
        if !self.active() {
            return false;
        }
        let interval_over = self
            .last_plan
            .is_none_or(|t| now.0 >= t.0 + self.config.replan_every.0);
        let due = self.jobs_changed || (self.tasks_ended && interval_over);
        if due {
            self.jobs_changed = false;
            self.tasks_ended = false;
            self.last_plan = Some(now);
            self.plans += 1;
        }
        due
    }
}
