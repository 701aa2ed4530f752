//! What a worker takes ([`WorkerInput`]) and gives back ([`WorkerOutput`]), with the
//! orders for the executors ([`ExecOrder`]).

use common::messages::TaskFailure;
use common::protocol::{LmToWorker, WorkerToLm};
use common::{Executor, Micros, TaskId, TaskSpec};

/// What a worker takes.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkerInput {
    Lm(LmToWorker),
    /// Time passed: tasks due end, queued work starts where room frees.
    Wake,
    /// The executor of a running task says it ended: `None` a clean exit (code 0,
    /// burn done), otherwise why it failed.
    Exited {
        task: TaskId,
        /// The run ([`TaskSpec::attempt`]) whose executor ended.
        attempt: u32,
        failure: Option<TaskFailure>,
        /// What the run used, when its executor measured it.
        used: Option<common::messages::RunUsage>,
    },
    /// The LM has not confirmed this worker for most of its lease: everything here
    /// stops and is reported lost with `reason` ([`Worker::fence`]).
    Fence {
        reason: String,
    },
}

/// What the service must do for a task that runs under a real executor.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecOrder {
    /// Run `task` with `executor` (its own, or the worker's default); report its end
    /// with [`WorkerInput::Exited`].
    Launch { task: TaskSpec, executor: Executor },
    /// The task was killed (the LM's order, or room made for other work): stop it.
    /// Its end is already reported; the `Exited` that follows is `NotHere`.
    Stop { task: TaskId, attempt: u32 },
}

/// What a worker sends after one step.
#[derive(Debug, Default, PartialEq)]
pub struct WorkerOutput {
    /// Reports for the LM, in order (kills a start made room with precede its start).
    pub to_lm: Vec<WorkerToLm>,
    /// When the next running task ends.
    pub next_wakeup: Option<Micros>,
    /// Launches and stops for the executors, in order (empty for synthetic tasks).
    pub exec: Vec<ExecOrder>,
}
