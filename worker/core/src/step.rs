//! The worker's one entry point: `step(now, input) -> output`.
//!
//! Orders from the LM ([`LmToWorker`]) and the passage of time ([`WorkerInput::Wake`])
//! go through [`Worker::step`], which returns the reports for the LM and when the
//! worker next wants to be woken (its next task end).

use crate::{Worker, WorkerError};
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Micros, TaskKind};

/// What a worker takes.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkerInput {
    Lm(LmToWorker),
    /// Time passed: tasks due end, queued work starts where room frees.
    Wake,
}

/// What a worker sends after one step.
#[derive(Debug, Default, PartialEq)]
pub struct WorkerOutput {
    /// Reports for the LM, in order (kills a start made room with precede its start).
    pub to_lm: Vec<WorkerToLm>,
    /// When the next running task ends.
    pub next_wakeup: Option<Micros>,
}

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
            WorkerInput::Lm(LmToWorker::Kill(kill)) => vec![self.kill(now, kill.task)?],
            WorkerInput::Lm(LmToWorker::Promote(promote)) => {
                self.promote(promote.task)?;
                Vec::new()
            }
            WorkerInput::Wake => self.advance(now),
        };
        Ok(WorkerOutput {
            to_lm: reports.into_iter().map(WorkerToLm::Report).collect(),
            next_wakeup: self.next_wakeup(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::{KillTask, StartTask, WorkerReport};
    use common::{NodeId, Resources, TaskId, TaskSpec};

    fn start(job: u64, cores: u64, secs: u64, kind: TaskKind) -> WorkerInput {
        WorkerInput::Lm(LmToWorker::Start(StartTask {
            node: NodeId(0),
            task: TaskSpec::short(
                TaskId::new(job, 0),
                Resources::cores(cores, 10),
                Micros::from_secs(secs),
            )
            .with_kind(kind),
        }))
    }

    fn reports(out: &WorkerOutput) -> Vec<WorkerReport> {
        out.to_lm.iter().map(|WorkerToLm::Report(r)| *r).collect()
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

    #[test]
    fn a_kill_of_a_task_not_here_is_an_error_and_changes_nothing() {
        let mut w = Worker::new(NodeId(0), Resources::cores(2, 100));
        let kill = WorkerInput::Lm(LmToWorker::Kill(KillTask {
            node: NodeId(0),
            task: TaskId::new(4, 0),
        }));
        assert!(w.step(Micros(0), kill).is_err());
        assert_eq!(w.free(), w.capacity());
    }
}
