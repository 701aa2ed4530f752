//! The worker state machine. Tasks start when their resources are free; tasks that
//! may queue (QUEUEABLE work) wait in a FIFO queue, all others are refused rather
//! than over-committing the node.

use common::messages::{StartTask, WorkerReport};
use common::{Micros, NodeId, Resources, TaskId, TaskKind, TaskSpec};
use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningTask {
    pub task: TaskId,
    pub resources: Resources,
    pub finish_at: Micros,
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
}

impl Worker {
    pub fn new(node: NodeId, capacity: Resources) -> Self {
        Worker {
            node,
            capacity,
            free: capacity,
            running: Vec::new(),
            queue: VecDeque::new(),
        }
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

    /// The LM asks to run a task. It starts now if it fits; QUEUEABLE work that does
    /// not fit waits; anything else that does not fit is refused.
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
        if self.free.fits(&task.resources) && self.queue.is_empty() {
            return Ok(vec![self.run(now, &task)]);
        }
        if task.kind == TaskKind::Queueable {
            self.queue.push_back(task);
            return Ok(Vec::new());
        }
        Err(WorkerError::NoRoom {
            task: task.id,
            node: self.node,
            need: task.resources,
            free: self.free,
        })
    }

    fn run(&mut self, now: Micros, task: &TaskSpec) -> WorkerReport {
        self.free = self.free.saturating_sub(&task.resources);
        self.running.push(RunningTask {
            task: task.id,
            resources: task.resources,
            finish_at: now + task.duration,
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
            if self.running[i].finish_at <= now {
                let done = self.running.swap_remove(i);
                self.free = self.free.add(&done.resources);
                reports.push(WorkerReport::Finished {
                    node: self.node,
                    task: done.task,
                    at: done.finish_at,
                });
            } else {
                i += 1;
            }
        }
        // Finishing order must not depend on swap_remove's reshuffling.
        reports.sort_by_key(|r| match r {
            WorkerReport::Finished { at, task, .. } => (*at, *task),
            WorkerReport::Started { at, task, .. } | WorkerReport::Killed { at, task, .. } => {
                (*at, *task)
            }
        });
        while let Some(head) = self.queue.front() {
            if !self.free.fits(&head.resources) {
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
            return Ok(killed);
        }
        if let Some(i) = self.queue.iter().position(|t| t.id == task) {
            self.queue.remove(i);
            return Ok(killed);
        }
        Err(WorkerError::NotHere { task })
    }

    /// When the next running task finishes.
    pub fn next_wakeup(&self) -> Option<Micros> {
        self.running.iter().map(|r| r.finish_at).min()
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
}
