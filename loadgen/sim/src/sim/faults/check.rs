//! The invariants: what every event must keep true, and what must hold once the faults
//! stopped and the cluster had a quiet period. A broken one is a [`Violation`]; a
//! liveness failure that is exactly a missing feature of issue 14 is a [`Known`]
//! issue instead (kept, counted and listed, so the check passes once the feature
//! lands and `strict` turns it back into a violation).

use common::events::{TaskEvent, TaskEventKind};
use common::messages::TaskEnd;
use common::{LmId, Micros, NodeId, TaskId};
use std::collections::{BTreeMap, HashMap};

mod known;
mod violation;
pub use known::Known;
pub use violation::{Invariant, Violation};

/// How a task ended, as one party tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Finished,
    Failed,
    Unplaceable,
}

impl Ending {
    fn of_end(end: &TaskEnd) -> Ending {
        match end.failure {
            None => Ending::Finished,
            Some(_) => Ending::Failed,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Track {
    owner: u16,
    /// Where the event stream last saw it start.
    started_on: Option<(LmId, NodeId)>,
    /// The event stream's end.
    ended: Option<Ending>,
    /// The owning GM's end (from the LM's `Ended` message).
    gm_ended: Option<Ending>,
    launched: bool,
    known: Option<Known>,
    /// Adopted by a restarted LM.
    adopted: bool,
    /// Asked for again by a batch resent after its LM restarted.
    resent: bool,
    /// Resubmitted from its GM's journal.
    resubmitted: bool,
    /// Resubmitted after a failed run its GM had not heard: the resumed run is
    /// that failure's retry, if it starts (the GM withdraws it when the failure
    /// arrives first and spent the job's retry budget).
    retry_unheard: bool,
    /// Its end may be published twice (observers drop the repeat): ended
    /// finished by its GM on an LM's word (the reconcile exchange), or published
    /// again by a restarted LM that learned it from the worker.
    repeat_allowed: bool,
    /// A finish published late, after its GM retried the task: it may be that of
    /// a run declared lost ([`Known::LostWhileAlive`]).
    late_finish: bool,
    /// An LM declared its current run lost (a verdict the GM publishes when it
    /// takes it): a GM restarted from its journal may resume the task before it
    /// hears the verdict, and a finish of that run is then a late one.
    declared_lost: bool,
    /// Runs after a failure (its job's retry policy).
    retries: u32,
    /// When its GM last decided to run it again.
    retried_at: Option<Micros>,
    /// The last end its GM took (node, time): a repeat is the same end.
    last_gm_end: Option<(NodeId, Micros)>,
}

/// What the invariants remember about tasks; fed by the driver.
#[derive(Debug, Default)]
pub struct Checker {
    tasks: BTreeMap<TaskId, Track>,
    /// Known causes count as violations.
    pub strict: bool,
    /// Safety failures with a known cause met so far, per cause.
    excused: BTreeMap<Known, u32>,
}

/// An invariant broke: which, and what exactly.
pub type Broken = (Invariant, String);

/// The task a violation is about: the first `task <id>` its detail names.
pub fn task_of(detail: &str) -> Option<TaskId> {
    let at = detail.find("task ")?;
    let id = detail[at + 5..].split([' ', ';', ',']).next()?;
    let (job, index) = id.split_once('.')?;
    Some(TaskId::new(job.parse().ok()?, index.parse().ok()?))
}

impl Checker {
    /// A GM accepted the task into its queue.
    pub fn accepted(&mut self, task: TaskId, gm: u16) {
        self.tasks.entry(task).or_default().owner = gm;
    }

    pub fn accepted_tasks(&self) -> usize {
        self.tasks.len()
    }

    pub fn ended(&self, task: &TaskId) -> bool {
        self.tasks.get(task).is_some_and(|t| t.ended.is_some())
    }

    pub fn launched(&self, task: &TaskId) -> bool {
        self.tasks.get(task).is_some_and(|t| t.launched)
    }

    /// Tasks accepted by `gm` that have not ended.
    pub fn open_of(&self, gm: u16) -> Vec<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.owner == gm && t.ended.is_none())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Tasks accepted by `gm` whose end it has not heard (what its journal resubmits
    /// after a restart).
    pub fn open_at_gm(&self, gm: u16) -> Vec<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.owner == gm && t.gm_ended.is_none())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Marks a task whose failure to end would be the known issue `why` (the first
    /// reason sticks, except that an end lost with its LM is the root cause of
    /// whatever follows: nothing remembers how the task ended).
    pub fn mark_known(&mut self, task: TaskId, why: Known) {
        if let Some(t) = self.tasks.get_mut(&task) {
            if why == Known::LmCrashLostEnd {
                t.known = Some(why);
            } else if t.ended.is_none() {
                t.known.get_or_insert(why);
            }
        }
    }

    /// A restarted LM adopted the task from its worker.
    pub fn adopted(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.adopted = true;
        }
    }

    /// A batch resent after its LM restarted asks for the task again.
    pub fn resent(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.resent = true;
        }
    }

    /// The task failed and its GM runs it again (its job's retry policy): its end was
    /// not its last.
    pub fn retrying(&mut self, task: TaskId, now: Micros) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.retried_at = Some(now);
            t.ended = None;
            t.gm_ended = None;
            t.started_on = None;
            t.retries += 1;
        }
    }

    /// Its gang was restarted whole: its run so far is void (the driver drops
    /// that run's reports), it runs again with its gang.
    pub fn gang_restarted(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.ended = None;
            t.gm_ended = None;
            t.started_on = None;
            t.launched = false;
            t.last_gm_end = None;
        }
    }

    /// A restarted GM resubmitted the task from its journal. After a failed run
    /// whose end the GM had not heard, the resumed run is that failure's retry
    /// (the job's policy allows it: the resumed run counts against its budget once
    /// the end arrives); anything else that runs it again is a journal rerun.
    pub fn resubmitted(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            if t.ended == Some(Ending::Failed) {
                t.retry_unheard = true;
            } else if !t.declared_lost {
                // (A run declared lost: the resumed run is its retry.)
                t.resubmitted = true;
            }
        }
    }

    /// Whether a GM resubmitted the task from its journal.
    pub fn was_resubmitted(&self, task: &TaskId) -> bool {
        self.tasks.get(task).is_some_and(|t| t.resubmitted)
    }

    /// Whether the GM decided to run the task again after `since`.
    pub fn retried_since(&self, task: &TaskId, since: Micros) -> bool {
        self.tasks
            .get(task)
            .and_then(|t| t.retried_at)
            .is_some_and(|at| at > since)
    }

    /// Whether the task is a run after a failure.
    pub fn is_retry(&self, task: &TaskId) -> bool {
        self.tasks.get(task).is_some_and(|t| t.retries > 0)
    }

    /// The known cause of the task running again, if any.
    pub fn rerun_cause(&self, task: &TaskId) -> Option<Known> {
        let t = self.tasks.get(task)?;
        if t.known == Some(Known::LmCrashLostEnd) {
            // Its end died with its LM, and no worker remembers it: the restarted
            // LM, asked by the GM, knows nothing of it (and reports the run lost),
            // or the GM resubmits it from its journal.
            Some(Known::LmCrashLostEnd)
        } else if t.resent {
            Some(Known::ResentBatchRerun)
        } else if t.resubmitted {
            Some(Known::JournalRerun)
        } else if t.late_finish {
            Some(Known::LostWhileAlive)
        } else {
            None
        }
    }

    /// A failure with a known cause: counted, or (strict) the violation.
    pub fn excuse(&mut self, why: Known, broken: Broken) -> Result<(), Broken> {
        if self.strict {
            return Err((broken.0, format!("{} [known: {why}]", broken.1)));
        }
        *self.excused.entry(why).or_insert(0) += 1;
        Ok(())
    }

    /// The event stream (every LM's lifecycle events).
    pub fn event(&mut self, event: &TaskEvent) -> Result<(), Broken> {
        let Some(t) = self.tasks.get_mut(&event.task) else {
            return Ok(());
        };
        let task = event.task;
        let end = match &event.kind {
            TaskEventKind::Launched { .. } => {
                t.launched = true;
                return Ok(());
            }
            _ if t.ended == Some(Ending::Failed) && t.retry_unheard => {
                // The resumed run (it starts, or ends without starting), retrying
                // the failure its GM had not heard: the failure was not the last end.
                t.retry_unheard = false;
                t.ended = None;
                t.gm_ended = None;
                t.retries += 1;
                return self.event(event);
            }
            TaskEventKind::Started { lm, node } => {
                if let Some(ended) = t.ended {
                    let broken = (
                        Invariant::RanTwice,
                        format!("task {task} started on {lm}/{node} after it ended ({ended:?})"),
                    );
                    return match self.rerun_cause(&task) {
                        Some(why) => self.excuse(why, broken),
                        None => Err(broken),
                    };
                }
                t.launched = true;
                t.started_on = Some((*lm, *node));
                return Ok(());
            }
            TaskEventKind::Finished { .. } => Ending::Finished,
            TaskEventKind::Failed { .. } => Ending::Failed,
            _ => return Ok(()),
        };
        if let Some(before) = t.ended {
            if before == end && t.repeat_allowed {
                t.repeat_allowed = false; // the GM's copy of the same end, once
                return Ok(());
            }
            let invariant = if before == end {
                Invariant::RanTwice
            } else {
                Invariant::TerminalDisagrees
            };
            let broken = (
                invariant,
                format!("task {task} ended twice in the event stream: {before:?} then {end:?}"),
            );
            return match self.rerun_cause(&task) {
                Some(why) => {
                    self.excuse(why, broken)?;
                    // A run declared lost that finished after all: the finish is
                    // the truth, and its GM may take it as the task's end.
                    if why == Known::LostWhileAlive && end == Ending::Finished {
                        if let Some(t) = self.tasks.get_mut(&task) {
                            t.ended = Some(end);
                        }
                    }
                    Ok(())
                }
                None => Err(broken),
            };
        }
        t.ended = Some(end);
        Ok(())
    }

    /// A GM placed nothing for a task and never will.
    pub fn unplaceable(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.ended.get_or_insert(Ending::Unplaceable);
            t.gm_ended.get_or_insert(Ending::Unplaceable);
        }
    }

    /// An LM declared the current run of `task` lost (its verdict, on its way to
    /// the GM, which publishes it if it takes it).
    pub fn verdict_lost(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.declared_lost = true;
        }
    }

    /// A restarted LM publishes the end of `task`, which its worker reported: the
    /// life that saw it end may have published it already.
    pub fn may_repeat_end(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.repeat_allowed = true;
            // After a retry, or after the run was declared lost (without one):
            // the finish of a run its LM had given up on.
            t.late_finish |= t.retries > 0 || t.ended == Some(Ending::Failed) || t.declared_lost;
        }
    }

    /// Whether a GM ended `task` (for good, as far as the checker knows).
    pub fn gm_has_ended(&self, task: TaskId) -> bool {
        self.tasks.get(&task).is_some_and(|t| t.gm_ended.is_some())
    }

    /// A GM publishes a failure of `task` a worker listed to a restarted LM: the
    /// LM life that saw it may have published it already (an observer drops the
    /// repeat).
    pub fn may_repeat_failure(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.repeat_allowed |= t.ended == Some(Ending::Failed);
        }
    }

    /// A GM ends `task` finished because an LM remembers it so (the reconcile
    /// exchange of a restarted GM, or with a restarted LM): not compared with the
    /// event stream, which may not have it yet (or ever: the LM life that saw it
    /// may have died before publishing); the GM publishes it too.
    pub fn gm_ended_by_reconcile(&mut self, task: TaskId) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.gm_ended = Some(Ending::Finished);
            t.repeat_allowed = true;
            // The GM publishes it: the previous LM life may have died before
            // its own event reached the broker.
            t.ended.get_or_insert(Ending::Finished);
        }
    }

    pub fn gm_ended(&mut self, gm: u16, ends: &[TaskEnd]) -> Result<(), Broken> {
        for end in ends {
            let Some(t) = self.tasks.get_mut(&end.task) else {
                continue;
            };
            let ending = Ending::of_end(end);
            // The same end again (a resent `Ended`): the GM takes it once.
            let key = (end.node, end.at);
            if t.last_gm_end == Some(key) {
                continue;
            }
            if t.owner != gm {
                let broken = (
                    Invariant::TerminalDisagrees,
                    format!(
                        "gm{gm} was told task {} ended; gm{} owns it",
                        end.task, t.owner
                    ),
                );
                if !t.adopted {
                    return Err(broken);
                }
                t.known.get_or_insert(Known::AdoptedEndToWrongGm);
                self.excuse(Known::AdoptedEndToWrongGm, broken)?;
                continue;
            }
            match t.ended {
                Some(e) if e == ending => {}
                other if t.resent || t.resubmitted || t.known == Some(Known::LmCrashLostEnd) => {
                    let broken = (
                        Invariant::TerminalDisagrees,
                        format!(
                            "gm{gm} says task {} {ending:?}; the event stream says {other:?}",
                            end.task
                        ),
                    );
                    // The same order as `rerun_cause`: an end lost with its LM first.
                    let why = if t.known == Some(Known::LmCrashLostEnd) {
                        Known::LmCrashLostEnd
                    } else if t.resent {
                        Known::ResentBatchRerun
                    } else {
                        Known::JournalRerun
                    };
                    // The GM heard an end all the same (that of another run).
                    t.gm_ended = Some(ending);
                    t.last_gm_end = Some(key);
                    self.excuse(why, broken)?;
                    continue;
                }
                other => {
                    return Err((
                        Invariant::TerminalDisagrees,
                        format!(
                            "gm{gm} says task {} {ending:?}; the event stream says {other:?}",
                            end.task
                        ),
                    ))
                }
            }
            if let Some(before) = t.gm_ended.filter(|b| *b != ending) {
                return Err((
                    Invariant::TerminalDisagrees,
                    format!(
                        "gm{gm} was told task {} {before:?} then {ending:?}",
                        end.task
                    ),
                ));
            }
            t.gm_ended = Some(ending);
            t.last_gm_end = Some(key);
        }
        Ok(())
    }

    /// Liveness after the quiet period: every accepted task ended, at the event
    /// stream and at its GM. Returns the first unexplained failure and the known
    /// ones, counted per reason.
    pub fn liveness(&self, strict: bool) -> (Option<Broken>, BTreeMap<Known, u32>) {
        let mut known = self.excused.clone();
        for (id, t) in &self.tasks {
            let problem = match (t.ended, t.gm_ended) {
                (Some(_), Some(_)) => continue,
                (None, _) => format!(
                    "task {id} of gm{} never ended (last started on {:?}, launched {})",
                    t.owner, t.started_on, t.launched
                ),
                (Some(e), None) => {
                    format!("task {id} ended {e:?} but its gm{} never heard", t.owner)
                }
            };
            match t.known {
                Some(k) if !strict => *known.entry(k).or_insert(0) += 1,
                Some(k) => {
                    return (
                        Some((Invariant::Liveness, format!("{problem} [known: {k}]"))),
                        known,
                    )
                }
                None => return (Some((Invariant::Liveness, problem)), known),
            }
        }
        (None, known)
    }

    /// Counts of tasks finished and failed per the event stream.
    pub fn outcomes(&self) -> (u64, u64) {
        let mut finished = 0;
        let mut failed = 0;
        for t in self.tasks.values() {
            match t.ended {
                Some(Ending::Finished) => finished += 1,
                Some(Ending::Failed | Ending::Unplaceable) => failed += 1,
                None => {}
            }
        }
        (finished, failed)
    }
}

