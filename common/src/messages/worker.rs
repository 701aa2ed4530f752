//! Messages between an LM and its workers: start, kill and promote orders, the
//! workers' reports (and why a task failed), registration and check-ins.

use super::ends::TaskEnd;
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
    /// The first start order of this registration: the [`Dispatch::seq`] of the
    /// LM's life `incarnation` from which its orders are for it. A start order of
    /// that life numbered below was sent for an earlier registration of the slot
    /// (a stream the LM gave up when it declared the worker lost, whose bytes may
    /// still arrive after a network cut) and is refused. 0: no floor.
    pub orders_from: u64,
}
