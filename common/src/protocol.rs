//! The protocol: one message enum per direction between the roles.
//!
//! | direction | enum | carried by |
//! | --- | --- | --- |
//! | GM -> LM | [`GmToLm`] | HTTP (bincode, [`crate::codec`]) |
//! | LM -> GM | [`LmToGm`] | HTTP answers, the broker (state, requeues) |
//! | LM -> worker | [`LmToWorker`] | HTTP (bincode) |
//! | worker -> LM | [`WorkerToLm`] | HTTP (bincode) |
//! | client -> GM | [`ClientToGm`] | the public JSON API |
//!
//! Each core takes one of these (wrapped in its own input enum with its timers) in
//! `step(now, input)` and returns the ones it sends, addressed, in its effects. A
//! driver (the simulator, the embedded mode, the services) moves them without
//! knowing their variants: a new message is a variant here and a handler in the
//! receiving core. What the drivers need to know of a message (the tasks it names
//! and what it says of each, its log lines, its class under a broker backlog) are
//! facts on these enums ([`facts`]), so that their only exhaustive matches are the
//! cores' handlers and this module's. The payload structs live in
//! [`crate::messages`].

pub mod facts;

use crate::dag::JobDag;
use crate::messages::{
    CancelRequest, CancelResponse, GangAnswer, GangRequest, KillTask, LaunchBatch, LaunchResponse,
    LmSnapshot, PreemptRequest, PreemptResponse, PreemptedTasks, PromoteTask, ReconcileRequest,
    ReconcileResponse, StartTask, TasksEnded, TasksStarted, WorkerReport,
};
use crate::retry::RetryPolicy;
use crate::{GmId, JobId, LmId, NodeId, TaskId, TaskSpec};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The labels of [`GmToLm::kind`] and [`LmToGm::kind`] (logs, metrics labels,
/// [`KindCounts`]).
pub mod kind {
    pub const LAUNCH: &str = "launch";
    pub const PREEMPT: &str = "preempt";
    pub const CANCEL: &str = "cancel";
    pub const RECONCILE: &str = "reconcile";
    pub const GANG: &str = "gang";
    pub const LAUNCH_ANSWER: &str = "launch_answer";
    pub const PREEMPT_ANSWER: &str = "preempt_answer";
    pub const STATE: &str = "state";
    pub const REQUEUE: &str = "requeue";
    pub const ENDED: &str = "ended";
    pub const STARTED: &str = "started";
    pub const CANCEL_ANSWER: &str = "cancel_answer";
    pub const RECONCILE_ANSWER: &str = "reconcile_answer";
    pub const GANG_ANSWER: &str = "gang_answer";
}

/// GM -> LM requests. The LM validates each against its authoritative state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GmToLm {
    /// Launch (or repartition) requests for this LM, numbered per (GM, LM).
    Launch(LaunchBatch),
    /// Fairness: preempt tasks of a queue over its share, then launch a task.
    Preempt(PreemptRequest),
    /// A cancelled job: stop its tasks this GM launched here.
    Cancel(CancelRequest),
    /// A restarted GM asks which of its tasks this LM holds or finished.
    Reconcile(ReconcileRequest),
    /// A step of a gang's transaction: reserve, commit or release one LM's part.
    Gang(GangRequest),
}

impl GmToLm {
    /// The LM the message is for.
    pub fn lm(&self) -> LmId {
        match self {
            GmToLm::Launch(b) => b.lm,
            GmToLm::Preempt(p) => p.lm,
            GmToLm::Cancel(c) => c.lm,
            GmToLm::Reconcile(r) => r.lm,
            GmToLm::Gang(g) => g.lm,
        }
    }

    /// The GM the message is from.
    pub fn gm(&self) -> GmId {
        match self {
            GmToLm::Launch(b) => b.gm,
            GmToLm::Preempt(p) => p.gm,
            GmToLm::Cancel(c) => c.gm,
            GmToLm::Reconcile(r) => r.gm,
            GmToLm::Gang(g) => g.gm,
        }
    }

