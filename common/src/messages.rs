//! Messages between the roles. The same types travel over in-memory channels (the
//! simulator, embedded mode) and over the network (bincode via [`crate::codec`]).
//!
//! GM -> LM: [`LaunchBatch`]. LM -> GM: [`LaunchResponse`] and [`LmSnapshot`]
//! heartbeats. LM -> worker: [`StartTask`]. Worker -> LM: [`WorkerReport`], and once at
//! start-up [`WorkerRegistration`], answered with a [`WorkerAssignment`].

use crate::quota::JobContainers;
use crate::reasons::RejectReason;
use crate::{
    ConstraintSet, GmId, JobId, LmId, Micros, NodeId, QueueId, Resources, TaskId, TaskSpec,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

mod drain;
mod ends;
mod report;
mod worker;

pub use drain::*;
pub use ends::*;
pub use report::*;
pub use worker::*;

/// What never changes about an LM's nodes: their home partition (the GM that owns
/// them), their machine constraints and their capacity. Sent with every snapshot (by
/// reference in memory) so that a GM that (re)starts rebuilds its view from one
/// heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmTopology {
    pub lm: LmId,
    /// Number of GMs, i.e. of partitions.
    pub gms: u16,
    /// Per node (indexed by `NodeId`): the partition it belongs to.
    pub home: Vec<GmId>,
    pub constraints: Vec<ConstraintSet>,
    pub capacity: Vec<Resources>,
}

impl LmTopology {
    pub fn node_count(&self) -> usize {
        self.home.len()
    }
}

/// Nodes per block of [`LmSnapshot::free_changed`].
pub const FREE_BLOCK: usize = 64;

/// Nodes per sub-block of [`LmSnapshot::free_changed`] (eight to a block).
pub const FREE_SUB_BLOCK: usize = 8;

/// The state of one LM at one moment: what every GM needs to match tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LmSnapshot {
    pub lm: LmId,
    /// The LM's life (its start time, µs). Snapshots of one life are ordered by
    /// `version`; a snapshot of another life replaces them when its number is higher,
    /// or when the life the GM holds has been silent for a few snapshots of the
    /// other (an LM restarted on a host whose clock is behind).
    pub incarnation: u64,
    /// Increases with every change; a GM ignores a snapshot older than the one it has.
    pub version: u64,
    pub taken_at: Micros,
    pub topology: Arc<LmTopology>,
    /// Free resources of each physical node (indexed by `NodeId`), after deducting
    /// everything running there, including resources lent to other partitions, but
    /// not QUEUEABLE work: it is opportunistic and makes way for any other task.
    pub free: Arc<Vec<Resources>>,
    /// Per block of [`FREE_BLOCK`] nodes (block `b`: nodes `64 b` to `64 b + 63` of
    /// `free`): the `version` of the latest snapshot of this life whose `free` differs
    /// there from the one built before it; then the same per sub-block of
    /// [`FREE_SUB_BLOCK`] nodes (see [`LmSnapshot::free_changes`]). A GM holding an
    /// earlier snapshot of this life skips the blocks (sub-blocks) not changed since.
    /// Empty (an older LM): the GM compares every block. The sub-blocks ride in this
    /// vector, not in a field of their own, so that the message keeps its shape: a GM
    /// that knows only blocks finds a length it does not expect and compares by value.
    #[serde(default)]
    pub free_changed: Arc<Vec<u64>>,
    /// Per GM, the sequence number of the last launch batch this snapshot includes,
    /// so that a GM can re-apply what it has sent since.
    pub applied_batches: Vec<u64>,
    /// Resources in use per user queue (for fairness).
    pub usage: Vec<(QueueId, Resources)>,
    /// Per node (indexed by `NodeId`): the estimated queuing delay a new QUEUEABLE
    /// task would see there, R = T_q + T_r + T_l (Mercury 4.2). Empty when the LM does
    /// not estimate it (no QUEUEABLE support configured).
    #[serde(default)]
    pub queue_delay: Arc<Vec<Micros>>,
    /// Per node: resources held by running QUEUEABLE work (included in `free`, since
    /// other work may reclaim them). GMs prefer nodes where a task fits without
    /// killing anything. Empty when there is none to report.
    #[serde(default)]
    pub queueable_held: Arc<Vec<Resources>>,
    /// Per job with containers here: its outstanding QUEUEABLE containers and running
    /// GUARANTEED ones, sorted by job (for quotas, Mercury 4.1). Empty when the LM has
    /// no QUEUEABLE support configured.
    #[serde(default)]
    pub jobs: Arc<Vec<(JobId, JobContainers)>>,
}