/// The two "at every event" checks over the roles' states: no node over-committed at
/// its LM, no task on two workers.
pub fn running_once<'a>(
    running: impl Iterator<Item = (u32, &'a [worker_core::RunningTask])>,
) -> Result<(), Broken> {
    let mut seen: HashMap<TaskId, u32> = HashMap::new();
    for (w, tasks) in running {
        for r in tasks {
            if let Some(other) = seen.insert(r.task, w) {
                return Err((
                    Invariant::RanTwice,
                    format!("task {} runs on w{other} and w{w} at once", r.task),
                ));
            }
        }
    }
    Ok(())
}

/// No node's allocations at `lm` exceed its capacity.
pub fn not_over_committed(lm: &lm_core::LocalMaster) -> Result<(), Broken> {
    let topology = lm.topology();
    let mut used = vec![common::Resources::default(); topology.node_count()];
    for a in lm.running().values() {
        if let Some(u) = used.get_mut(a.node.index()) {
            *u = u.add(&a.resources);
        }
    }
    for (n, u) in used.iter().enumerate() {
        if !topology.capacity[n].fits(u) {
            return Err((
                Invariant::OverCommitted,
                format!(
                    "{} node {n}: allocations {u:?} exceed capacity {:?}",
                    lm.id(),
                    topology.capacity[n]
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
