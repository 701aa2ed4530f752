//! The worker's core: the state machine of one node. Pure: no I/O, no clocks;
//! `cargo tree -p worker-core -e normal` shows no runtime crate
//! (`scripts/check-core-purity.sh`, run by CI).
//!
//! The worker state machine ([`Worker::step`] is its one entry point, in `step.rs`). Tasks start when their resources are free; tasks that
//! may queue (QUEUEABLE work) wait in a queue (FIFO, or by job submission order), all
//! others are never queued: they start at once, killing running QUEUEABLE work if the
//! node is short only because of it (Mercury), and are refused otherwise rather than
//! over-committing the node.
//!
//! How a task runs is its executor ([`common::Executor`], the worker's default when
//! the task names none). A synthetic task ends when the core's own timer says its
//! duration is over. Any other executor runs outside the core: the core orders its
//! launch and its stop ([`ExecOrder`], in [`WorkerOutput::exec`]) and learns of its end
//! from [`WorkerInput::Exited`].
//!
//! Layout: `io.rs` what the core takes and gives ([`WorkerInput`], [`WorkerOutput`],
//! [`ExecOrder`]); `step.rs` the one entry point; [`orders`] which start orders may run
//! (dispatch numbers, LM lives, the floor of a registration); here the [`Worker`] and
//! its state.

mod io;
pub mod orders;
mod step;
pub use io::{ExecOrder, WorkerInput, WorkerOutput};

/// When a worker its LM has not confirmed for `lease` fences itself
/// ([`Worker::fence`]): at 3/5 of it, so that its tasks are stopped (within 1/5 more)
/// before the LM may declare it lost at the whole lease.
pub fn fence_after(lease: Micros) -> Micros {
    Micros(lease.0 * 3 / 5)
}

use common::messages::{StartTask, TaskFailure, WorkerReport};
use common::{Executor, Micros, NodeId, Resources, TaskId, TaskKind, TaskSpec};
use std::collections::VecDeque;