    /// A short snake_case name (logs, metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            GmToLm::Launch(_) => kind::LAUNCH,
            GmToLm::Preempt(_) => kind::PREEMPT,
            GmToLm::Cancel(_) => kind::CANCEL,
            GmToLm::Reconcile(_) => kind::RECONCILE,
            GmToLm::Gang(_) => kind::GANG,
        }
    }

    /// The tasks the request places (a launch batch's, a preemption's task); none for
    /// a cancel or a reconcile, which place nothing.
    pub fn placed_tasks(&self) -> Vec<TaskId> {
        match self {
            GmToLm::Launch(b) => b.requests.iter().map(|r| r.task.id).collect(),
            GmToLm::Preempt(p) => vec![p.task.id],
            GmToLm::Gang(g) => match &g.op {
                crate::messages::GangOp::Reserve { requests, .. } => {
                    requests.iter().map(|r| r.task.id).collect()
                }
                crate::messages::GangOp::Commit
                | crate::messages::GangOp::Release
                | crate::messages::GangOp::Stop { .. } => Vec::new(),
            },
            GmToLm::Cancel(_) | GmToLm::Reconcile(_) => Vec::new(),
        }
    }

    /// Whether the request places work (a launch or a preemption), which a stopped
    /// GM must not send.
    pub fn places_work(&self) -> bool {
        match self {
            GmToLm::Launch(_) | GmToLm::Preempt(_) => true,
            GmToLm::Gang(g) => !matches!(
                g.op,
                crate::messages::GangOp::Release | crate::messages::GangOp::Stop { .. }
            ),
            GmToLm::Cancel(_) | GmToLm::Reconcile(_) => false,
        }
    }

    /// The request in a log line: "launch batch 3 (12 tasks) to lm1", "preemption
    /// for 7.0 to lm0".
    pub fn describe(&self) -> String {
        match self {
            GmToLm::Launch(b) => format!(
                "launch batch {} ({} tasks) to {}",
                b.seq,
                b.requests.len(),
                b.lm
            ),
            GmToLm::Preempt(p) => format!("preemption for {} to {}", p.task.id, p.lm),
            GmToLm::Cancel(c) => format!("cancel of {} to {}", c.job, c.lm),
            GmToLm::Reconcile(r) if !r.preempts.is_empty() => format!(
                "ask about {} held preemption requests to {}",
                r.preempts.len(),
                r.lm
            ),
            GmToLm::Reconcile(r) => {
                format!("reconcile of {} tasks with {}", r.tasks.len(), r.lm)
            }
            GmToLm::Gang(g) => format!(
                "gang {} of {} generation {} to {}",
                g.op.label(),
                g.job,
                g.generation,
                g.lm
            ),
        }
    }
}

/// How a driver carries an LM's message to its GM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LmRoute {
    /// The answer to the GM's request that is being handled: it goes back on that
    /// request's reply.
    Answer,
    /// The LM's state: published (to every GM).
    State,
    /// One of the LM's own messages (requeues, starts, ends): on the addressee's
    /// ordered stream, retried until delivered.
    Stream,
}

/// LM -> GM: answers to requests (with the LM's state piggybacked), heartbeats and
/// preempted tasks handed back to the GM that owns their queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LmToGm {
    LaunchAnswer(LaunchResponse),
    /// Boxed, as `CancelAnswer` and `GangAnswer`: rare (fairness), and inline it
    /// made every message larger than the common launch answer.
    PreemptAnswer(Box<PreemptResponse>),
    /// The LM's periodic state (heartbeat), for every GM.
    State(LmSnapshot),
    /// Tasks of the GM's queues the LM preempted: queue them again.
    Requeue(PreemptedTasks),
    /// Tasks the GM launched that finished or failed at their workers.
    Ended(TasksEnded),
    /// Tasks the GM launched that started at their workers.
    Started(TasksStarted),
    CancelAnswer(Box<CancelResponse>),
    ReconcileAnswer(ReconcileResponse),
    /// The answer to a step of a gang's transaction (boxed, as above).
    GangAnswer(Box<GangAnswer>),
}

impl LmToGm {
    /// The snapshot the message carries, if any (answers piggyback one).
    pub fn snapshot(&self) -> Option<&LmSnapshot> {
        match self {
            LmToGm::LaunchAnswer(r) => Some(&r.snapshot),
            LmToGm::PreemptAnswer(r) => Some(&r.snapshot),
            LmToGm::State(s) => Some(s),
            LmToGm::CancelAnswer(r) => Some(&r.snapshot),
            LmToGm::GangAnswer(r) => Some(&r.snapshot),
            LmToGm::Requeue(_)
            | LmToGm::Ended(_)
            | LmToGm::Started(_)
            | LmToGm::ReconcileAnswer(_) => None,
        }
    }

    /// The GM the message is for.
    pub fn to(&self) -> GmAddress {
        match self {
            LmToGm::LaunchAnswer(r) => GmAddress::One(r.gm),
            LmToGm::PreemptAnswer(r) => GmAddress::One(r.gm),
            LmToGm::State(_) => GmAddress::All,
            LmToGm::Requeue(p) => GmAddress::One(p.gm),
            LmToGm::Ended(e) => GmAddress::One(e.gm),
            LmToGm::Started(s) => GmAddress::One(s.gm),
            LmToGm::CancelAnswer(r) => GmAddress::One(r.gm),
            LmToGm::ReconcileAnswer(r) => GmAddress::One(r.gm),
            LmToGm::GangAnswer(r) => GmAddress::One(r.gm),
        }
    }

    /// The LM the message is from.
    pub fn lm(&self) -> LmId {
        match self {
            LmToGm::LaunchAnswer(r) => r.lm,
            LmToGm::PreemptAnswer(r) => r.lm,
            LmToGm::State(s) => s.lm,
            LmToGm::Requeue(p) => p.lm,
            LmToGm::Ended(e) => e.lm,
            LmToGm::Started(s) => s.lm,
            LmToGm::CancelAnswer(r) => r.lm,
            LmToGm::ReconcileAnswer(r) => r.lm,
            LmToGm::GangAnswer(r) => r.lm,
        }
    }

