//! The GM's one entry point: `step(now, input) -> output`, in the raft-rs style.
//!
//! Client requests ([`ClientToGm`]), LM messages ([`LmToGm`]), the designated GM's
//! LRA submissions, timers (a scheduling pass, an LRA placer run) and transport
//! notices (a request that was never delivered) all go through [`GlobalMaster::step`].
//! It returns the requests to send ([`GmToLm`], each addressed by its LM), the
//! decisions it took (for reports and cost models) and what the driver should know
//! (answers, whether a pass is wanted). A driver delivers them without knowing their
//! variants.

use super::GlobalMaster;
use crate::lifecycle::Retry;
use crate::lra_path::{LraPassOutput, LraRefused, LraSubmission};
use crate::outputs::{Decision, DecisionOutcome, KnownMisses, PassOutput, ResponseOutput};
use common::dag::JobDag;
use common::gang::GangSpec;
use common::messages::{TaskEnd, TaskStart};
use common::protocol::{ClientToGm, GmToLm, LmToGm};
use common::reasons::PendingReason;
use common::retry::RetryPolicy;
use common::{JobId, LmId, Micros, TaskId, TaskSpec};
use std::sync::Arc;

/// What a GM takes.
#[derive(Clone, Debug)]
pub enum GmInput {
    Client(ClientToGm),
    Lm(LmToGm),
    /// An LRA for the designated GM's placer.
    SubmitLra(LraSubmission),
    /// Run one scheduling pass over the ready tasks.
    Schedule,
    /// The designated GM's LRA placer may run (if its interval has elapsed).
    LraPass,
    /// A task ended (observed on the event stream): an LRA container's resources and
    /// tags leave the placer's picture.
    TaskEnded(TaskId),
    /// The transport gave up on a request: it was never (or may never have been)
    /// acted on; its tasks go back to their queues.
    Undelivered(Undelivered),
    /// The LM answered a request that it applied nothing and takes no new work for
    /// `retry_after` (its broker backlog is full, or it is not ready): the request is
    /// undone as an undelivered one (its tasks go back to their queues), and
    /// placement passes that LM by until then, so they go to other LMs meanwhile.
    Busy {
        request: Undelivered,
        retry_after: Micros,
    },
    /// Time passed: the moment the last output named ([`GmOutput::next_wakeup`]) has
    /// come (failed tasks whose backoff is over go back to their queues).
    Tick,
    /// Tasks of a previous life of this GM, read back from its journal, that no LM
    /// holds or finished: queued again under their job's policy.
    Resume(Resumed),
    /// A job ended (every task final; `ok`: every task finished), as the driver
    /// saw it: the DAG jobs that run after it go on ([`crate::dag::Dags::job_ended`];
    /// the driver reports the jobs of [`crate::dag::Dags::awaited_jobs`]).
    JobEnded {
        job: JobId,
        ok: bool,
    },
}

/// Tasks a restarted GM runs again ([`GmInput::Resume`]). Each goes out as a run
/// number no earlier life used (its spec's `attempt`), so a late report of an
/// earlier life's run (a lost run whose end was still on its way) is stale, never
/// taken for the resumed run's; `failed` is how many runs failed before (the job's
/// retry budget goes on from there: a run cut short by a GM restart is not a
/// failure of the task).
#[derive(Clone, Debug, PartialEq)]
pub struct Resumed {
    pub tasks: Vec<(TaskSpec, u32)>,
    /// Tasks an LM still holds (its answer to the restarted GM's reconcile), each
    /// as the run it holds and with its failures so far: not queued, but tracked
    /// under the job's policy, so that a failure of that run is retried.
    pub held: Vec<(TaskSpec, u32)>,
    pub retry: RetryPolicy,
    /// The DAGs of the DAG jobs among them, each with the tasks of its job that
    /// ended for good in an earlier life (index, failed): their stages resume
    /// where they were (a task of a stage whose parents have not ended waits).
    pub dags: Vec<ResumedDag>,
    /// The gangs among them that had not started (no member ended, none held by
    /// an LM): each resumes as a gang of its tasks in `tasks` (docs/gangs.md), its
    /// timeout counted again from the resume.
    pub gangs: Vec<(JobId, GangSpec)>,
}