/// The length of [`LmSnapshot::free_changed`] for `nodes` nodes, as an LM builds
/// it: one entry per block of [`FREE_BLOCK`], then one per sub-block of
/// [`FREE_SUB_BLOCK`].
pub fn free_changed_len(nodes: usize) -> usize {
    nodes.div_ceil(FREE_BLOCK) + nodes.div_ceil(FREE_SUB_BLOCK)
}

impl LmSnapshot {
    /// [`LmSnapshot::free_changed`] as (per block, per sub-block if sent): `None`
    /// unless its length is that of the blocks of `free` (an LM that sends no
    /// sub-blocks), or of the blocks and then the sub-blocks.
    pub fn free_changes(&self) -> Option<(&[u64], Option<&[u64]>)> {
        let nodes = self.free.len();
        let blocks = nodes.div_ceil(FREE_BLOCK);
        let changed = &self.free_changed[..];
        if changed.len() == blocks {
            Some((changed, None))
        } else if changed.len() == free_changed_len(nodes) {
            let (blocks, subs) = changed.split_at(blocks);
            Some((blocks, Some(subs)))
        } else {
            None
        }
    }
}

/// How the GM found the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The node is in the GM's own partition of that LM.
    Internal,
    /// The node is in another GM's partition: the LM lends just the requested resources
    /// to the GM's partition as a logical node until the task ends.
    Repartition,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub task: TaskSpec,
    pub node: NodeId,
    pub placement: Placement,
}

/// Launch requests of one GM for one LM, sent together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchBatch {
    pub gm: GmId,
    /// The sending GM's life (its first batch number; 0 in the simulator's and
    /// tests' GMs). An LM that has seen a newer life of `gm` refuses the batch: a
    /// standby that took over fences the primary it replaced.
    pub life: u64,
    pub lm: LmId,
    /// Per (GM life, LM) pair, increasing from the life's number + 1.
    pub seq: u64,
    /// Sent again because an earlier copy may have been applied (its answer was
    /// lost). A first copy (`false`) of a batch its LM answered "busy" before is a
    /// late duplicate: the GM took that batch back, so the LM does not apply it.
    #[serde(default)]
    pub resend: bool,
    pub requests: Vec<LaunchRequest>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchOutcome {
    Launched { placement: Placement },
    Rejected(RejectReason),
}

/// The LM's answer to a batch, with its current state piggybacked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchResponse {
    pub lm: LmId,
    pub gm: GmId,
    pub seq: u64,
    pub outcomes: Vec<(TaskId, LaunchOutcome)>,
    pub snapshot: LmSnapshot,
}

/// GM -> LM (fairness, Algorithm 2): free room for `task` by preempting tasks of the
/// `victim` queue, then launch `task` there. The LM checks against its authoritative
/// usage that the victim is over its share before it touches anything.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreemptRequest {
    pub gm: GmId,
    /// The sending GM's life, as in [`LaunchBatch::life`]: refused by an LM that
    /// has seen a newer one.
    pub life: u64,
    pub lm: LmId,
    pub task: TaskSpec,
    pub victim: QueueId,
    /// The sending GM's count of preemption requests in its life, this one
    /// included (1 for the first): an LM that told the GM it holds no request for
    /// this task ([`ReconcileRequest::preempts`]) refuses, as
    /// [`PreemptRefusal::Void`], every request for it numbered up to the ask's
    /// [`ReconcileRequest::preempt_seq`] (a late copy), never a later one.
    #[serde(default)]
    pub seq: u64,
}

/// Why an LM refused a preemption. Externally tagged: it travels in bincode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptRefusal {
    /// This LM runs no fairness policy.
    NoFairness,
    /// The victim is not over its share in the LM's authoritative state.
    VictimNotOverShare {
        usage_share: f64,
        share: f64,
    },
    /// No node with the task's constraints can fit it even after preempting every
    /// task of the victim there.
    NothingToFree,
    /// The task is already running here.
    Duplicate,
    Invalid {
        detail: String,
    },
    /// This LM preempted as many tasks of the victim queue as its rate limit allows
    /// within the window ([`crate::preemption::PreemptionRules::rate_limit`]).
    RateLimited,
    /// The task's job was cancelled while the LM held the request.
    Cancelled,
    /// A late copy of a request the LM told its GM it did not hold (the GM's
    /// ask about an overdue held request, [`ReconcileRequest::preempts`]): the GM
    /// queued the task again, so the LM never carries it out.
    Void,
}

