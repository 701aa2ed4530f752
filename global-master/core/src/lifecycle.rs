//! What becomes of a job's tasks after placement, for the GM that owns the job:
//! failed and lost tasks run again under the job's retry policy (after its backoff;
//! time is an input, so the part names the next moment it needs a step), and
//! cancelled jobs are remembered so that nothing of theirs is placed or left running.
//!
//! Only jobs whose policy retries are tracked here (a copy of each task until it ends
//! for good): with the default policy (one attempt) nothing is kept, so trace replay
//! and the simulator pay nothing, but for a task whose run was reported lost (its
//! id, in a bounded memory: a late finish of that run must not end it again).

use crate::queue::Pending;
use common::bounded::Bounded;
use common::messages::{TaskEnd, TaskFailure};
use common::reasons::PendingReason;
use common::retry::RetryPolicy;
use common::{JobId, LmId, Micros, NodeId, TaskId, TaskSpec};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::{BTreeSet, VecDeque};

/// Cancelled jobs remembered (the oldest are forgotten first).
pub const CANCELLED_MEMORY: usize = 100_000;
/// Tasks that ran more than once, or ended with a run reported lost, remembered once
/// they ended for good (the oldest are forgotten first) so that a late report of one
/// of their runs changes nothing.
pub const ENDED_MEMORY: usize = 100_000;
/// A cancel request the transport gave up on is sent again after this long...
pub const CANCEL_RESEND: Micros = Micros(30_000_000);
/// ... at most this many times.
pub const CANCEL_RESENDS: u32 = 10;

/// A failed task that will run again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    pub task: TaskId,
    /// The run to come (2 for the first retry).
    pub attempt: u32,
    /// Runs of the task that failed so far (its job's retry budget spent).
    pub failed: u32,
    /// When it goes back to its queue.
    pub at: Micros,
    pub failure: TaskFailure,
}

#[derive(Debug)]
struct RetryJob {
    policy: RetryPolicy,
    /// Tasks of the job not yet ended for good.
    open: u32,
}

/// What a task's end means to the lifecycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndSeen {
    /// The task ended for good (finished, failed past its retries, or untracked).
    Final,
    /// It failed and will run again.
    Retry(Retry),
    /// The end of a run already replaced by a retry (a late report of a lost run),
    /// or the same end reported again: nothing changes.
    Stale,
    /// The end of a run an earlier life of the GM sent, of a task it resumed as a
    /// later run, that leaves nothing for the resumed run to do: it finished (the
    /// work is done), or its failure spent the job's retry budget (the resumed run
    /// was its retry). The caller withdraws the resumed run if it still waits,
    /// and ends the task ([`Lifecycle::end_for_good`]).
    Earlier,
    /// The finish of a run already replaced by a retry (a run reported lost that
    /// finished after all, e.g. heard from a restarted LM): the work is done. When
    /// the retry has not gone out (`waiting`: it waits for its backoff; or the
    /// caller can withdraw it from its queues), the caller ends the task finished
    /// ([`Lifecycle::end_for_good`]); else it is stale and the retry's own end
    /// ends the task.
    LateFinish { waiting: bool },
    /// The current run failed, but an earlier run finished after it was replaced
    /// (a [`EndSeen::LateFinish`] that came while this run was out): the task's
    /// work is done, it ends finished, as run `run` (issue 33: a run declared lost
    /// while alive finished, its retry was lost too, and the task ended failed).
    DoneEarlier { run: u32 },
}

#[derive(Debug)]
struct Tracked {
    /// The task as its current run goes out ([`TaskSpec::attempt`] is that run).
    spec: TaskSpec,
    /// Runs that failed so far.
    failed: u32,
    /// Waiting for its backoff (in `due`).
    waiting: Option<Micros>,
    /// The last failure seen (node, time): the same end reported twice counts once.
    last_failure: Option<(NodeId, Micros)>,
    failure: Option<TaskFailure>,
    /// Resumed by a restarted GM as this run: runs before it went out in an
    /// earlier life, and one of them that finished did the task's work.
    resumed_as: Option<u32>,
    /// Runs of an earlier life whose failure was counted (bit = run number, runs
    /// beyond 63 share the last bit): each counts once against the budget.
    earlier_failed: u64,
    /// An earlier run that finished after a retry replaced it (see
    /// [`EndSeen::DoneEarlier`]).
    done_by: Option<u32>,
}