/// A DAG job a restarted GM resumes (see [`Resumed::dags`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ResumedDag {
    pub job: JobId,
    pub dag: Arc<JobDag>,
    pub ended: Vec<(u32, bool)>,
}

/// A request the transport could not deliver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undelivered {
    Batch {
        lm: LmId,
        seq: u64,
        tasks: Vec<TaskId>,
    },
    Preempt {
        lm: LmId,
        task: TaskId,
    },
    Cancel {
        lm: LmId,
        job: JobId,
    },
    /// A restarted GM's question to an LM (asked by the service, which resumes the
    /// tasks without that LM's answer), or the core's ask about held preemption
    /// requests (asked again a period later): nothing for the core to undo.
    Reconcile {
        lm: LmId,
    },
    /// A step of a gang's transaction (see [`crate::gang::Gangs::undelivered`]).
    Gang {
        lm: LmId,
        job: JobId,
        generation: u32,
    },
}

impl Undelivered {
    /// The LM the request was for.
    pub fn lm(&self) -> LmId {
        match self {
            Undelivered::Batch { lm, .. }
            | Undelivered::Preempt { lm, .. }
            | Undelivered::Cancel { lm, .. }
            | Undelivered::Reconcile { lm }
            | Undelivered::Gang { lm, .. } => *lm,
        }
    }

    /// The notice for a request the transport gave up on.
    pub fn of(message: &GmToLm) -> Self {
        match message {
            GmToLm::Launch(b) => Undelivered::Batch {
                lm: b.lm,
                seq: b.seq,
                tasks: b.requests.iter().map(|r| r.task.id).collect(),
            },
            GmToLm::Preempt(p) => Undelivered::Preempt {
                lm: p.lm,
                task: p.task.id,
            },
            GmToLm::Cancel(c) => Undelivered::Cancel {
                lm: c.lm,
                job: c.job,
            },
            GmToLm::Reconcile(r) => Undelivered::Reconcile { lm: r.lm },
            GmToLm::Gang(g) => Undelivered::Gang {
                lm: g.lm,
                job: g.job,
                generation: g.generation,
            },
        }
    }
}