impl PreemptRefusal {
    /// A short snake_case name (metrics label, logs).
    pub fn label(&self) -> &'static str {
        match self {
            PreemptRefusal::NoFairness => "no_fairness",
            PreemptRefusal::VictimNotOverShare { .. } => "victim_not_over_share",
            PreemptRefusal::NothingToFree => "nothing_to_free",
            PreemptRefusal::Duplicate => "duplicate",
            PreemptRefusal::Invalid { .. } => "invalid",
            PreemptRefusal::RateLimited => "rate_limited",
            PreemptRefusal::Cancelled => "cancelled",
            PreemptRefusal::Void => "void",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptOutcome {
    Launched {
        node: NodeId,
        preempted: Vec<TaskId>,
    },
    Refused(PreemptRefusal),
    /// The LM holds the request (the preemption hold,
    /// [`crate::preemption::PreemptionRules::hold`]): the first room that frees on a
    /// node fitting the task launches it there, with no kill; at `until` (µs) the
    /// LM preempts or refuses as for a request it did not hold. The final answer
    /// follows on the GM's stream ([`PreemptResponse::held`]).
    Held {
        until: Micros,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreemptResponse {
    pub lm: LmId,
    pub gm: GmId,
    pub task: TaskId,
    pub outcome: PreemptOutcome,
    pub snapshot: LmSnapshot,
    /// The final answer to a request the LM held: it comes after the request's
    /// reply ([`PreemptOutcome::Held`]), so it travels on the GM's ordered stream.
    pub held: bool,
}

/// LM -> GM: tasks of the GM's queues that were preempted, to be queued again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreemptedTasks {
    pub lm: LmId,
    pub gm: GmId,
    /// Each task with the work it lost (time it had run).
    pub tasks: Vec<(TaskSpec, Micros)>,
}

/// GM -> LM: stop every task of `job` that `gm` launched here (the job was
/// cancelled). The LM stops only the tasks that GM launched; a repeat finds nothing
/// more to stop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub gm: GmId,
    pub lm: LmId,
    pub job: JobId,
}

/// GM -> LM: which of `tasks` does this LM hold (running, queued, being preempted)
/// or remember finished? Asked by a GM restarted on its journal before it resumes
/// its tasks (a task an LM holds is not placed again: on another LM it would run
/// twice), and by a GM that saw the LM restart, about the tasks it believes run
/// there (`forget`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconcileRequest {
    pub gm: GmId,
    pub lm: LmId,
    /// Each task with the run the GM last sent out ([`TaskSpec::attempt`]).
    pub tasks: Vec<(TaskId, u32)>,
    /// The GM ends every run of `tasks` this LM neither holds nor remembers
    /// finished as lost: the LM records them lost too, so that a worker that
    /// registers later still holding one is told to kill it (its retry may run
    /// elsewhere by then) and a later report of its end is absorbed.
    #[serde(default)]
    pub forget: bool,
    /// The asking GM's life ([`LaunchBatch::life`]). The LM takes it as that GM's
    /// newest before it answers, so that a launch of an older life still on its
    /// way (sent before the GM restarted) is refused once the answer left: what
    /// the answer says the LM does not hold, no older life can start there any
    /// more (issue 33, seed 14212). 0: not fenced, fences nothing.
    #[serde(default)]
    pub life: u64,
    /// Held preemption requests of `gm` whose final answer is overdue (the hold
    /// plus a margin passed), each task with the run the GM sent out: the LM
    /// answers for each whether it still holds the request, launched the task, or
    /// neither ([`ReconcileResponse::preempts`]). Neither is final: every request
    /// of `gm` for that task numbered up to `preempt_seq` is void at that LM from
    /// then on (a late copy is refused [`PreemptRefusal::Void`]), so the GM may
    /// queue the task again without it ever running twice.
    #[serde(default)]
    pub preempts: Vec<(TaskId, u32)>,
    /// The newest [`PreemptRequest::seq`] `gm` had sent when it asked.
    #[serde(default)]
    pub preempt_seq: u64,
}

/// What an LM says of a held preemption request a GM asks about
/// ([`ReconcileRequest::preempts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldPreemptState {
    /// Still held: the hold's end (or room freeing first) decides, and the final
    /// answer follows on the GM's stream.
    StillHeld,
    /// The task launched here (it runs, or ran: its end reaches the GM).
    Launched,
    /// Neither held nor launched, and void here from now on: the GM queues the
    /// task again.
    NotHeld,
}

impl HeldPreemptState {
    /// A short snake_case name (metrics label, logs).
    pub fn label(self) -> &'static str {
        match self {
            HeldPreemptState::StillHeld => "still_held",
            HeldPreemptState::Launched => "launched",
            HeldPreemptState::NotHeld => "not_held",
        }
    }
}

