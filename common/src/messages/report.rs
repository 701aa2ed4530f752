//! Worker -> LM: how a run went ([`WorkerReport`]) and why it failed ([`TaskFailure`]).

use crate::{Micros, NodeId, TaskId};
use serde::{Deserialize, Serialize};

/// Worker -> LM. A task that started ends in exactly one of `Finished` (exit code 0,
/// or a synthetic task's duration elapsed), `Failed` or `Killed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerReport {
    Started {
        node: NodeId,
        task: TaskId,
        /// The run ([`TaskSpec::attempt`]).
        attempt: u32,
        at: Micros,
    },
    Finished {
        node: NodeId,
        task: TaskId,
        /// The run ([`TaskSpec::attempt`]).
        attempt: u32,
        at: Micros,
        /// What the run used, when its worker measured it (an exec task's cgroup).
        used: Option<RunUsage>,
    },
    /// The task was stopped on the LM's order (preempted) before it finished.
    Killed {
        node: NodeId,
        task: TaskId,
        /// The run ([`TaskSpec::attempt`]).
        attempt: u32,
        at: Micros,
    },
    /// The task ended unsuccessfully (a real executor only): a non-zero exit, a
    /// signal it did not get from the worker, or it could not start at all.
    Failed {
        node: NodeId,
        task: TaskId,
        attempt: u32,
        at: Micros,
        failure: TaskFailure,
        /// What the run used, when its worker measured it.
        used: Option<RunUsage>,
    },
}

/// What one run used, as its worker measured it from the run's cgroup: CPU time
/// (user and system, every process of the run) and, where the kernel lets the
/// worker measure one run's alone, its peak memory.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// CPU time, microseconds.
    pub cpu_us: u64,
    /// Peak memory, MiB (rounded up).
    pub memory_peak_mb: Option<u64>,
}

/// Why a task failed at its worker.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskFailure {
    /// The command exited with a non-zero code.
    Exit { code: i32 },
    /// The command was ended by a signal the worker did not send; `out_of_memory`
    /// when its memory limit's OOM killer sent it.
    Signal { signal: i32, out_of_memory: bool },
    /// The task never ran: bad command, missing binary, bad working directory...
    StartFailed { reason: String },
    /// The worker holding the task stopped answering (or came back without it): the
    /// task's outcome is unknown and its node is down.
    Lost { reason: String },
}

impl std::fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskFailure::Exit { code } => write!(f, "exited with code {code}"),
            TaskFailure::Signal {
                signal,
                out_of_memory: true,
            } => write!(
                f,
                "out of memory: killed by signal {signal} at its memory limit"
            ),
            TaskFailure::Signal { signal, .. } => write!(f, "killed by signal {signal}"),
            TaskFailure::StartFailed { reason } => write!(f, "could not start: {reason}"),
            TaskFailure::Lost { reason } => write!(f, "lost: {reason}"),
        }
    }
}

impl WorkerReport {
    /// The node the report is about.
    pub fn node(&self) -> NodeId {
        match self {
            WorkerReport::Started { node, .. }
            | WorkerReport::Finished { node, .. }
            | WorkerReport::Killed { node, .. }
            | WorkerReport::Failed { node, .. } => *node,
        }
    }

    /// The task the report is about.
    pub fn task(&self) -> TaskId {
        match self {
            WorkerReport::Started { task, .. }
            | WorkerReport::Finished { task, .. }
            | WorkerReport::Killed { task, .. }
            | WorkerReport::Failed { task, .. } => *task,
        }
    }

    /// The run the report is about ([`TaskSpec::attempt`]).
    pub fn attempt(&self) -> u32 {
        match self {
            WorkerReport::Started { attempt, .. }
            | WorkerReport::Finished { attempt, .. }
            | WorkerReport::Killed { attempt, .. }
            | WorkerReport::Failed { attempt, .. } => *attempt,
        }
    }

    /// What an ended run used, when its worker measured it.
    pub fn used(&self) -> Option<RunUsage> {
        match self {
            WorkerReport::Finished { used, .. } | WorkerReport::Failed { used, .. } => *used,
            WorkerReport::Started { .. } | WorkerReport::Killed { .. } => None,
        }
    }

    /// When the reported change happened.
    pub fn at(&self) -> Micros {
        match self {
            WorkerReport::Started { at, .. }
            | WorkerReport::Finished { at, .. }
            | WorkerReport::Killed { at, .. }
            | WorkerReport::Failed { at, .. } => *at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TaskFailure;

    #[test]
    fn an_out_of_memory_kill_says_so_before_its_signal() {
        let oom = TaskFailure::Signal {
            signal: 9,
            out_of_memory: true,
        };
        assert_eq!(
            oom.to_string(),
            "out of memory: killed by signal 9 at its memory limit"
        );
        let killed = TaskFailure::Signal {
            signal: 9,
            out_of_memory: false,
        };
        assert_eq!(killed.to_string(), "killed by signal 9");
    }
}