#[derive(Debug)]
pub struct Lifecycle {
    default: RetryPolicy,
    jobs: HashMap<JobId, RetryJob>,
    tasks: HashMap<TaskId, Tracked>,
    /// Tasks that had more than one run and ended for good, or ended with a run
    /// reported lost: a report of one of their runs arriving later (a run reported
    /// lost that finished after all, heard once its LM restarted) is stale, not a
    /// second end (issue 33, seed 29743: the task failed past its retries, then a
    /// late finish ended it again).
    ended: Bounded<TaskId>,
    /// Failed tasks waiting for their backoff, by due time.
    due: BTreeSet<(Micros, TaskId)>,
    cancelled: HashSet<JobId>,
    cancel_order: VecDeque<JobId>,
    /// Cancel requests to send again: (when, LM, job).
    resend: BTreeSet<(Micros, LmId, JobId)>,
    /// Per cancel request never answered: how many times it was sent again.
    resends: HashMap<(LmId, JobId), u32>,
}

impl Lifecycle {
    pub fn new(default: RetryPolicy) -> Self {
        Lifecycle {
            default,
            jobs: HashMap::default(),
            tasks: HashMap::default(),
            ended: Bounded::new(ENDED_MEMORY),
            due: BTreeSet::new(),
            cancelled: HashSet::default(),
            cancel_order: VecDeque::new(),
            resend: BTreeSet::new(),
            resends: HashMap::default(),
        }
    }

    /// The policy of jobs submitted without one.
    pub fn default_policy(&self) -> RetryPolicy {
        self.default
    }

    /// A job accepted with `policy`: tracked if the policy retries.
    pub fn submitted(&mut self, tasks: &[TaskSpec], policy: RetryPolicy) {
        if !policy.retries() {
            return;
        }
        for spec in tasks {
            self.track(spec, policy, 0, None);
        }
    }

    /// Tasks a restarted GM runs again (see [`crate::Resumed`]): tracked whatever
    /// their policy, so that a late report of an earlier life's run is stale.
    pub fn resumed(&mut self, tasks: &[(TaskSpec, u32)], policy: RetryPolicy) {
        for (spec, failed) in tasks {
            self.track(spec, policy, *failed, Some(spec.attempt));
        }
    }

    fn track(
        &mut self,
        spec: &TaskSpec,
        policy: RetryPolicy,
        failed: u32,
        resumed_as: Option<u32>,
    ) {
        self.jobs
            .entry(spec.id.job)
            .or_insert(RetryJob { policy, open: 0 })
            .open += 1;
        self.tasks.insert(
            spec.id,
            Tracked {
                spec: spec.clone(),
                failed,
                waiting: None,
                last_failure: None,
                failure: None,
                resumed_as,
                earlier_failed: 0,
                done_by: None,
            },
        );
    }