/// The LM's answer to a [`ReconcileRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconcileResponse {
    pub lm: LmId,
    pub gm: GmId,
    /// Asked-about tasks this LM holds, where, and which run
    /// ([`TaskSpec::attempt`]): their ends (or their requeue, if being preempted)
    /// will reach the GM.
    pub held: Vec<(TaskId, NodeId, u32)>,
    /// Asked-about tasks this LM remembers finished cleanly.
    pub finished: Vec<TaskId>,
    /// The answering LM's life ([`LmSnapshot::incarnation`]): what it holds is
    /// true of that life; a GM that later sees another life asks again.
    #[serde(default)]
    pub incarnation: u64,
    /// The held preemption requests asked about ([`ReconcileRequest::preempts`]),
    /// each with what this LM says of it.
    #[serde(default)]
    pub preempts: Vec<(TaskId, HeldPreemptState)>,
}

/// The LM's answer to a [`CancelRequest`], with its state piggybacked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelResponse {
    pub lm: LmId,
    pub gm: GmId,
    pub job: JobId,
    /// Tasks of the job stopped now: killed at their workers (or taken out of a
    /// worker's queue), their resources free again.
    pub cancelled: Vec<TaskId>,
    /// Tasks of the job running here that another GM launched: left alone.
    pub not_yours: Vec<TaskId>,
    pub snapshot: LmSnapshot,
}

// The gang transaction (see `crate::gang` and docs/gangs.md).

/// One step of a gang transaction, for one LM's part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GangOp {
    /// Verify these launches and hold their room for `hold_for` from the arrival
    /// (a duration, not a deadline: the GM's and the LM's clocks need not agree).
    /// All or nothing: a part with one request that does not fit is refused whole.
    Reserve {
        requests: Vec<LaunchRequest>,
        hold_for: Micros,
    },
    /// Launch the part held for this generation.
    Commit,
    /// Give back the part held for this generation (or any older one); a release of
    /// a part not held changes nothing.
    Release,
    /// The gang is restarted whole (docs/gangs.md, "Restart whole"): stop every
    /// task of the job this GM launched here unless a newer generation was
    /// committed here (its members are killed, as by a cancel), give back a part
    /// held for this generation or an older one, and forget that this generation
    /// was committed, so that the next one may be reserved; and take the runs of
    /// the gang's `members` (task, its next run) before the next for void: a
    /// finish of one of them is forgotten, not remembered (they run again).
    /// Of [`crate::gang::ANY_GENERATION`]: see there. Answered `Released`.
    Stop { members: Vec<(TaskId, u32)> },
}

impl GangOp {
    pub fn label(&self) -> &'static str {
        match self {
            GangOp::Reserve { .. } => "reserve",
            GangOp::Commit => "commit",
            GangOp::Release => "release",
            GangOp::Stop { .. } => "stop",
        }
    }
}

/// The LM's answer to one [`GangOp`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GangOutcome {
    /// The part is held for this generation until a commit, a release or expiry.
    Held,
    /// The part was not held: the reason of each request that failed.
    Refused(Vec<(TaskId, RejectReason)>),
    /// A newer generation of this gang was seen here: this one is abandoned.
    Stale { newest: u32 },
    /// The part was launched (a repeated commit is answered so again).
    Committed,
    /// A commit of a generation not held here (it expired, was released, or never
    /// arrived): nothing was launched.
    NotHeld,
    /// The part is given back (or was not held).
    Released,
}

impl GangOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            GangOutcome::Held => "held",
            GangOutcome::Refused(_) => "refused",
            GangOutcome::Stale { .. } => "stale",
            GangOutcome::Committed => "committed",
            GangOutcome::NotHeld => "not_held",
            GangOutcome::Released => "released",
        }
    }
}

/// One step of a gang's transaction for one LM's part. A gang is its job: one GM
/// owns it, so (`gm`, `job`) names it at every LM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangRequest {
    pub gm: GmId,
    /// The sending GM's life ([`super::LaunchBatch::life`]): refused by an LM that
    /// has seen a newer one.
    pub life: u64,
    pub lm: LmId,
    pub job: JobId,
    /// The attempt: increases with every reserve round of the gang. An LM holds at
    /// most one generation of a gang and refuses one older than the newest it saw.
    pub generation: u32,
    pub op: GangOp,
}

/// The LM's answer to a [`GangRequest`], with its state piggybacked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangAnswer {
    pub lm: LmId,
    pub gm: GmId,
    pub job: JobId,
    pub generation: u32,
    /// What the request was ([`GangOp::label`]).
    pub op: String,
    pub outcome: GangOutcome,
    pub snapshot: LmSnapshot,
}
