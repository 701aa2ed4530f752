//! Messages between an LM and its workers: start, kill and promote orders, the
//! workers' reports (and why a task failed), registration and check-ins.

use super::TaskEnd;
use crate::{LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use serde::{Deserialize, Serialize};

/// LM -> worker: run this task now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartTask {
    pub node: NodeId,
    pub task: TaskSpec,
    /// Which of its LM's start orders this is: a worker runs each dispatch once, so
    /// a start order resent or replayed (captured on the link) is not run again,
    /// while a preempted task started anew (the same attempt) is another dispatch.
    #[serde(default)]
    pub dispatch: Dispatch,
}

/// One start order of an LM: its life ([`super::LmSnapshot::incarnation`]) and a number
/// counting that life's start orders from 1. `Dispatch::default()` (life 0) names
/// none (orders made outside an LM: tests, benches).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dispatch {
    pub lm_life: u64,
    pub seq: u64,
}

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
    },
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
            } => write!(f, "killed by signal {signal}: over its memory limit"),
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

    /// When the reported change happened.
    pub fn at(&self) -> Micros {
        match self {
            WorkerReport::Started { at, .. }
            | WorkerReport::Finished { at, .. }
            | WorkerReport::Killed { at, .. }
            | WorkerReport::Failed { at, .. } => *at,
        }
    }

    /// The run's end, for a `Finished` or `Failed` report.
    pub fn end(&self) -> Option<TaskEnd> {
        let failure = match self {
            WorkerReport::Finished { .. } => None,
            WorkerReport::Failed { failure, .. } => Some(failure.clone()),
            WorkerReport::Started { .. } | WorkerReport::Killed { .. } => return None,
        };
        Some(TaskEnd {
            task: self.task(),
            attempt: self.attempt(),
            node: self.node(),
            at: self.at(),
            failure,
        })
    }
}

/// LM -> worker: stop this task now (preempted); its resources are already reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillTask {
    pub node: NodeId,
    pub task: TaskId,
    /// The run to stop ([`TaskSpec::attempt`]): a worker holding another run of the
    /// task leaves it alone.
    pub attempt: u32,
}

/// LM -> worker: this running QUEUEABLE task is GUARANTEED from now on (Mercury's
/// promotion): the worker must never kill it to make room for other work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromoteTask {
    pub node: NodeId,
    pub task: TaskId,
}

/// The slot a worker asks for when it lets its LM choose (`worker --slot auto`): the
/// slot its URL registered before, else the first free one. For replicas that cannot
/// know an index of their own (`docker compose up --scale`).
pub const AUTO_SLOT: u32 = u32::MAX;

/// Worker -> LM at start-up: "I am worker slot `slot` ([`AUTO_SLOT`]: any free one),
/// reach me at `url`". A worker that registers again because its LM restarted lists
/// the tasks it still holds, so that the new LM takes them into its state before it
/// publishes any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRegistration {
    pub slot: u32,
    pub url: String,
    pub holding: Vec<HeldTask>,
    /// Runs this worker ended recently, finished or failed, with the time each
    /// ended (their reports may still be on the way, or have died with an LM): a
    /// restarted LM re-announces each once, marked as a re-announcement, tells its
    /// GM, and does not launch a finished one again when a GM resends its batch.
    pub ended: Vec<TaskEnd>,
}

/// Worker -> LM, every `--lm-check-ms`: the worker of `slot`, listening at `url`,
/// is alive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAlive {
    pub slot: u32,
    pub url: String,
}

/// LM -> worker: the LM's life, and whether it counts this worker registered (the
/// same slot and URL, not declared lost). When not, the worker registers again,
/// listing the tasks it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAliveAnswer {
    pub incarnation: u64,
    pub registered: bool,
}

/// A task a worker holds: running (`started_at` set) or waiting in its queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldTask {
    pub node: NodeId,
    pub task: TaskSpec,
    pub started_at: Option<Micros>,
}

/// LM -> worker: the nodes this worker runs, with their capacity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAssignment {
    pub lm: LmId,
    /// The slot the worker holds (the one it asked for, or the LM's choice).
    pub slot: u32,
    pub nodes: Vec<(NodeId, Resources)>,
    /// Identifies this life of the LM (its start time, µs since the epoch): a worker
    /// that sees another value on the LM's `/healthz` registers again.
    pub incarnation: u64,
    /// The worker's lease (the LM's worker timeout, ms; 0: none): a worker the LM
    /// has not confirmed for part of it stops what it runs before the LM can declare
    /// it lost, so that a task the GM retries is not also still running here (see
    /// the worker's `fence`).
    pub lease_ms: u64,
}