    /// A gang member's next run is `attempt` (its gang was restarted whole, its
    /// earlier run stopped and void): reports of earlier runs are stale. Counts
    /// no failure.
    pub fn relaunched(&mut self, task: TaskId, attempt: u32) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.spec.attempt = t.spec.attempt.max(attempt);
        }
    }

    /// A task ended at its worker. A failure the policy allows to retry is
    /// scheduled (and returned); the end of a run that is not the task's current one
    /// is stale; anything else ends the task for good.
    pub fn ended(&mut self, now: Micros, end: &TaskEnd) -> EndSeen {
        let Some(tracked) = self.tasks.get_mut(&end.task) else {
            if self.ended.contains(&end.task) {
                return EndSeen::Stale;
            }
            // Untracked (no retries, or a restarted GM's task still in doubt): a
            // run reported lost may still report its finish later (issue 33, seed
            // 67470); the first end stays the task's.
            if matches!(end.failure, Some(TaskFailure::Lost { .. })) {
                self.ended.insert(end.task);
            }
            return EndSeen::Final;
        };
        if end.attempt != tracked.spec.attempt {
            if tracked.resumed_as.is_none_or(|r| end.attempt >= r) {
                if end.failure.is_none() && end.attempt < tracked.spec.attempt {
                    tracked.done_by.get_or_insert(end.attempt);
                    return EndSeen::LateFinish {
                        waiting: tracked.waiting.is_some(),
                    };
                }
                return EndSeen::Stale;
            }
            // A run of an earlier life of the GM: one that finished did the work
            // (its LM answers the resumed run `Duplicate` if it goes there).
            let Some(failure) = &end.failure else {
                return EndSeen::Earlier;
            };
            // One before the last run the previous life may have sent: that life
            // heard its failure and counted it (the failure is what made it send a
            // later run), so this is a repeat, e.g. a failure a worker listed to a
            // restarted LM (issue 33, seed 57133: counted twice, the task ended
            // `failed` with a retry left). A graceful stop's resumed run is the
            // unsent one (`resumed_as` is one lower), so its predecessor's failure
            // may still be counted twice: one retry fewer, never one more.
            if tracked.resumed_as.is_some_and(|r| end.attempt + 1 < r) {
                return EndSeen::Stale;
            }
            // One that failed, unheard by the GM when it resumed the task: the
            // resumed run is its retry, if the budget allows one more run.
            let bit = 1u64 << end.attempt.min(63);
            if tracked.earlier_failed & bit != 0 {
                return EndSeen::Stale;
            }
            tracked.earlier_failed |= bit;
            tracked.failed += 1;
            tracked.failure = Some(failure.clone());
            let policy = self.jobs.get(&end.task.job).map(|j| j.policy);
            return match policy {
                Some(p) if p.retries_after(tracked.failed) => EndSeen::Stale,
                _ => EndSeen::Earlier,
            };
        }
        let Some(failure) = &end.failure else {
            self.finish(end.task);
            return EndSeen::Final;
        };
        if let Some(run) = tracked.done_by {
            self.finish(end.task);
            return EndSeen::DoneEarlier { run };
        }
        if tracked.waiting.is_some() || tracked.last_failure == Some((end.node, end.at)) {
            return EndSeen::Stale; // the same end again
        }
        tracked.last_failure = Some((end.node, end.at));
        tracked.failure = Some(failure.clone());
        tracked.failed += 1;
        let Some(policy) = self.jobs.get(&end.task.job).map(|j| j.policy) else {
            return EndSeen::Final;
        };
        if !policy.retries_after(tracked.failed) {
            self.finish(end.task);
            return EndSeen::Final;
        }
        let at = now + policy.delay(tracked.failed);
        tracked.waiting = Some(at);
        // From now on only the retry's reports count (runs of earlier lives of the
        // GM, resumed, may have used numbers beyond the failures).
        tracked.spec.attempt = tracked.spec.attempt.max(tracked.failed) + 1;
        self.due.insert((at, end.task));
        EndSeen::Retry(Retry {
            task: end.task,
            attempt: tracked.spec.attempt,
            failed: tracked.failed,
            at,
            failure: failure.clone(),
        })
    }

    /// Whether `task` ended for good while a run of it was out (see `ended`): an
    /// answer refusing that run, or giving up its call, must not queue it again
    /// (issue 33, seed 99835: a resumed run in flight when an earlier life's run's
    /// finish ended the task was refused, queued again, and ran).
    pub fn has_ended(&self, task: TaskId) -> bool {
        !self.tasks.contains_key(&task) && self.ended.contains(&task)
    }

    /// Whether a report of run `attempt` of `task` is about a run already replaced
    /// by a retry (untracked tasks have only one run).
    pub fn is_stale(&self, task: TaskId, attempt: u32) -> bool {
        self.tasks
            .get(&task)
            .is_some_and(|t| t.spec.attempt != attempt)
    }

    /// The task can never run (unplaceable): it ends for good.
    pub fn gave_up(&mut self, task: TaskId) {
        if self.tasks.contains_key(&task) {
            self.finish(task);
        }
    }

    /// The task ends for good now (see [`EndSeen::Earlier`]).
    pub fn end_for_good(&mut self, task: TaskId) {
        self.finish(task);
    }

    fn finish(&mut self, task: TaskId) {
        let Some(t) = self.tasks.remove(&task) else {
            return;
        };
        if t.spec.attempt > 1 || t.resumed_as.is_some() {
            self.ended.insert(task);
        }
        if let Some(at) = t.waiting {
            self.due.remove(&(at, task));
        }
        if let Some(job) = self.jobs.get_mut(&task.job) {
            job.open = job.open.saturating_sub(1);
            if job.open == 0 {
                self.jobs.remove(&task.job);
            }
        }
    }

    /// Whether a retry or a cancel resend is due at `now` (the common answer, no,
    /// without building the lists).
    pub fn anything_due(&self, now: Micros) -> bool {
        self.due.first().is_some_and(|&(at, _)| at <= now)
            || self.resend.first().is_some_and(|&(at, _, _)| at <= now)
    }

    /// Failed tasks whose backoff is over, as new queue entries.
    pub fn due_retries(&mut self, now: Micros) -> Vec<Box<Pending>> {
        let mut out = Vec::new();
        while let Some(&(at, task)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            let Some(t) = self.tasks.get_mut(&task) else {
                continue;
            };
            t.waiting = None;
            let failure = match (&t.failure, t.last_failure) {
                (Some(f), Some((node, _))) => format!("{f} (on {node})"),
                _ => String::new(),
            };
            out.push(Box::new(Pending {
                task: t.spec.clone(),
                submitted_at: now,
                attempts: 0,
                reason: Some(PendingReason::Retrying {
                    attempt: t.spec.attempt,
                    failure,
                }),
                preempting: None,
                contended_since: None,
            }));
        }
        out
    }

    /// Cancel requests due to be sent again.
    pub fn due_resends(&mut self, now: Micros) -> Vec<(LmId, JobId)> {
        let mut out = Vec::new();
        while let Some(&(at, lm, job)) = self.resend.first() {
            if at > now {
                break;
            }
            self.resend.pop_first();
            out.push((lm, job));
        }
        out
    }

    /// A cancel request to `lm` was never answered: send it again later, unless it
    /// was sent again [`CANCEL_RESENDS`] times already (false: given up).
    pub fn resend_later(&mut self, now: Micros, lm: LmId, job: JobId) -> bool {
        let resends = self.resends.entry((lm, job)).or_default();
        if *resends >= CANCEL_RESENDS {
            self.resends.remove(&(lm, job));
            return false;
        }
        *resends += 1;
        self.resend.insert((now + CANCEL_RESEND, lm, job));
        true
    }

    /// `lm` answered a cancel request for `job`.
    pub fn cancel_answered(&mut self, lm: LmId, job: JobId) {
        self.resends.remove(&(lm, job));
    }

    /// When the part next needs a step (a backoff or a resend comes due).
    pub fn next_wakeup(&self) -> Option<Micros> {
        let retry = self.due.first().map(|(at, _)| *at);
        let resend = self.resend.first().map(|(at, ..)| *at);
        retry.into_iter().chain(resend).min()
    }

    /// Marks `job` cancelled and forgets its retries. False if it already was.
    pub fn cancel(&mut self, job: JobId) -> bool {
        if !self.cancelled.insert(job) {
            return false;
        }
        self.cancel_order.push_back(job);
        if self.cancel_order.len() > CANCELLED_MEMORY {
            if let Some(old) = self.cancel_order.pop_front() {
                self.cancelled.remove(&old);
            }
        }
        if self.jobs.remove(&job).is_some() {
            self.tasks.retain(|t, _| t.job != job);
            self.due.retain(|(_, t)| t.job != job);
        }
        true
    }

    pub fn is_cancelled(&self, job: JobId) -> bool {
        self.cancelled.contains(&job)
    }

    /// Tasks kept for retries (a gauge).
    pub fn tracked(&self) -> usize {
        self.tasks.len()
    }

    /// Failed tasks waiting for their backoff (a gauge).
    pub fn waiting(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::retry::Backoff;
    use common::Resources;

    /// `task` submitted with a policy of 3 runs.
    fn submit(l: &mut Lifecycle, task: TaskId) {
        let policy = RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::default(),
        };
        let spec = TaskSpec::short(task, Resources::cores(1, 10), Micros(5));
        l.submitted(std::slice::from_ref(&spec), policy);
    }

    fn end(task: TaskId, attempt: u32, at: u64, failure: Option<TaskFailure>) -> TaskEnd {
        TaskEnd {
            used: None,
            task,
            attempt,
            node: NodeId(0),
            at: Micros(at),
            failure,
        }
    }

    /// Issue 33, seed 29743: run 1 reported lost, its two retries failed, the task
    /// failed for good; then run 1's finish arrives (heard from its restarted LM).
    /// It must not end the task a second time, as finished.
    #[test]
    fn a_late_finish_after_the_task_failed_for_good_is_stale() {
        let mut l = Lifecycle::new(RetryPolicy::default());
        let task = TaskId::new(6, 1);
        submit(&mut l, task);
        let lost = TaskFailure::Lost {
            reason: "no word".into(),
        };
        let refused = TaskFailure::StartFailed {
            reason: "refused".into(),
        };
        // Each retry goes out once its backoff is over.
        let later = |at: u64| Micros(at << 30);
        assert!(matches!(
            l.ended(later(1), &end(task, 1, 10, Some(lost))),
            EndSeen::Retry(_)
        ));
        assert_eq!(l.due_retries(later(2)).len(), 1);
        let failure = Some(refused.clone());
        assert!(matches!(
            l.ended(later(3), &end(task, 2, 20, failure)),
            EndSeen::Retry(_)
        ));
        assert_eq!(l.due_retries(later(4)).len(), 1);
        let failure = Some(refused);
        assert_eq!(
            l.ended(later(5), &end(task, 3, 30, failure)),
            EndSeen::Final
        );
        assert_eq!(l.ended(later(6), &end(task, 1, 40, None)), EndSeen::Stale);
        // A task that only ever had one run keeps nothing once it ended.
        let once = TaskId::new(7, 0);
        submit(&mut l, once);
        assert_eq!(l.ended(Micros(50), &end(once, 1, 50, None)), EndSeen::Final);
        assert!(!l.ended.contains(&once));
        // Untracked (a task without retries, or one a restarted GM has not resumed
        // yet): a lost run is its end, and that run's finish heard later is stale.
        let untracked = TaskId::new(8, 0);
        let lost = TaskFailure::Lost {
            reason: "no word".into(),
        };
        assert_eq!(
            l.ended(later(7), &end(untracked, 1, 70, Some(lost))),
            EndSeen::Final
        );
        assert_eq!(
            l.ended(later(8), &end(untracked, 1, 80, None)),
            EndSeen::Stale
        );
    }

    /// Seed 941892: run 1 declared lost while alive, its retry goes out, then run
    /// 1's finish arrives (too late to withdraw the retry), then the retry is lost
    /// too: the work was done, the task ends finished as run 1, not retried again.
    #[test]
    fn a_failed_retry_of_a_run_that_finished_late_ends_the_task_finished() {
        let mut l = Lifecycle::new(RetryPolicy::default());
        let task = TaskId::new(2, 1);
        submit(&mut l, task);
        let lost = || {
            Some(TaskFailure::Lost {
                reason: "no word".into(),
            })
        };
        let later = |at: u64| Micros(at << 30);
        assert!(matches!(
            l.ended(later(1), &end(task, 1, 10, lost())),
            EndSeen::Retry(_)
        ));
        assert_eq!(l.due_retries(later(2)).len(), 1);
        assert_eq!(
            l.ended(later(3), &end(task, 1, 30, None)),
            EndSeen::LateFinish { waiting: false }
        );
        assert_eq!(
            l.ended(later(4), &end(task, 2, 40, lost())),
            EndSeen::DoneEarlier { run: 1 }
        );
        assert_eq!(l.ended(later(5), &end(task, 2, 40, lost())), EndSeen::Stale);
    }
}
