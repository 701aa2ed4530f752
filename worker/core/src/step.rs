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