/// What a GM sends and reports after one step.
#[derive(Debug, Default)]
pub struct GmOutput {
    /// Requests for the LMs, in the order they must leave (launch batches, then
    /// preemption requests); each names its LM ([`GmToLm::lm`]).
    pub to_lms: Vec<GmToLm>,
    /// The placement decisions of a pass, in order.
    pub decisions: Vec<Decision>,
    /// Known misses of the pass counted in bulk, placed among `decisions`.
    pub known_misses: Vec<KnownMisses>,
    /// Tasks that left their line owing known misses counted in bulk, and how many
    /// each (now in their `attempts`): a driver that books attempts per task adds
    /// them, as one decision each that examined nothing.
    pub misses_settled: Vec<(TaskId, u32)>,
    /// For a launch answer: which tasks launched, which were refused; for a
    /// preemption answer, the task if it launched.
    pub answered: ResponseOutput,
    /// For a preemption answer: whether the task now runs.
    pub preempt_launched: Option<bool>,
    /// For an LRA placer run: what it placed, left waiting or refused (its decisions
    /// and batches are in `decisions` and `to_lms`).
    /// Boxed: rare (the designated GM's LRA interval), and inline it made every
    /// step's output (returned at every step) 200 bytes larger.
    pub lra_pass: Option<Box<LraPassOutput>>,
    /// For an LRA submission: why it was refused (nothing of it was kept).
    pub lra_refused: Option<LraRefused>,
    /// For a task end: whether it was a running LRA container of this GM. For an
    /// undelivered request: how many tasks went back to their queues.
    pub affected: usize,
    /// For an undelivered request: the tasks that went back to their queue (or to
    /// the LRA path), and why; for an LM's answer about held preemption requests,
    /// the tasks of those it does not hold.
    pub requeued: Vec<(TaskId, PendingReason)>,
    /// For an LM's `Ended` message: the tasks of this GM that finished or failed.
    pub ended: Vec<TaskEnd>,
    /// Of those, the failed ones that will run again (their job's retry policy),
    /// and when they go back to their queue.
    pub retries: Vec<Retry>,
    /// For an LM's `Started` message: tasks of this GM that started.
    pub started: Vec<TaskStart>,
    /// For an LM's `Ended` or `Started` message: reports (task, run) of runs
    /// already replaced by a retry, or repeated ends; left out of `ended` and
    /// `started` (a late report of a lost run must not end or start its retry).
    pub stale: Vec<(TaskId, u32)>,
    /// Tasks that ended `cancelled`: taken out of this GM's queues for a cancel, or
    /// stopped by their LM.
    pub cancelled: Vec<TaskId>,
    /// The input may have made work placeable: the driver should run a pass soon.
    pub wants_pass: bool,
    /// LMs whose new life (a higher incarnation, or one that took over) the view
    /// took up in this step. The new life knows the tasks its workers still hold
    /// or report finished, not those its previous life ran on workers that died
    /// meanwhile, nor ends it failed to send: the driver asks it about the tasks
    /// it believes run there (once its workers had time to register) and turns
    /// the answer into ends (see `common::messages::ReconcileRequest`).
    pub lm_new_lives: Vec<LmId>,
    /// Tasks of DAG jobs held because a parent stage has not ended (at their
    /// submission, and again when one parent ended and they wait for another).
    pub blocked: Vec<crate::dag::Blocked>,
    /// Tasks of DAG jobs released to their queues: their parent stages ended.
    pub released: Vec<TaskId>,
    /// Tasks of DAG jobs that end failed without running: a parent stage failed.
    pub never_run: Vec<crate::dag::NeverRun>,
    /// Gangs whose every part was committed this step: the members launched.
    pub gangs_started: Vec<(JobId, Vec<TaskId>)>,
    /// Gangs timed out with `on_timeout = fail`: their tasks end failed, unrun.
    pub gangs_failed: Vec<(JobId, Vec<TaskId>)>,
    /// Gangs timed out with `on_timeout = run_partial`: their tasks are queued
    /// as ordinary tasks. With `gangs_started` and `gangs_failed`, the gangs that
    /// left the gang coordinator: a driver journals it, so that a restarted GM
    /// resumes as a gang only one that had not (docs/gangs.md, "A GM restarted
    /// mid-commit").
    pub gangs_partial: Vec<JobId>,
    /// Gangs broken after their commit (a part could not launch while others may
    /// have): restarted whole, each member's next run the attempt given (their
    /// runs of the broken generation are stopped and void).
    pub gangs_restarted: Vec<(JobId, Vec<(TaskId, u32)>)>,
    /// When the core next needs a step ([`GmInput::Tick`]) whatever else happens:
    /// a retry's backoff ends, a cancel request is due to be sent again.
    pub next_wakeup: Option<Micros>,
}

impl GmOutput {
    fn pass(&mut self, pass: PassOutput) {
        let PassOutput {
            decisions,
            known_misses,
            batches,
            preempts,
        } = pass;
        self.decisions = decisions;
        self.known_misses = known_misses;
        let earlier = std::mem::take(&mut self.to_lms);
        let mut to_lms = Vec::with_capacity(batches.len() + preempts.len() + earlier.len());
        to_lms.extend(batches.into_iter().map(GmToLm::Launch));
        to_lms.extend(preempts.into_iter().map(GmToLm::Preempt));
        to_lms.extend(earlier);
        self.to_lms = to_lms;
    }
}

