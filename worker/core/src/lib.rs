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

mod step;
pub use step::{ExecOrder, WorkerInput, WorkerOutput};

use common::messages::{StartTask, TaskFailure, WorkerReport};
use common::{Executor, Micros, NodeId, Resources, TaskId, TaskKind, TaskSpec};
use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningTask {
    pub task: TaskId,
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
        if self.running.iter().any(|r| r.task == task.id)
            || self.queue.iter().any(|t| t.id == task.id)
        {
            return Err(WorkerError::Duplicate { task: task.id });
        }
        if task.kind == TaskKind::Queueable {
            if self.free.fits(&task.resources) && self.queue.is_empty() && self.under_limit(&task) {
                return Ok(vec![self.run(now, &task)]);
            }
            self.enqueue(task);
            return Ok(Vec::new());
        }
        if let Some(victims) = self.reclaim_for(&task.resources) {
            let mut reports = Vec::with_capacity(victims.len() + 1);
            for victim in victims {
                if let Ok(report) = self.kill(now, victim) {
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
    fn reclaim_for(&self, need: &Resources) -> Option<Vec<TaskId>> {
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
        Some(chosen.into_iter().map(|r| r.task).collect())
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
            resources: task.resources,
            finish_at,
            kind: task.kind,
            started_at: now,
        });
        WorkerReport::Started {
            node: self.node,
            task: task.id,
            at: now,
        }
    }

    /// Finishes every task due by `now`, then starts queued work that now fits.
    pub fn advance(&mut self, now: Micros) -> Vec<WorkerReport> {
        let mut reports = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            match self.running[i].finish_at {
                Some(at) if at <= now => {
                    let done = self.running.swap_remove(i);
                    self.free = self.free.add(&done.resources);
                    reports.push(WorkerReport::Finished {
                        node: self.node,
                        task: done.task,
                        at,
                    });
                }
                _ => i += 1,
            }
        }
        // Finishing order must not depend on swap_remove's reshuffling.
        reports.sort_by_key(|r| (r.at(), r.task()));
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

    /// Stops a running (or queued) task at once, freeing its resources; reports it
    /// killed (it will never report finished). A task that already finished is
    /// `NotHere`: its finish report is on its way and stands.
    pub fn kill(&mut self, now: Micros, task: TaskId) -> Result<WorkerReport, WorkerError> {
        let killed = WorkerReport::Killed {
            node: self.node,
            task,
            at: now,
        };
        if let Some(i) = self.running.iter().position(|r| r.task == task) {
            let done = self.running.swap_remove(i);
            self.free = self.free.add(&done.resources);
            if done.finish_at.is_none() {
                self.exec.push(ExecOrder::Stop { task });
            }
            return Ok(killed);
        }
        if let Some(i) = self.queue.iter().position(|t| t.id == task) {
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
        failure: Option<TaskFailure>,
    ) -> Result<Vec<WorkerReport>, WorkerError> {
        let i = self
            .running
            .iter()
            .position(|r| r.task == task && r.finish_at.is_none())
            .ok_or(WorkerError::NotHere { task })?;
        let done = self.running.swap_remove(i);
        self.free = self.free.add(&done.resources);
        let node = self.node;
        let mut reports = vec![match failure {
            None => WorkerReport::Finished {
                node,
                task,
                at: now,
            },
            Some(failure) => WorkerReport::Failed {
                node,
                task,
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
mod tests {
    use super::*;

    fn order(task: u64, cores: u64, secs: u64, kind: TaskKind) -> StartTask {
        StartTask {
            node: NodeId(0),
            task: TaskSpec::short(
                TaskId::new(task, 0),
                Resources::cores(cores, 1),
                Micros::from_secs(secs),
            )
            .with_kind(kind),
        }
    }

    #[test]
    fn holds_resources_for_the_duration() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
        let r = w
            .start_task(Micros(0), order(1, 2, 3, TaskKind::Short))
            .unwrap();
        assert_eq!(
            r,
            vec![WorkerReport::Started {
                node: NodeId(0),
                task: TaskId::new(1, 0),
                at: Micros(0)
            }]
        );
        assert_eq!(w.free(), Resources::new(0, 9));
        assert_eq!(w.next_wakeup(), Some(Micros::from_secs(3)));
        assert!(w.advance(Micros::from_secs(2)).is_empty());
        let r = w.advance(Micros::from_secs(3));
        assert_eq!(r.len(), 1);
        assert_eq!(w.free(), w.capacity());
    }

    #[test]
    fn killing_frees_resources_and_reports_nothing() {
        let mut w = Worker::new(NodeId(0), Resources::cores(1, 10));
        w.start_task(Micros(0), order(1, 1, 5, TaskKind::Short))
            .unwrap();
        let r = w.kill(Micros(7), TaskId::new(1, 0)).unwrap();
        assert!(matches!(r, WorkerReport::Killed { at: Micros(7), .. }));
        assert_eq!(w.free(), w.capacity());
        assert!(w.advance(Micros::from_secs(9)).is_empty());
        assert_eq!(
            w.kill(Micros(8), TaskId::new(1, 0)),
            Err(WorkerError::NotHere {
                task: TaskId::new(1, 0)
            })
        );
    }

    #[test]
    fn never_over_commits_short_work_but_queues_queueable() {
        let mut w = Worker::new(NodeId(0), Resources::cores(1, 10));
        w.start_task(Micros(0), order(1, 1, 5, TaskKind::Short))
            .unwrap();
        assert!(matches!(
            w.start_task(Micros(0), order(2, 1, 5, TaskKind::Short)),
            Err(WorkerError::NoRoom { .. })
        ));
        assert!(w
            .start_task(Micros(0), order(3, 1, 5, TaskKind::Queueable))
            .unwrap()
            .is_empty());
        assert_eq!(w.queued(), 1);
        let r = w.advance(Micros::from_secs(5));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(3, 0)));
    }

    #[test]
    fn guaranteed_work_kills_the_fewest_queueable_tasks_and_never_queues() {
        let mut w = Worker::new(NodeId(0), Resources::cores(3, 10));
        for (id, at) in [(1, 0), (2, 1), (3, 2)] {
            w.start_task(Micros(at), order(id, 1, 9, TaskKind::Queueable))
                .unwrap();
        }
        let r = w
            .start_task(Micros(3), order(4, 2, 9, TaskKind::Guaranteed))
            .unwrap();
        let killed: Vec<TaskId> = r
            .iter()
            .filter_map(|r| match r {
                WorkerReport::Killed { task, .. } => Some(*task),
                _ => None,
            })
            .collect();
        assert_eq!(killed, vec![TaskId::new(3, 0), TaskId::new(2, 0)]);
        assert!(matches!(r.last(), Some(WorkerReport::Started { .. })));
        assert_eq!(w.queued(), 0);
        // Only GUARANTEED work left in the way: refused, not queued.
        w.start_task(Micros(4), order(5, 1, 9, TaskKind::Guaranteed))
            .unwrap();
        assert!(matches!(
            w.start_task(Micros(4), order(6, 1, 9, TaskKind::Guaranteed)),
            Err(WorkerError::NoRoom { .. })
        ));
        assert_eq!(w.queued(), 0);
    }

    #[test]
    fn queue_order_by_job_submission_and_the_queueable_cap() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 10))
            .with_queue_order(QueueOrder::JobSubmission)
            .with_queueable_limit(Resources::cores(1, 10));
        w.start_task(Micros(0), order(5, 1, 1, TaskKind::Queueable))
            .unwrap();
        // The cap holds the second one back although a core is free.
        for id in [9, 7, 8] {
            assert!(w
                .start_task(Micros(0), order(id, 1, 1, TaskKind::Queueable))
                .unwrap()
                .is_empty());
        }
        let jobs: Vec<u64> = w.queue().map(|t| t.id.job.0).collect();
        assert_eq!(jobs, vec![7, 8, 9]);
        // Services' ids carry the GM in the top bits: GM 1's job submitted at t = 6
        // goes before GM 0's of t = 7, not after every job of GM 0.
        let of_gm1 = common::JobId::stamped(1, 6, None).0;
        assert!(w
            .start_task(Micros(0), order(of_gm1, 1, 1, TaskKind::Queueable))
            .unwrap()
            .is_empty());
        let jobs: Vec<u64> = w.queue().map(|t| t.id.job.0).collect();
        assert_eq!(jobs, vec![of_gm1, 7, 8, 9]);
        let r = w.advance(Micros::from_secs(1));
        assert!(
            matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(of_gm1, 0))
        );
        assert_eq!(w.running().len(), 1);
    }

    #[test]
    fn a_promoted_task_is_never_reclaimed() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
        for (id, at) in [(1, 0), (2, 1)] {
            w.start_task(Micros(at), order(id, 1, 9, TaskKind::Queueable))
                .unwrap();
        }
        w.promote(TaskId::new(2, 0)).unwrap();
        assert_eq!(w.queueable_held(), Resources::cores(1, 1));
        // Two cores needed, one reclaimable: refused; the promoted task stays.
        assert!(matches!(
            w.start_task(Micros(2), order(3, 2, 9, TaskKind::Guaranteed)),
            Err(WorkerError::NoRoom { .. })
        ));
        let r = w
            .start_task(Micros(2), order(4, 1, 9, TaskKind::Guaranteed))
            .unwrap();
        assert!(matches!(r[0], WorkerReport::Killed { task, .. } if task == TaskId::new(1, 0)));
        assert!(w.running().iter().any(|t| t.task == TaskId::new(2, 0)));
        assert_eq!(
            w.promote(TaskId::new(1, 0)),
            Err(WorkerError::NotHere {
                task: TaskId::new(1, 0)
            })
        );
    }
}
