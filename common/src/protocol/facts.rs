//! What a driver needs to know of a message without matching its variants: the
//! tasks it names and what it says of each, the lines worth logging about it, its
//! class under a broker backlog, a compact line for a simulator's history, the ends
//! its GM publishes.
//!
//! The services' shells and both simulators read these facts; the only exhaustive
//! matches on [`GmToLm`] and [`LmToGm`] outside this module are the receiving cores'
//! handlers, where a message has its meaning. A new message adds its arms here (the
//! compiler points to each) and nothing in the drivers, unless it says something of
//! a task no [`TaskFact`] says yet.

use crate::messages::{
    EndsPublished, GangOp, GangOutcome, LaunchOutcome, Placement, PreemptOutcome, PreemptRefusal,
    TaskEnd, TasksEnded,
};
use crate::protocol::{GmToLm, LmToGm};
use crate::reasons::RejectReason;
use crate::{Micros, NodeId, TaskId, TaskSpec};
use std::collections::BTreeMap;

/// How loud a [`Note`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
}

/// A line a driver logs about a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub level: Level,
    pub text: String,
}

fn note(level: Level, text: String) -> Note {
    Note { level, text }
}

/// Which end of a message logs a [`Note`]: its sender or its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
}

/// What a GM's request asks of a task it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Launch it (a launch batch's request).
    Launch,
    /// Launch it by preempting a victim.
    Preempt,
    /// Reserve room for it, a member of a gang.
    GangReserve,
}

