//! The worker's one entry point: `step(now, input) -> output`.
//!
//! Orders from the LM ([`LmToWorker`]) and the passage of time ([`WorkerInput::Wake`])
//! go through [`Worker::step`], which returns the reports for the LM and when the
//! worker next wants to be woken (its next task end), and what the executors must
//! launch or stop (tasks that are not synthetic). Their ends come back as
//! [`WorkerInput::Exited`].

use crate::io::{WorkerInput, WorkerOutput};
use crate::{Worker, WorkerError};
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Micros, TaskKind};

impl Worker {
    /// Handles one input. An error changes nothing (a start that does not fit, a kill
    /// or promotion of a task no longer here).
    pub fn step(&mut self, now: Micros, input: WorkerInput) -> Result<WorkerOutput, WorkerError> {
        let reports = match input {
            WorkerInput::Lm(LmToWorker::Start(order)) => {
                let reclaims = order.task.kind != TaskKind::Queueable;
                let mut reports = self.start_task(now, order)?;
                if reclaims {
                    // Room left over after kills made for this task goes to queued work.
                    reports.extend(self.advance(now));
                }
                reports
            }
            WorkerInput::Lm(LmToWorker::Kill(kill)) => {
                vec![self.kill(now, kill.task, kill.attempt)?]
            }
            WorkerInput::Lm(LmToWorker::Promote(promote)) => {
                self.promote(promote.task)?;
                Vec::new()
            }
            WorkerInput::Wake => self.advance(now),
            WorkerInput::Fence { reason } => self.fence(now, &reason),
            WorkerInput::Exited {
                task,
                attempt,
                failure,
                used,
            } => self.exited(now, task, attempt, failure, used)?,
        };
        Ok(WorkerOutput {
            to_lm: reports.into_iter().map(WorkerToLm::Report).collect(),
            next_wakeup: self.next_wakeup(),
            exec: self.take_exec_orders(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::ExecOrder;
    use common::messages::TaskFailure;
    use common::messages::{KillTask, StartTask, WorkerReport};
    use common::Executor;
    use common::{NodeId, Resources, TaskId, TaskSpec};

    fn start(job: u64, cores: u64, secs: u64, kind: TaskKind) -> WorkerInput {
        WorkerInput::Lm(LmToWorker::Start(StartTask {
            node: NodeId(0),
            dispatch: Default::default(),
            task: TaskSpec::short(
                TaskId::new(job, 0),
                Resources::cores(cores, 10),
                Micros::from_secs(secs),
            )
            .with_kind(kind),
        }))
    }

    fn reports(out: &WorkerOutput) -> Vec<WorkerReport> {
        out.to_lm
            .iter()
            .map(|WorkerToLm::Report(r)| r.clone())
            .collect()
    }

    #[test]
    fn a_start_reports_started_and_wakes_the_worker_when_the_task_ends() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 100));
        let out = w.step(Micros(0), start(1, 1, 3, TaskKind::Short)).unwrap();
        assert!(matches!(reports(&out)[..], [WorkerReport::Started { .. }]));
        assert_eq!(out.next_wakeup, Some(Micros::from_secs(3)));
        let done = w.step(Micros::from_secs(3), WorkerInput::Wake).unwrap();
        assert!(matches!(
            reports(&done)[..],
            [WorkerReport::Finished { .. }]
        ));
        assert_eq!(done.next_wakeup, None);
    }

    #[test]
    fn a_reclaiming_start_lets_queued_work_take_the_room_left_over() {
        // 2 cores: a 2-core QUEUEABLE task runs, a 1-core one waits; a 1-core
        // GUARANTEED start kills the running one, and the waiting one takes the core
        // left over in the same step.
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 100));
        w.step(Micros(0), start(1, 2, 9, TaskKind::Queueable))
            .unwrap();
        w.step(Micros(0), start(2, 1, 9, TaskKind::Queueable))
            .unwrap();
        let out = w
            .step(Micros(1), start(3, 1, 9, TaskKind::Guaranteed))
            .unwrap();
        let r = reports(&out);
        assert!(matches!(r[0], WorkerReport::Killed { task, .. } if task == TaskId::new(1, 0)));
        assert!(matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(3, 0)));
        assert!(matches!(r[2], WorkerReport::Started { task, .. } if task == TaskId::new(2, 0)));
        assert_eq!(w.free().cpu_millis, 0);
    }

    fn exec_start(job: u64, cores: u64, kind: TaskKind) -> WorkerInput {
        let WorkerInput::Lm(LmToWorker::Start(mut order)) = start(job, cores, 60, kind) else {
            unreachable!("start builds a start order")
        };
        order.task.executor = Some(Executor::Exec(Default::default()));
        WorkerInput::Lm(LmToWorker::Start(order))
    }

    fn launched(out: &WorkerOutput) -> Vec<TaskId> {
        out.exec
            .iter()
            .filter_map(|o| match o {
                ExecOrder::Launch { task, .. } => Some(task.id),
                ExecOrder::Stop { .. } => None,
            })
            .collect()
    }

    #[test]
    fn an_executor_task_ends_when_its_executor_says_and_frees_room_for_queued_work() {
        let mut w = Worker::new(NodeId(0), Resources::cores(1, 100));
        let out = w
            .step(Micros(0), exec_start(1, 1, TaskKind::Queueable))
            .unwrap();
        assert!(matches!(reports(&out)[..], [WorkerReport::Started { .. }]));
        assert_eq!(launched(&out), vec![TaskId::new(1, 0)]);
        // No timer: the duration does not end it.
        assert_eq!(out.next_wakeup, None);
        assert!(w
            .step(Micros::from_secs(999), WorkerInput::Wake)
            .unwrap()
            .to_lm
            .is_empty());
        // A second one queues behind it.
        let out = w
            .step(Micros(1), exec_start(2, 1, TaskKind::Queueable))
            .unwrap();
        assert!(out.to_lm.is_empty() && out.exec.is_empty());
        let failure = TaskFailure::Exit { code: 3 };
        let out = w
            .step(
                Micros(5),
                WorkerInput::Exited {
                    used: None,
                    attempt: 1,
                    task: TaskId::new(1, 0),
                    failure: Some(failure.clone()),
                },
            )
            .unwrap();
        let r = reports(&out);
        assert_eq!(
            r[0],
            WorkerReport::Failed {
                used: None,
                attempt: 1,
                node: NodeId(0),
                task: TaskId::new(1, 0),
                at: Micros(5),
                failure
            }
        );
        assert!(matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(2, 0)));
        assert_eq!(launched(&out), vec![TaskId::new(2, 0)]);
        let out = w
            .step(
                Micros(6),
                WorkerInput::Exited {
                    used: None,
                    attempt: 1,
                    task: TaskId::new(2, 0),
                    failure: None,
                },
            )
            .unwrap();
        assert!(matches!(
            reports(&out)[..],
            [WorkerReport::Finished { at: Micros(6), .. }]
        ));
        assert_eq!(w.free(), w.capacity());
    }

    #[test]
    fn killing_an_executor_task_stops_it_and_its_late_exit_changes_nothing() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 100));
        w.step(Micros(0), exec_start(1, 1, TaskKind::Short))
            .unwrap();
        let kill = WorkerInput::Lm(LmToWorker::Kill(KillTask {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
        }));
        let out = w.step(Micros(1), kill).unwrap();
        assert!(matches!(reports(&out)[..], [WorkerReport::Killed { .. }]));
        assert_eq!(
            out.exec,
            vec![ExecOrder::Stop {
                attempt: 1,
                task: TaskId::new(1, 0)
            }]
        );
        assert_eq!(w.free(), w.capacity());
        let exited = WorkerInput::Exited {
            used: None,
            attempt: 1,
            task: TaskId::new(1, 0),
            failure: Some(TaskFailure::Signal {
                signal: 15,
                out_of_memory: false,
            }),
        };
        assert!(w.step(Micros(2), exited).is_err());
        // A synthetic task is ended by the timer, never by an executor.
        w.step(Micros(3), start(2, 1, 5, TaskKind::Short)).unwrap();
        let exited = WorkerInput::Exited {
            used: None,
            attempt: 1,
            task: TaskId::new(2, 0),
            failure: None,
        };
        assert!(w.step(Micros(4), exited).is_err());
        assert_eq!(w.running().len(), 1);
    }

    #[test]
    fn the_default_executor_applies_to_tasks_that_name_none() {
        let mut w =
            Worker::new(NodeId(0), Resources::cores(2, 100)).with_default_executor(Executor::Burn);
        let out = w.step(Micros(0), start(1, 1, 5, TaskKind::Short)).unwrap();
        assert!(matches!(
            &out.exec[..],
            [ExecOrder::Launch {
                executor: Executor::Burn,
                ..
            }]
        ));
        assert_eq!(out.next_wakeup, None);
        // A task naming synthetic stays on the timer.
        let WorkerInput::Lm(LmToWorker::Start(mut order)) = start(2, 1, 5, TaskKind::Short) else {
            unreachable!("start builds a start order")
        };
        order.task.executor = Some(Executor::Synthetic);
        let out = w
            .step(Micros(0), WorkerInput::Lm(LmToWorker::Start(order)))
            .unwrap();
        assert!(out.exec.is_empty());
        assert_eq!(out.next_wakeup, Some(Micros::from_secs(5)));
    }

    #[test]
    fn a_kill_of_a_task_not_here_is_an_error_and_changes_nothing() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 100));
        let kill = WorkerInput::Lm(LmToWorker::Kill(KillTask {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(4, 0),
        }));
        assert!(w.step(Micros(0), kill).is_err());
        assert_eq!(w.free(), w.capacity());
    }
}
