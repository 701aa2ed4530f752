//! How runs start and end, as an LM tells the GM that launched them: starts, ends
//! (and who publishes them on the event exchange).

use super::report::{RunUsage, TaskFailure, WorkerReport};
use crate::{GmId, LmId, Micros, NodeId, TaskId};
use serde::{Deserialize, Serialize};

impl TaskEnd {
    /// Run `attempt` of `task` finished on `node` at `at`.
    pub fn finished(task: TaskId, attempt: u32, node: NodeId, at: Micros) -> Self {
        TaskEnd {
            used: None,
            task,
            attempt,
            node,
            at,
            failure: None,
        }
    }

    /// The run's end of a `Finished` or `Failed` report; `None` for the others.
    pub fn of_report(report: &WorkerReport) -> Option<TaskEnd> {
        let (failure, used) = match report {
            WorkerReport::Finished { used, .. } => (None, *used),
            WorkerReport::Failed { failure, used, .. } => (Some(failure.clone()), *used),
            WorkerReport::Started { .. } | WorkerReport::Killed { .. } => return None,
        };
        Some(TaskEnd {
            task: report.task(),
            attempt: report.attempt(),
            node: report.node(),
            at: report.at(),
            failure,
            used,
        })
    }

    /// The worker's report of this end, on `node`: `Finished` or `Failed`.
    pub fn report(&self, node: NodeId) -> WorkerReport {
        let (task, attempt, at) = (self.task, self.attempt, self.at);
        match &self.failure {
            None => WorkerReport::Finished {
                node,
                task,
                attempt,
                at,
                used: self.used,
            },
            Some(failure) => WorkerReport::Failed {
                node,
                task,
                attempt,
                at,
                failure: failure.clone(),
                used: self.used,
            },
        }
    }
}

/// LM -> GM: tasks this GM launched that ended at their workers, finished or failed
/// (sent to the GM that launched them, on the same ordered, retrying stream as
/// requeues; a repeat is harmless: an end is final).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksEnded {
    pub lm: LmId,
    pub gm: GmId,
    pub ends: Vec<TaskEnd>,
    /// Who publishes these ends on the event exchange.
    #[serde(default)]
    pub publish: EndsPublished,
}

/// Who publishes the ends of a [`TasksEnded`] on the event exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndsPublished {
    /// The LM did, as it heard them from the worker (the usual case).
    #[default]
    ByLm,
    /// The GM does, each it takes as the end of an open task's current run: the
    /// LM's own verdicts "lost" (a worker silent past the timeout, a run a
    /// restarted LM does not hold). Published by the LM, a verdict that died with
    /// it before reaching the GM was seen as the task's failure while the GM ran
    /// the task on (issue 33: 346 of 1,000,000 seeds of `loadgen faults` at 21568f3).
    ByGm,
    /// As `ByGm`, marked re-announced: failures a worker listed to a restarted LM
    /// (their report, and maybe their event, died with its previous life); only
    /// the GM knows whether the run is still the task's.
    ByGmAgain,
}

/// How one task ended at its worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEnd {
    pub task: TaskId,
    /// The run that ended ([`crate::TaskSpec::attempt`]): the GM ignores the end of a run
    /// it has already replaced by a retry.
    pub attempt: u32,
    pub node: NodeId,
    /// When the worker saw it end.
    pub at: Micros,
    /// `None`: finished (exit 0, or a synthetic task's time was up).
    pub failure: Option<TaskFailure>,
    /// What the run used, when its worker measured it (absent from the records
    /// of a worker of an earlier version: none).
    #[serde(default)]
    pub used: Option<RunUsage>,
}

/// LM -> GM: tasks this GM launched that started at their workers (sent to the GM
/// that launched them on the LM's ordered stream, like [`TasksEnded`]; a repeat is
/// harmless).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksStarted {
    pub lm: LmId,
    pub gm: GmId,
    pub starts: Vec<TaskStart>,
}

/// One task's start at its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStart {
    pub task: TaskId,
    /// The run that started ([`crate::TaskSpec::attempt`]).
    pub attempt: u32,
    pub node: NodeId,
    /// When the worker started it (worker clock).
    pub at: Micros,
}