impl GlobalMaster {
    /// Handles one input.
    pub fn step(&mut self, now: Micros, input: GmInput) -> GmOutput {
        let mut out = GmOutput::default();
        // Retries whose backoff is over queue before the input is handled (a pass
        // input places them at once), and so do LMs whose busy time is over.
        out.wants_pass |= self.lifecycle_due(now, &mut out);
        out.wants_pass |= self.lms_back(now);
        // The timers below are scanned only when something of theirs is pending
        // (the common case, at every step of a run without them, is nothing).
        // Delay scheduling: a held task's wait is over.
        if self.soft.holds_any() {
            out.wants_pass |= self.soft.relax_due(now);
        }
        // Gangs: an attempt not answered in time is released, a gang past its
        // timeout fails or runs partially.
        if !self.gangs.is_empty() {
            out.wants_pass |= self.gangs_due(now, &mut out);
        }
        // Held preemption requests whose final answer is overdue: their LM is asked.
        if self.fairness.holds_any() {
            self.held_preempts_due(now, &mut out);
        }
        match input {
            GmInput::Client(ClientToGm::Submit(tasks)) => {
                let policy = self.lifecycle.default_policy();
                self.lifecycle.submitted(&tasks, policy);
                for task in tasks {
                    self.submit(now, task);
                }
                out.wants_pass = true;
            }
            GmInput::Client(ClientToGm::SubmitGang { tasks, retry, gang }) => {
                self.submit_gang(now, tasks, retry, gang, &mut out);
            }
            GmInput::Client(ClientToGm::SubmitJob { tasks, retry, dag }) => {
                self.lifecycle.submitted(&tasks, retry);
                self.submit_job(now, tasks, dag, &mut out);
            }
            GmInput::Resume(Resumed {
                tasks,
                held,
                retry,
                dags,
                gangs,
            }) => {
                self.lifecycle.resumed(&held, retry);
                self.lifecycle.resumed(&tasks, retry);
                let ids: Vec<TaskId> = tasks.iter().map(|(t, _)| t.id).collect();
                let tasks = tasks.into_iter().map(|(t, _)| t).collect();
                let tasks = self.resume_gangs(now, tasks, &held, (gangs, retry), &mut out);
                for task in self.resume_dags(tasks, dags, &mut out) {
                    self.submit(now, task);
                }
                // A job cancelled while its tasks waited to be resumed (a restarted
                // GM asks its LMs first): they leave the queues at once.
                self.drop_cancelled(&ids, &mut out);
                out.wants_pass = true;
            }
            GmInput::Client(ClientToGm::Cancel(job)) => {
                self.cancel_gang(job, &mut out);
                self.cancel_job(job, &mut out);
                out.wants_pass |= !out.cancelled.is_empty();
            }
            GmInput::Lm(message) => self.step_lm(now, message, &mut out),
            GmInput::SubmitLra(submission) => {
                out.lra_refused = self.submit_lra(now, submission).err();
            }
            GmInput::Schedule => {
                // Gangs first: their reserves take room before single tasks do.
                self.place_gangs(now, &mut out);
                out.pass(self.schedule(now));
            }
            GmInput::LraPass => {
                if let Some(mut lra) = self.lra_pass(now) {
                    out.pass(std::mem::take(&mut lra.pass));
                    out.lra_pass = Some(Box::new(lra));
                }
            }
            GmInput::TaskEnded(task) => {
                out.affected = usize::from(self.lra_container_ended(now, task));
            }
            GmInput::Undelivered(request) => {
                let reason = PendingReason::LmUnreachable { lm: request.lm() };
                self.undelivered(now, request, reason, &mut out);
            }
            GmInput::Busy {
                request,
                retry_after,
            } => {
                let lm = request.lm();
                self.lm_busy(lm, now + retry_after);
                self.undelivered(now, request, PendingReason::LmBusy { lm }, &mut out);
            }
            GmInput::JobEnded { job, ok } => self.dependency_ended(now, job, ok, &mut out),
            GmInput::Tick => {}
        }
        let mut unplaceable = Vec::new();
        for d in &out.decisions {
            if let DecisionOutcome::Unplaceable(_) = d.outcome {
                self.lifecycle.gave_up(d.task);
                unplaceable.push(d.task);
            }
        }
        for task in unplaceable {
            self.dag_task_ended(now, task, true, &mut out);
        }
        // A retry without backoff is due at once.
        if !out.retries.is_empty() {
            out.wants_pass |= self.lifecycle_due(now, &mut out);
        }
        out.next_wakeup = self.next_wakeup();
        out.lm_new_lives = std::mem::take(&mut self.new_lives);
        out.misses_settled = self.backlog.take_settled();
        out
    }