    /// How a driver carries the message.
    pub fn route(&self) -> LmRoute {
        match self {
            // The final answer to a held request: the request's reply has gone.
            LmToGm::PreemptAnswer(r) if r.held => LmRoute::Stream,
            LmToGm::LaunchAnswer(_)
            | LmToGm::PreemptAnswer(_)
            | LmToGm::CancelAnswer(_)
            | LmToGm::ReconcileAnswer(_)
            | LmToGm::GangAnswer(_) => LmRoute::Answer,
            LmToGm::State(_) => LmRoute::State,
            LmToGm::Requeue(_) | LmToGm::Ended(_) | LmToGm::Started(_) => LmRoute::Stream,
        }
    }

    /// The tasks whose placement an answer settles (a launch answer's outcomes, a
    /// preemption answer's task); none for the other messages.
    pub fn answered_tasks(&self) -> Vec<TaskId> {
        match self {
            LmToGm::LaunchAnswer(r) => r.outcomes.iter().map(|(t, _)| *t).collect(),
            LmToGm::PreemptAnswer(r) => vec![r.task],
            LmToGm::State(_)
            | LmToGm::Requeue(_)
            | LmToGm::Ended(_)
            | LmToGm::Started(_)
            | LmToGm::CancelAnswer(_)
            | LmToGm::ReconcileAnswer(_)
            | LmToGm::GangAnswer(_) => Vec::new(),
        }
    }

    /// Whether `gm` should take this message.
    pub fn is_for(&self, gm: GmId) -> bool {
        match self.to() {
            GmAddress::One(one) => one == gm,
            GmAddress::All => true,
        }
    }

    /// A short snake_case name (logs, metrics labels): [`kind`].
    pub fn kind(&self) -> &'static str {
        match self {
            LmToGm::LaunchAnswer(_) => kind::LAUNCH_ANSWER,
            LmToGm::PreemptAnswer(_) => kind::PREEMPT_ANSWER,
            LmToGm::State(_) => kind::STATE,
            LmToGm::Requeue(_) => kind::REQUEUE,
            LmToGm::Ended(_) => kind::ENDED,
            LmToGm::Started(_) => kind::STARTED,
            LmToGm::CancelAnswer(_) => kind::CANCEL_ANSWER,
            LmToGm::ReconcileAnswer(_) => kind::RECONCILE_ANSWER,
            LmToGm::GangAnswer(_) => kind::GANG_ANSWER,
        }
    }
}

/// LM -> worker orders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LmToWorker {
    Start(StartTask),
    Kill(KillTask),
    Promote(PromoteTask),
}

impl LmToWorker {
    /// The node the order is for.
    pub fn node(&self) -> NodeId {
        match self {
            LmToWorker::Start(s) => s.node,
            LmToWorker::Kill(k) => k.node,
            LmToWorker::Promote(p) => p.node,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            LmToWorker::Start(_) => "start",
            LmToWorker::Kill(_) => "kill",
            LmToWorker::Promote(_) => "promote",
        }
    }
}

/// Worker -> LM. (Registration, with the slot and the URL to call back, is the
/// services' handshake: the cores never see addresses.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerToLm {
    /// A task started, finished, or was killed on the node.
    Report(WorkerReport),
}

impl WorkerToLm {
    pub fn node(&self) -> NodeId {
        match self {
            WorkerToLm::Report(r) => r.node(),
        }
    }
}

/// Client -> GM requests (the public API's operations that change state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientToGm {
    /// Queue tasks (of one job) for placement, in order, under the GM's default
    /// retry policy.
    Submit(Vec<TaskSpec>),
    /// Queue tasks of one job with the job's retry policy; with a DAG, only the
    /// tasks of stages without parents are queued at once (see [`crate::dag`]).
    SubmitJob {
        tasks: Vec<TaskSpec>,
        retry: RetryPolicy,
        #[serde(default)]
        dag: Option<Arc<JobDag>>,
    },
    /// Cancel a job: its queued tasks leave the queues, the LMs stop the others.
    Cancel(JobId),
    /// Queue the tasks of one job as a gang ([`crate::gang`]): they start together
    /// (at least `gang.min_members` of them) or not at all.
    SubmitGang {
        tasks: Vec<TaskSpec>,
        retry: RetryPolicy,
        gang: crate::gang::GangSpec,
    },
}
// LRA submissions are typed by the `lra-placer` crate (tags, placement constraints)
// and enter the designated GM's core as its own input, `GmInput::SubmitLra`.

/// Where an LM's message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GmAddress {
    One(GmId),
    /// Every GM (heartbeats).
    All,
}

impl std::fmt::Display for GmAddress {
    /// `gm3`, or `every GM`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GmAddress::One(gm) => gm.fmt(f),
            GmAddress::All => f.write_str("every GM"),
        }
    }
}