/// The report of a start the worker refused (fenced, out of room, or its executor
/// could not start the task): the run failed to start, for `reason`.
pub fn refused_start(
    node: NodeId,
    task: TaskId,
    attempt: u32,
    at: Micros,
    reason: &str,
) -> WorkerReport {
    WorkerReport::Failed {
        used: None,
        node,
        task,
        attempt,
        at,
        failure: TaskFailure::StartFailed {
            reason: format!("refused by the worker: {reason}"),
        },
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningTask {
    pub task: TaskId,
    /// Which run of the task ([`TaskSpec::attempt`]).
    pub attempt: u32,
    pub resources: Resources,
    /// When a synthetic task ends; `None` when its executor tells (burn, exec).
    pub finish_at: Option<Micros>,
    pub kind: TaskKind,
    pub started_at: Micros,
}

/// The order in which queued QUEUEABLE work starts (Mercury 4.3, queue reordering).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueOrder {
    /// First come, first served.
    #[default]
    Fifo,
    /// Tasks of earlier-submitted jobs first, by [`common::JobId::submission_key`]
    /// (the submission time below the GM id in the services, the rank in the
    /// simulator); ties keep arrival order.
    JobSubmission,
}

impl std::str::FromStr for QueueOrder {
    type Err = String;

    /// `fifo` or `job` (job submission order).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "fifo" => Ok(QueueOrder::Fifo),
            "job" => Ok(QueueOrder::JobSubmission),
            other => Err(format!("unknown queue order `{other}`: use fifo or job")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error("task {task} needs {need} but {node} has only {free} free")]
    NoRoom {
        task: TaskId,
        node: NodeId,
        need: Resources,
        free: Resources,
    },
    #[error("task {task} was sent to {got}, this worker is {want}")]
    WrongNode {
        task: TaskId,
        got: NodeId,
        want: NodeId,
    },
    #[error("task {task} is already here")]
    Duplicate { task: TaskId },
    #[error("task {task} is not on this worker (it may have just finished)")]
    NotHere { task: TaskId },
}

#[derive(Debug)]
pub struct Worker {
    node: NodeId,
    capacity: Resources,
    free: Resources,
    running: Vec<RunningTask>,
    queue: VecDeque<TaskSpec>,
    order: QueueOrder,
    /// Most resources running QUEUEABLE work may hold at once (load shaping).
    queueable_limit: Option<Resources>,
    /// The executor of tasks that name none.
    default_executor: Executor,
    /// Launches and stops for the executors, drained by [`Worker::step`].
    exec: Vec<ExecOrder>,
}

impl Worker {
    pub fn new(node: NodeId, capacity: Resources) -> Self {
        Worker {
            node,
            capacity,
            free: capacity,
            running: Vec::new(),
            queue: VecDeque::new(),
            order: QueueOrder::Fifo,
            queueable_limit: None,
            default_executor: Executor::Synthetic,
            exec: Vec::new(),
        }
    }

    /// Runs tasks that name no executor with `executor` (synthetic by default).
    /// Drivers of a real executor must go through [`Worker::step`], which hands out
    /// the launches and stops.
    pub fn with_default_executor(mut self, executor: Executor) -> Self {
        self.default_executor = executor;
        self
    }

    /// Orders the QUEUEABLE queue.
    pub fn with_queue_order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// Caps the resources running QUEUEABLE work may hold (the LM's per-node cap).
    pub fn with_queueable_limit(mut self, limit: Resources) -> Self {
        self.queueable_limit = Some(limit);
        self
    }

    /// Resources held by running QUEUEABLE work.
    pub fn queueable_held(&self) -> Resources {
        self.running
            .iter()
            .filter(|r| r.kind == TaskKind::Queueable)
            .map(|r| r.resources)
            .sum::<Resources>()
    }

    /// Tasks waiting in the queue, in the order they will start.
    pub fn queue(&self) -> impl Iterator<Item = &TaskSpec> {
        self.queue.iter()
    }

    /// True when a QUEUEABLE task may start now under the node's QUEUEABLE cap.
    fn under_limit(&self, task: &TaskSpec) -> bool {
        match self.queueable_limit {
            Some(limit) if task.kind == TaskKind::Queueable => {
                limit.fits(&self.queueable_held().add(&task.resources))
            }
            _ => true,
        }
    }

    fn enqueue(&mut self, task: TaskSpec) {
        let at = match self.order {
            QueueOrder::Fifo => self.queue.len(),
            QueueOrder::JobSubmission => {
                let key = task.id.job.submission_key();
                self.queue
                    .partition_point(|t| t.id.job.submission_key() <= key)
            }
        };
        self.queue.insert(at, task);
    }

    pub fn free(&self) -> Resources {
        self.free
    }

    pub fn capacity(&self) -> Resources {
        self.capacity
    }

    pub fn running(&self) -> &[RunningTask] {
        &self.running
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The LM asks to run a task. QUEUEABLE work starts now if it fits and nothing is
    /// queued before it, and waits otherwise. Other work starts now if it fits,
    /// killing the fewest running QUEUEABLE tasks (most recently started first) when
    /// only they stand in the way (their `Killed` reports precede its `Started`);
    /// otherwise it is refused.
    pub fn start_task(
        &mut self,
        now: Micros,
        order: StartTask,
    ) -> Result<Vec<WorkerReport>, WorkerError> {
        let task = order.task;
        if order.node != self.node {
            return Err(WorkerError::WrongNode {
                task: task.id,
                got: order.node,
                want: self.node,
            });
        }
        let held = self
            .running
            .iter()
            .find(|r| r.task == task.id)
            .map(|r| r.attempt)
            .or_else(|| {
                self.queue
                    .iter()
                    .find(|t| t.id == task.id)
                    .map(|t| t.attempt)
            });
        // An earlier run still here was reported lost by the LM, which launches a
        // retry only after that: the retry supersedes it (the old run is killed).
        // Mostly one report: the task's start.
        let mut reports = Vec::with_capacity(1);
        match held {
            Some(a) if a >= task.attempt => return Err(WorkerError::Duplicate { task: task.id }),
            Some(a) => reports.extend(self.kill(now, task.id, a).ok()),
            None => {}
        }
        if task.kind == TaskKind::Queueable {
            if self.free.fits(&task.resources) && self.queue.is_empty() && self.under_limit(&task) {
                reports.push(self.run(now, &task));
                return Ok(reports);
            }
            self.enqueue(task);
            return Ok(reports);
        }
        if let Some(victims) = self.reclaim_for(&task.resources) {
            for (victim, attempt) in victims {
                if let Ok(report) = self.kill(now, victim, attempt) {
                    reports.push(report);
                }
            }
            reports.push(self.run(now, &task));
            return Ok(reports);
        }
        Err(WorkerError::NoRoom {
            task: task.id,
            node: self.node,
            need: task.resources,
            free: self.free,
        })
    }

    /// The fewest running QUEUEABLE tasks to kill so that `need` fits (none when it
    /// fits already), or `None` when even killing all of them would not do.
    fn reclaim_for(&self, need: &Resources) -> Option<Vec<(TaskId, u32)>> {
        if self.free.fits(need) {
            return Some(Vec::new());
        }
        let mut candidates: Vec<&RunningTask> = self
            .running
            .iter()
            .filter(|r| r.kind == TaskKind::Queueable)
            .collect();
        // Most recently started first: they lose the least work.
        candidates.sort_by_key(|r| (std::cmp::Reverse(r.started_at), r.task));
        let mut room = self.free;
        let mut chosen = Vec::new();
        for r in candidates {
            if room.fits(need) {
                break;
            }
            room = room.add(&r.resources);
            chosen.push(r);
        }
        if !room.fits(need) {
            return None;
        }
        let mut i = 0;
        while i < chosen.len() {
            let without = room.saturating_sub(&chosen[i].resources);
            if without.fits(need) {
                room = without;
                chosen.remove(i);
            } else {
                i += 1;
            }
        }
        Some(chosen.into_iter().map(|r| (r.task, r.attempt)).collect())
    }

    fn run(&mut self, now: Micros, task: &TaskSpec) -> WorkerReport {
        self.free = self.free.saturating_sub(&task.resources);
        let executor = task.executor.as_ref().unwrap_or(&self.default_executor);
        let finish_at = match executor {
            Executor::Synthetic => Some(now + task.duration),
            real => {
                self.exec.push(ExecOrder::Launch {
                    task: task.clone(),
                    executor: real.clone(),
                });
                None
            }
        };
        self.running.push(RunningTask {
            task: task.id,
            attempt: task.attempt,
            resources: task.resources,
            finish_at,
            kind: task.kind,
            started_at: now,
        });
        WorkerReport::Started {
            node: self.node,
            task: task.id,
            attempt: task.attempt,
            at: now,
        }
    }

    /// Finishes every task due by `now`, then starts queued work that now fits.
    pub fn advance(&mut self, now: Micros) -> Vec<WorkerReport> {
        let mut reports = self.finish_due(now);
        while let Some(head) = self.queue.front() {
            if !self.free.fits(&head.resources) || !self.under_limit(head) {
                break;
            }
            let Some(task) = self.queue.pop_front() else {
                break;
            };
            reports.push(self.run(now, &task));
        }
        reports
    }

    /// The LM has not confirmed this worker for most of its lease: it may be about
    /// to declare it lost and have every task here run elsewhere. Tasks due by `now`
    /// finish; every other running or queued task stops at once (its executor is
    /// stopped) and is reported failed, `Lost` with `reason`, so that a task runs
    /// in one place only. The LM absorbs the report of a run it already declared
    /// lost, and ends (and the GM retries) one it had not.
    pub fn fence(&mut self, now: Micros, reason: &str) -> Vec<WorkerReport> {
        let mut reports = self.finish_due(now);
        let failure = TaskFailure::Lost {
            reason: reason.to_owned(),
        };
        let mut stopped: Vec<(TaskId, u32)> = Vec::new();
        for done in std::mem::take(&mut self.running) {
            self.free = self.free.add(&done.resources);
            if done.finish_at.is_none() {
                self.exec.push(ExecOrder::Stop {
                    task: done.task,
                    attempt: done.attempt,
                });
            }
            stopped.push((done.task, done.attempt));
        }
        stopped.extend(self.queue.drain(..).map(|t| (t.id, t.attempt)));
        stopped.sort();
        reports.extend(
            stopped
                .into_iter()
                .map(|(task, attempt)| WorkerReport::Failed {
                    used: None,
                    node: self.node,
                    task,
                    attempt,
                    at: now,
                    failure: failure.clone(),
                }),
        );
        reports
    }

    /// Finishes every task due by `now`, in (end, task) order.
    fn finish_due(&mut self, now: Micros) -> Vec<WorkerReport> {
        let mut reports = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            match self.running[i].finish_at {
                Some(at) if at <= now => {
                    let done = self.running.swap_remove(i);
                    self.free = self.free.add(&done.resources);
                    reports.push(WorkerReport::Finished {
                        used: None,
                        node: self.node,
                        task: done.task,
                        attempt: done.attempt,
                        at,
                    });
                }
                _ => i += 1,
            }
        }
        // Finishing order must not depend on swap_remove's reshuffling.
        reports.sort_by_key(|r| (r.at(), r.task()));
        reports
    }

    /// Stops run `attempt` of a running (or queued) task at once, freeing its
    /// resources; reports it killed (it will never report finished). A task that
    /// already finished, or holds another run, is `NotHere`: a finish report is on
    /// its way and stands.
    pub fn kill(
        &mut self,
        now: Micros,
        task: TaskId,
        attempt: u32,
    ) -> Result<WorkerReport, WorkerError> {
        let killed = WorkerReport::Killed {
            node: self.node,
            task,
            attempt,
            at: now,
        };
        if let Some(i) = self
            .running
            .iter()
            .position(|r| r.task == task && r.attempt == attempt)
        {
            let done = self.running.swap_remove(i);
            self.free = self.free.add(&done.resources);
            if done.finish_at.is_none() {
                self.exec.push(ExecOrder::Stop { task, attempt });
            }
            return Ok(killed);
        }
        if let Some(i) = self
            .queue
            .iter()
            .position(|t| t.id == task && t.attempt == attempt)
        {
            self.queue.remove(i);
            return Ok(killed);
        }
        Err(WorkerError::NotHere { task })
    }

    /// The executor of a running task says it ended (`failure` is `None` for a clean
    /// exit): its resources go back, the end is reported, queued work that now fits
    /// starts. A task not running here under an executor (it was killed, so its
    /// process ending is expected; or a synthetic task) is `NotHere`.
    pub fn exited(
        &mut self,
        now: Micros,
        task: TaskId,
        attempt: u32,
        failure: Option<TaskFailure>,
        used: Option<common::messages::RunUsage>,
    ) -> Result<Vec<WorkerReport>, WorkerError> {
        let i = self
            .running
            .iter()
            .position(|r| r.task == task && r.attempt == attempt && r.finish_at.is_none())
            .ok_or(WorkerError::NotHere { task })?;
        let done = self.running.swap_remove(i);
        self.free = self.free.add(&done.resources);
        let node = self.node;
        let mut reports = vec![match failure {
            None => WorkerReport::Finished {
                used,
                node,
                task,
                attempt,
                at: now,
            },
            Some(failure) => WorkerReport::Failed {
                used,
                node,
                task,
                attempt,
                at: now,
                failure,
            },
        }];
        reports.extend(self.advance(now));
        Ok(reports)
    }

    /// Launches and stops ordered since the last call, in order.
    fn take_exec_orders(&mut self) -> Vec<ExecOrder> {
        std::mem::take(&mut self.exec)
    }

    /// The LM promoted a running QUEUEABLE task to GUARANTEED: from now on it is
    /// never killed to make room for other work, and no longer counts against the
    /// QUEUEABLE cap. A task no longer running is `NotHere` (it finished or was
    /// killed before the promotion arrived).
    pub fn promote(&mut self, task: TaskId) -> Result<(), WorkerError> {
        let running = self
            .running
            .iter_mut()
            .find(|r| r.task == task)
            .ok_or(WorkerError::NotHere { task })?;
        running.kind = TaskKind::Guaranteed;
        Ok(())
    }

    /// When the next running task finishes.
    pub fn next_wakeup(&self) -> Option<Micros> {
        self.running.iter().filter_map(|r| r.finish_at).min()
    }
}

#[cfg(test)]
mod tests;