/// What an LM's message says of one task it names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TaskFact<'a> {
    /// Launched (on a repartitioned node: `repartition`).
    Launched { repartition: bool },
    /// Its launch refused.
    Rejected(&'a RejectReason),
    /// Launched by preempting `victims` tasks on `node`.
    PreemptedToLaunch { node: NodeId, victims: usize },
    /// Its preemption refused.
    PreemptRefused(&'a PreemptRefusal),
    /// Its preemption held for room that frees by itself, until `until`.
    PreemptHeld { until: Micros },
    /// Preempted, handed back to its GM (to queue `spec` again), with the work it
    /// lost.
    Requeued { spec: &'a TaskSpec, lost: Micros },
    /// Stopped for its job's cancel.
    Cancelled,
    /// Of the cancelled job but launched by another GM: left running.
    NotYours,
    /// Its run ended (finished or failed).
    Ended(&'a TaskEnd),
    /// Its run started.
    Started,
}

/// How an LM whose broker backlog is over its limit treats a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backlog {
    /// Refused, counted with launch batches (it places work as a launch does).
    RefusedAsLaunch,
    /// Refused, counted with preemptions.
    RefusedAsPreemption,
    /// Never refused (it places nothing, or refusing it would break a transaction).
    Taken,
}

/// Messages counted by [`GmToLm::kind`] or [`LmToGm::kind`] (a shell's counters by
/// kind).
#[derive(Clone, Debug, Default)]
pub struct KindCounts(BTreeMap<&'static str, u64>);

impl KindCounts {
    pub fn add(&mut self, kind: &'static str) {
        *self.0.entry(kind).or_default() += 1;
    }

    pub fn get(&self, kind: &str) -> u64 {
        self.0.get(kind).copied().unwrap_or(0)
    }
}

fn list(ids: impl Iterator<Item = TaskId>) -> String {
    ids.map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

impl GmToLm {
    /// Calls `f` with each task the request names and what it asks of it.
    pub fn for_each_task(&self, mut f: impl FnMut(TaskId, Asked)) {
        match self {
            GmToLm::Launch(b) => b.requests.iter().for_each(|r| f(r.task.id, Asked::Launch)),
            GmToLm::Preempt(p) => f(p.task.id, Asked::Preempt),
            GmToLm::Gang(g) => match &g.op {
                GangOp::Reserve { requests, .. } => requests
                    .iter()
                    .for_each(|r| f(r.task.id, Asked::GangReserve)),
                GangOp::Commit | GangOp::Release | GangOp::Stop { .. } => {}
            },
            GmToLm::Cancel(_) | GmToLm::Reconcile(_) => {}
        }
    }

    /// How an LM under broker backlog treats the request.
    pub fn backlog(&self) -> Backlog {
        match self {
            GmToLm::Launch(_) => Backlog::RefusedAsLaunch,
            GmToLm::Preempt(_) => Backlog::RefusedAsPreemption,
            // A reserve places work as a launch does; a gang's commit or release
            // must never be refused (a refused commit would break its gang).
            GmToLm::Gang(g) => match g.op {
                GangOp::Reserve { .. } => Backlog::RefusedAsLaunch,
                GangOp::Commit | GangOp::Release | GangOp::Stop { .. } => Backlog::Taken,
            },
            GmToLm::Cancel(_) | GmToLm::Reconcile(_) => Backlog::Taken,
        }
    }

    /// The lines the sender (the GM) or the receiver (the LM) logs of the request.
    pub fn notes(&self, side: Side) -> Vec<Note> {
        use Level::{Debug, Info, Warn};
        let one = |level, text| vec![note(level, text)];
        match (self, side) {
            (GmToLm::Launch(_), _) => Vec::new(),
            (GmToLm::Preempt(p), Side::Sender) => one(
                Info,
                format!(
                    "asking the LM to preempt (task {}, job {}, victim {})",
                    p.task.id, p.task.id.job.0, p.victim
                ),
            ),
            (GmToLm::Preempt(_), Side::Receiver) => Vec::new(),
            (GmToLm::Cancel(c), Side::Sender) => one(
                Debug,
                format!(
                    "asking the LM to stop a cancelled job's tasks (job {})",
                    c.job.0
                ),
            ),
            (GmToLm::Cancel(_), Side::Receiver) => Vec::new(),
            (GmToLm::Reconcile(r), Side::Sender) if !r.preempts.is_empty() => one(Warn, format!("final answer of held preemption requests overdue: asking the LM whether it still holds them or launched them (their tasks stay out of the queues until it answers) (requests {})", r.preempts.len())),
            (GmToLm::Reconcile(_), Side::Sender) => Vec::new(),
            (GmToLm::Reconcile(r), Side::Receiver) if !r.preempts.is_empty() => one(Info, format!("a GM asks about held preemption requests whose final answer it has not had (gm {}, requests {})", r.gm, r.preempts.len())),
            (GmToLm::Reconcile(r), Side::Receiver) => one(
                Info,
                format!(
                    "a restarted GM asks which of its tasks this LM holds (gm {}, tasks {})",
                    r.gm,
                    r.tasks.len()
                ),
            ),
            (GmToLm::Gang(g), _) => one(
                Debug,
                format!(
                    "gang request (gm {}, job {}, generation {}, op {})",
                    g.gm,
                    g.job.0,
                    g.generation,
                    g.op.label()
                ),
            ),
        }
    }

    /// The request in one compact line naming every task (a simulator's history).
    pub fn trace(&self) -> String {
        match self {
            GmToLm::Launch(b) => format!(
                "launch gm{}->lm{} seq {} [{}]",
                b.gm.0,
                b.lm.0,
                b.seq,
                list(b.requests.iter().map(|r| r.task.id))
            ),
            GmToLm::Preempt(p) => {
                format!("preempt gm{}->lm{} for {}", p.gm.0, p.lm.0, p.task.id)
            }
            GmToLm::Cancel(c) => format!("cancel gm{}->lm{} job {}", c.gm.0, c.lm.0, c.job.0),
            GmToLm::Reconcile(r) => format!(
                "reconcile gm{}->lm{} [{}]",
                r.gm.0,
                r.lm.0,
                list(r.tasks.iter().map(|t| t.0))
            ),
            GmToLm::Gang(g) => format!(
                "gang {} gm{}->lm{} job {} gen {} [{}]",
                g.op.label(),
                g.gm.0,
                g.lm.0,
                g.job.0,
                g.generation,
                list(self.placed_tasks().into_iter())
            ),
        }
    }
}

impl LmToGm {
    /// Calls `f` with each task the message names and what it says of it. (A
    /// gang's answer names no task: it answers for the part as a whole.)
    pub fn for_each_task(&self, mut f: impl FnMut(TaskId, TaskFact<'_>)) {
        match self {
            LmToGm::LaunchAnswer(r) => {
                for (task, outcome) in &r.outcomes {
                    let fact = match outcome {
                        LaunchOutcome::Launched { placement } => TaskFact::Launched {
                            repartition: *placement == Placement::Repartition,
                        },
                        LaunchOutcome::Rejected(reason) => TaskFact::Rejected(reason),
                    };
                    f(*task, fact);
                }
            }
            LmToGm::PreemptAnswer(r) => {
                let fact = match &r.outcome {
                    PreemptOutcome::Launched { node, preempted } => TaskFact::PreemptedToLaunch {
                        node: *node,
                        victims: preempted.len(),
                    },
                    PreemptOutcome::Refused(why) => TaskFact::PreemptRefused(why),
                    PreemptOutcome::Held { until } => TaskFact::PreemptHeld { until: *until },
                };
                f(r.task, fact);
            }
            LmToGm::Requeue(p) => {
                for (spec, lost) in &p.tasks {
                    f(spec.id, TaskFact::Requeued { spec, lost: *lost });
                }
            }
            LmToGm::Ended(e) => e
                .ends
                .iter()
                .for_each(|end| f(end.task, TaskFact::Ended(end))),
            LmToGm::Started(s) => s.starts.iter().for_each(|st| f(st.task, TaskFact::Started)),
            LmToGm::CancelAnswer(r) => {
                r.cancelled.iter().for_each(|t| f(*t, TaskFact::Cancelled));
                r.not_yours.iter().for_each(|t| f(*t, TaskFact::NotYours));
            }
            LmToGm::State(_) | LmToGm::ReconcileAnswer(_) | LmToGm::GangAnswer(_) => {}
        }
    }

    /// The ends the GM publishes itself (not the LM): its driver keeps only those
    /// of runs it holds open, an LM without a link to the GM publishes them itself;
    /// `None` for any other message.
    pub fn ends_gm_publishes(&self) -> Option<&TasksEnded> {
        match self {
            LmToGm::Ended(e) if e.publish != EndsPublished::ByLm => Some(e),
            LmToGm::Ended(_)
            | LmToGm::LaunchAnswer(_)
            | LmToGm::PreemptAnswer(_)
            | LmToGm::State(_)
            | LmToGm::Requeue(_)
            | LmToGm::Started(_)
            | LmToGm::CancelAnswer(_)
            | LmToGm::ReconcileAnswer(_)
            | LmToGm::GangAnswer(_) => None,
        }
    }

    /// [`LmToGm::ends_gm_publishes`], to edit.
    pub fn ends_gm_publishes_mut(&mut self) -> Option<&mut TasksEnded> {
        match self {
            LmToGm::Ended(e) if e.publish != EndsPublished::ByLm => Some(e),
            LmToGm::Ended(_)
            | LmToGm::LaunchAnswer(_)
            | LmToGm::PreemptAnswer(_)
            | LmToGm::State(_)
            | LmToGm::Requeue(_)
            | LmToGm::Started(_)
            | LmToGm::CancelAnswer(_)
            | LmToGm::ReconcileAnswer(_)
            | LmToGm::GangAnswer(_) => None,
        }
    }

    /// The lines the sender (the LM) or the receiver (the GM) logs of the message
    /// as a whole (what it says of each task: [`LmToGm::for_each_task`]).
    pub fn notes(&self, side: Side) -> Vec<Note> {
        use Level::{Debug, Info, Warn};
        match (self, side) {
            (LmToGm::CancelAnswer(r), side) => {
                let mut notes = Vec::new();
                match side {
                    Side::Sender if !r.cancelled.is_empty() => notes.push(note(
                        Info,
                        format!(
                            "cancelled: stopping the job's tasks (job {}, gm {}, tasks {})",
                            r.job.0,
                            r.gm,
                            r.cancelled.len()
                        ),
                    )),
                    Side::Sender => {}
                    Side::Receiver => notes.push(note(
                        Info,
                        format!(
                            "LM answered the cancel (job {}, lm {}, stopped {})",
                            r.job.0,
                            r.lm,
                            r.cancelled.len()
                        ),
                    )),
                }
                if !r.not_yours.is_empty() {
                    notes.push(note(Warn, format!("the LM holds tasks of this job that another GM launched; it left them running (job {}, lm {}, gm {}, tasks {})", r.job.0, r.lm, r.gm, r.not_yours.len())));
                }
                notes
            }
            (LmToGm::ReconcileAnswer(r), side) if !r.preempts.is_empty() => {
                let what = match side {
                    Side::Sender => "answered a GM's ask about a held preemption request (not_held: void here from now on)",
                    Side::Receiver => "LM answered the ask about an overdue held preemption request",
                };
                (r.preempts.iter())
                    .map(|(task, state)| {
                        note(
                            Info,
                            format!(
                                "{what} (task {task}, job {}, lm {}, gm {}, state {})",
                                task.job.0,
                                r.lm,
                                r.gm,
                                state.label()
                            ),
                        )
                    })
                    .collect()
            }
            (LmToGm::ReconcileAnswer(r), Side::Sender) => vec![note(
                Info,
                format!(
                    "told a restarted GM which of its tasks this LM holds (gm {}, held {}, finished {})",
                    r.gm,
                    r.held.len(),
                    r.finished.len()
                ),
            )],
            (LmToGm::ReconcileAnswer(_), Side::Receiver) => Vec::new(),
            (LmToGm::GangAnswer(r), side) => {
                let at = format!("job {}, lm {}, gm {}, generation {}", r.job.0, r.lm, r.gm, r.generation);
                let line = match (&r.outcome, side) {
                    // A request of an abandoned generation, or a commit of a part
                    // not held (expired): nothing was done for it.
                    (GangOutcome::Stale { newest }, Side::Sender) => note(
                        Info,
                        format!("gang request of an abandoned generation ignored ({at}, newest {newest}, op {})", r.op),
                    ),
                    (GangOutcome::NotHeld, Side::Sender) => note(
                        Warn,
                        format!("gang commit of a part not held (expired or released): nothing launched ({at})"),
                    ),
                    (outcome, _) => note(
                        Debug,
                        format!("gang answer ({at}, op {}, outcome {})", r.op, outcome.label()),
                    ),
                };
                vec![line]
            }
            (LmToGm::LaunchAnswer(_), _)
            | (LmToGm::PreemptAnswer(_), _)
            | (LmToGm::State(_), _)
            | (LmToGm::Requeue(_), _)
            | (LmToGm::Ended(_), _)
            | (LmToGm::Started(_), _) => Vec::new(),
        }
    }

    /// The message in one compact line (a simulator's history).
    pub fn trace(&self) -> String {
        match self {
            LmToGm::LaunchAnswer(r) => format!(
                "launch answer lm{} seq {} [{}]",
                r.lm.0,
                r.seq,
                r.outcomes
                    .iter()
                    .map(|(t, o)| match o {
                        LaunchOutcome::Launched { .. } => format!("{t} ok"),
                        LaunchOutcome::Rejected(r) => format!("{t} rejected {r:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            LmToGm::State(s) => format!("state of lm{} v{}", s.lm.0, s.version),
            LmToGm::Ended(e) => format!(
                "ended [{}]",
                e.ends
                    .iter()
                    .map(|x| match &x.failure {
                        None => format!("{}#{} finished", x.task, x.attempt),
                        Some(f) => format!("{}#{} {f}", x.task, x.attempt),
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            LmToGm::PreemptAnswer(_)
            | LmToGm::Requeue(_)
            | LmToGm::Started(_)
            | LmToGm::CancelAnswer(_)
            | LmToGm::ReconcileAnswer(_)
            | LmToGm::GangAnswer(_) => self.kind().to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