    /// When the core next needs a step: a retry's backoff or a cancel resend, a
    /// busy LM back, and the timers of gangs, delay scheduling and held preemptions,
    /// each asked only when it has something pending (the earliest of them).
    fn next_wakeup(&self) -> Option<Micros> {
        let mut next = self.lifecycle.next_wakeup();
        let mut take = |at: Option<Micros>| {
            if let Some(at) = at {
                next = Some(next.map_or(at, |t| t.min(at)));
            }
        };
        if !self.busy_lms.is_empty() {
            take(self.next_lm_back());
        }
        if !self.gangs.is_empty() {
            take(self.gangs.next_wakeup());
        }
        if self.soft.holds_any() {
            take(self.soft.next_relax());
        }
        if self.fairness.holds_any() {
            take(self.fairness.next_held_expiry());
        }
        next
    }

    /// Pays every known miss still owed by a waiting task (the end of a run): the
    /// tasks and how many each, as [`GmOutput::misses_settled`].
    pub fn settle_known_misses(&mut self) -> Vec<(TaskId, u32)> {
        self.backlog.settle_all()
    }

    /// A message from an LM.
    fn step_lm(&mut self, now: Micros, message: LmToGm, out: &mut GmOutput) {
        match message {
            LmToGm::State(snapshot) => self.apply_snapshot(now, &snapshot),
            LmToGm::LaunchAnswer(response) => {
                out.answered = self.handle_response(now, &response);
                let launched = std::mem::take(&mut out.answered.launched);
                self.stop_cancelled(response.lm, launched.iter().copied(), out);
                out.answered.launched = launched;
                let rejected: Vec<TaskId> = out.answered.rejected.iter().map(|r| r.0).collect();
                self.drop_cancelled(&rejected, out);
            }
            LmToGm::PreemptAnswer(response) => {
                let launched = self.handle_preempt_response(now, &response);
                if launched {
                    out.answered.launched.push(response.task);
                    self.stop_cancelled(response.lm, [response.task], out);
                } else {
                    self.drop_cancelled(&[response.task], out);
                }
                out.preempt_launched = Some(launched);
            }
            LmToGm::Requeue(preempted) => {
                self.requeue_preempted(now, &preempted);
                let tasks: Vec<TaskId> = preempted.tasks.iter().map(|(t, _)| t.id).collect();
                self.drop_cancelled(&tasks, out);
            }
            // The end of a task changes nothing the GM places with (the LM's state
            // does, in its next heartbeat): reported, and failures retried.
            LmToGm::Ended(ended) => {
                // Ends the LM published may wait for their gang's commit; those
                // the GM publishes go through now (a driver publishes what this
                // step takes).
                let by_lm = ended.publish == common::messages::EndsPublished::ByLm;
                let ends = self.gang_ends(now, ended.ends, by_lm, out);
                self.tasks_ended(now, ends, out);
                return;
            }
            LmToGm::Started(started) => {
                self.tasks_started(started.lm, started.starts, out);
                return;
            }
            LmToGm::CancelAnswer(response) => {
                self.cancel_answered(now, &response);
                out.cancelled.extend(response.cancelled);
            }
            // About held preemption requests: asked by the core. Otherwise read by
            // the service that asked (a restarted GM resuming its journal).
            LmToGm::ReconcileAnswer(answer) if !answer.preempts.is_empty() => {
                self.held_asks_answered(&answer, out);
            }
            LmToGm::ReconcileAnswer(_) => return,
            LmToGm::GangAnswer(answer) => self.gang_answered(now, &answer, out),
        }
        out.wants_pass = true;
    }
}
