//! The GM actor as the driver of its core. Every input (an LM's message, a transport
//! notice, a timer, a client's submission) goes through [`GmActor::deliver`]:
//!
//! 1. the shell notes what the core does not keep (metrics, the status tracker, log
//!    lines) in [`GmActor::observe`];
//! 2. the core steps: `GlobalMaster::step(now, input) -> GmOutput`;
//! 3. the output is carried out whatever its messages ([`GmActor::carry_out`]):
//!    requests go to their LMs over one link each ([`LmLink`]) and their answers come
//!    back as inputs; decisions go to the event stream and the tracker; a pass is
//!    queued when the core wants one.
//!
//! A new GM <-> LM message therefore costs nothing here unless the shell wants a
//! metric or a log line for it.

use crate::core::{DecisionOutcome, GmInput, GmOutput, Undelivered};
use crate::service::actor::GmActor;
use actix::prelude::*;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::EndsPublished;
use common::messages::{LaunchBatch, PreemptRefusal};
use common::protocol::facts::{Side, TaskFact};
use common::reasons::PendingReason;
use common::{Micros, TaskId};
use service_kit::clock;

pub use super::links::LmLink;

/// An input for the GM's core (from the broker, an LM, the HTTP API or the actor
/// itself).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Deliver(pub GmInput);

impl Handler<Deliver> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: Deliver, ctx: &mut Context<Self>) {
        self.deliver(msg.0, ctx);
    }
}

/// A launch batch in doubt is about to be sent again: the part still worth sending
/// (see `GlobalMaster::still_in_doubt`), or `None` when every run in it ended.
#[derive(Message, Debug)]
#[rtype(result = "Option<LaunchBatch>")]
pub struct StillInDoubt(pub LaunchBatch);

impl Handler<StillInDoubt> for GmActor {
    type Result = Option<LaunchBatch>;

    fn handle(&mut self, msg: StillInDoubt, ctx: &mut Context<Self>) -> Self::Result {
        let batch = msg.0;
        let rest = self.core.still_in_doubt(&batch);
        let kept = rest.as_ref().map_or(0, |r| r.requests.len());
        let left_out = batch.requests.len() - kept;
        self.metrics.resend_runs_left_out += left_out as u64;
        if rest.is_none() {
            // Its deductions left the view (and quotas may release work).
            self.metrics.resends_moot += 1;
            self.request_pass(ctx);
        }
        if left_out > 0 {
            tracing::info!(lm = %batch.lm, seq = batch.seq, left_out, kept, "launch batch in doubt: runs whose end came meanwhile are not sent again");
        }
        rest
    }
}

/// Run one scheduling pass (queued by the GM itself, coalesced).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RunPass;

impl Handler<RunPass> for GmActor {
    type Result = ();

    fn handle(&mut self, _: RunPass, ctx: &mut Context<Self>) {
        self.pass_scheduled = false;
        let out = self.deliver(GmInput::Schedule, ctx);
        if !out.decisions.is_empty() {
            self.metrics.passes += 1;
        }
        // The next pass fills this list again (a pass under a backlog sizes it for
        // every blocked task).
        self.core.recycle_decisions(out.decisions);
    }
}

impl GmActor {
    pub(super) fn request_pass(&mut self, ctx: &mut Context<Self>) {
        if !self.pass_scheduled {
            self.pass_scheduled = true;
            ctx.notify(RunPass);
        }
    }

    /// One input through the core; see the module documentation. Returns the output
    /// (its requests already sent) for callers that want an answer from it.
    pub(super) fn deliver(&mut self, mut input: GmInput, ctx: &mut Context<Self>) -> GmOutput {
        let now = clock::now();
        let forgotten = self.tracker.expire(now);
        if forgotten > 0 && self.core.soft().jobs_held() > 0 {
            // Soft constraints: the trees and choices of forgotten jobs go too.
            let tracker = &self.tracker;
            self.core
                .retain_soft_jobs(|job| tracker.task(common::TaskId { job, index: 0 }).is_some());
        }
        if forgotten > 0 {
            tracing::debug!(
                jobs = forgotten,
                "ended jobs past their retention forgotten"
            );
        }
        self.observe(now, &input);
        let had_view = self.core.has_full_view();
        let snapshot = match &input {
            GmInput::Lm(m) => m.snapshot().map(|s| (s.lm, s.incarnation, s.version)),
            _ => None,
        };
        let to_publish = match &mut input {
            GmInput::Lm(message) => message.ends_gm_publishes_mut().map(|e| {
                self.current_runs_only(e);
                (e.lm, e.publish)
            }),
            _ => None,
        };
        let mut out = self.core.step(now, input);
        if let Some((lm, publish)) = to_publish {
            self.publish_taken(lm, publish, &out);
        }
        // An LM's state counts as heard only when the core took it (a snapshot of
        // another life, or stale, does not: the view would look fresh while frozen).
        if let Some((lm, incarnation, version)) = snapshot {
            let taken = self
                .core
                .view(lm)
                .is_some_and(|v| v.incarnation == incarnation && v.version == version);
            if let (true, Some(slot)) = (taken, self.metrics.last_snapshot.get_mut(lm.index())) {
                *slot = Some(now);
            }
        }
        if !had_view && self.core.has_full_view() {
            tracing::info!(gm = %self.core.id(), "view complete: state of every LM received; placing work");
        }
        self.carry_out(now, &mut out, ctx);
        out
    }

    /// Keeps, of the ends an LM left for this GM to publish (its verdicts "lost",
    /// failures a worker listed to a restarted LM), those of a task this GM knows
    /// open, as its current run (for a restarted GM's task still in doubt, the last
    /// run its journal says may have gone out): the core takes
    /// the end of a task it does not track (no retry policy, or a restarted GM's
    /// task still in doubt) as the task's end, and a failure of a run long
    /// replaced would end it `failed` (issue 33, seed 13044: runs 1 and 2 failed,
    /// run 3 finished, all listed; run 1's failure ended the task). Dropped ones
    /// are logged and counted. (The failure of a resumed task's previous run is
    /// dropped too: the resumed run is its retry, without counting it.)
    fn current_runs_only(&mut self, ended: &mut common::messages::TasksEnded) {
        let before = ended.ends.len();
        let tracker = &self.tracker;
        ended.ends.retain(|end| {
            tracker
                .task(end.task)
                .is_some_and(|s| !s.state.is_final() && end.attempt >= s.attempt)
        });
        let dropped = before - ended.ends.len();
        if dropped > 0 {
            self.metrics.reannounced_stale += dropped as u64;
            tracing::info!(lm = %ended.lm, dropped, publish = ?ended.publish, "ends of runs this GM replaced, or of tasks it does not hold open: ignored");
        }
    }

    /// Ends LM `lm` left for this GM to publish ([`EndsPublished`]) that the core
    /// took as their tasks' ends, of tasks this GM knows and had not seen end:
    /// published here, at their real end times (a failure a worker listed to a
    /// restarted LM marked re-announced). Any other is not: an observer would
    /// take it for the end of the task's later run (issue 33: a failure of run 1
    /// published after run 2 finished), or for the end of a task that runs on.
    /// Called before the tracker hears the ends.
    fn publish_taken(&mut self, lm: common::LmId, publish: EndsPublished, out: &GmOutput) {
        let open = |task| self.tracker.task(task).is_some_and(|s| !s.state.is_final());
        let events: Vec<TaskEvent> = out
            .ended
            .iter()
            .filter(|end| end.failure.is_some() && open(end.task))
            .map(|end| TaskEvent::of_end(lm, end, publish))
            .collect();
        if events.is_empty() {
            return;
        }
        if publish == EndsPublished::ByGmAgain {
            self.metrics.reannounced_failures += events.len() as u64;
            tracing::info!(%lm, failures = events.len(), "failures a restarted LM's worker listed, unheard here: published again");
        }
        (self.events)(events);
    }

    /// What the shell keeps of an input before the core sees it.
    fn observe(&mut self, now: Micros, input: &GmInput) {
        match input {
            GmInput::Lm(message) => {
                let lm = message.lm();
                let mut requeued = Vec::new();
                message.for_each_task(|task, fact| match fact {
                    TaskFact::PreemptRefused(why) => {
                        let label = why.label();
                        tracing::info!(task = %task, job = task.job.0, %lm, reason = label, "preemption refused; the task waits in its queue");
                        if *why != PreemptRefusal::Duplicate {
                            *self.preempt.refused.entry(label).or_default() += 1;
                        }
                    }
                    TaskFact::Requeued { lost, .. } => requeued.push((task, lost)),
                    TaskFact::Launched { .. }
                    | TaskFact::Rejected(_)
                    | TaskFact::PreemptedToLaunch { .. }
                    | TaskFact::PreemptHeld { .. }
                    | TaskFact::Cancelled
                    | TaskFact::NotYours
                    | TaskFact::Ended(_)
                    | TaskFact::Started => {}
                });
                if !requeued.is_empty() {
                    self.observe_requeue(now, lm, &requeued);
                }
                for note in message.notes(Side::Receiver) {
                    service_kit::log_note!(&note, %lm);
                }
            }
            GmInput::Undelivered(Undelivered::Batch { .. }) => {
                self.metrics.batches_abandoned += 1;
            }
            GmInput::Undelivered(Undelivered::Preempt { .. }) => {
                *self.preempt.refused.entry("transport").or_default() += 1;
            }
            GmInput::Undelivered(Undelivered::Cancel { lm, job }) => {
                tracing::warn!(job = job.0, %lm, "cancel request not delivered; it will be sent again");
            }
            GmInput::Undelivered(Undelivered::Reconcile { .. }) => {}
            GmInput::Undelivered(Undelivered::Gang {
                lm,
                job,
                generation,
            }) => {
                tracing::warn!(job = job.0, %lm, generation, "gang request not delivered: the attempt is released (a commit's: the gang is stopped)");
            }
            GmInput::Busy { .. } => {}
            GmInput::Client(_)
            | GmInput::SubmitLra(_)
            | GmInput::Schedule
            | GmInput::LraPass
            | GmInput::TaskEnded(_)
            | GmInput::Tick
            | GmInput::JobEnded { .. }
            | GmInput::Resume(_) => {}
        }
    }

    /// Tasks of this GM's queues an LM preempted: counted, logged, `requeued` events.
    fn observe_requeue(&mut self, now: Micros, lm: common::LmId, tasks: &[(TaskId, Micros)]) {
        let gm = self.core.id();
        let reason = PendingReason::Preempted { lm };
        let mut events = Vec::with_capacity(tasks.len());
        for &(task, lost) in tasks {
            tracing::info!(task = %task, job = task.job.0, %lm, lost_ms = lost.0 / 1000, "preempted task queued again");
            self.preempt.requeued += 1;
            self.preempt.lost_work += lost;
            self.charge_preempted(now, task, lost);
            self.tracker.killed(task, lm, &reason, lost, now);
            events.push(TaskEvent {
                task,
                at: now,
                kind: TaskEventKind::Requeued {
                    gm,
                    reason: reason.clone(),
                },
            });
        }
        if !events.is_empty() {
            (self.events)(events);
        }
    }

    /// Carries out one step's output: decisions to the tracker and the event stream,
    /// answers to the tracker, requests to their LMs, a pass if wanted.
    fn carry_out(&mut self, now: Micros, out: &mut GmOutput, ctx: &mut Context<Self>) {
        self.record_decisions(now, out);
        for task in &out.answered.launched {
            if let Some(submitted) = self.tracker.launched(*task, now) {
                self.metrics
                    .launch_latency
                    .observe(now.since(submitted).as_secs_f64());
            }
        }
        for (task, reason) in &out.answered.rejected {
            tracing::debug!(task = %task, job = task.job.0, %reason, "LM refused the launch; requeued");
            self.tracker.pending(
                *task,
                &PendingReason::RejectedByLm {
                    rejection: reason.clone(),
                },
                false,
            );
        }
        for task in &out.answered.unexpected {
            // A short run's end comes on the LM's stream and often overtakes the
            // launch answer (seen for a fifth of the tasks of `loadgen bench-exec`):
            // the late answer of an ended task is expected, counted apart.
            if self.tracker.has_ended(*task) {
                self.metrics.answers_after_end += 1;
                tracing::debug!(task = %task, job = task.job.0, "launch answer after the task's end; ignored");
                continue;
            }
            self.metrics.unexpected_outcomes += 1;
            tracing::warn!(task = %task, job = task.job.0, "launch outcome for a task this GM is not waiting for (already answered, or of another life of this GM); ignored");
        }
        for (task, reason) in &out.requeued {
            self.tracker.pending(*task, reason, false);
        }
        self.charge_usage(now, out);
        self.record_lifecycle(now, out);
        self.journal_gangs(out);
        self.journal_ends(&out.ended, &out.cancelled, &out.retries);
        self.record_dag_progress(now, out);
        self.report_ended_jobs(ctx);
        if out.preempt_launched == Some(true) {
            self.preempt.preemptions += 1;
        }
        for message in std::mem::take(&mut out.to_lms) {
            if self.suspended && message.places_work() {
                // Stopped: the journal says these runs never went out.
                self.metrics.launches_withheld += 1;
                tracing::info!(lm = %message.lm(), kind = message.kind(), "not sent: this GM stopped; the next life resumes its tasks");
                continue;
            }
            self.send(message, ctx);
        }
        if out.wants_pass {
            self.request_pass(ctx);
        }
        if let Some(at) = out.next_wakeup {
            self.wake_at(now, at, ctx);
        }
        for lm in std::mem::take(&mut out.lm_new_lives) {
            self.lm_restarted(now, lm, ctx);
        }
    }

    /// Starts, ends, retries and cancellations into the tracker and the event
    /// stream; ended jobs past their retention forgotten.
    fn record_lifecycle(&mut self, now: Micros, out: &GmOutput) {
        let gm = self.core.id();
        let mut events = Vec::new();
        for start in &out.started {
            self.tracker.started(start);
        }
        for (task, attempt) in &out.stale {
            tracing::info!(task = %task, job = task.job.0, attempt, "report of a run already replaced by a retry (or a repeated end) ignored");
        }
        for end in &out.ended {
            match out.retries.iter().find(|r| r.task == end.task) {
                Some(retry) => {
                    tracing::info!(task = %end.task, job = end.task.job.0, attempt = retry.attempt, in_ms = retry.at.since(now).0 / 1000, failure = %retry.failure, "task failed; its job's policy runs it again");
                    self.tracker.retrying(end, retry);
                    if let Some(reason) = self
                        .tracker
                        .task(end.task)
                        .and_then(|s| s.reason_detail.clone())
                    {
                        events.push(TaskEvent {
                            task: end.task,
                            at: now,
                            kind: TaskEventKind::Requeued { gm, reason },
                        });
                    }
                }
                None => self.tracker.ended(end, now),
            }
        }
        for task in &out.cancelled {
            if self.tracker.cancelled(*task, now) {
                events.push(TaskEvent {
                    task: *task,
                    at: now,
                    kind: TaskEventKind::Cancelled { gm },
                });
            }
        }
        if !events.is_empty() {
            (self.events)(events);
        }
    }

    /// Makes sure the core gets a [`GmInput::Tick`] at `at`.
    fn wake_at(&mut self, now: Micros, at: Micros, ctx: &mut Context<Self>) {
        if self.wakeup.is_some_and(|w| w <= at) {
            return;
        }
        self.wakeup = Some(at);
        let wait = std::time::Duration::from_micros(at.since(now).0);
        ctx.run_later(wait, move |act, ctx| {
            if act.wakeup == Some(at) {
                act.wakeup = None;
            }
            act.deliver(GmInput::Tick, ctx);
        });
    }

    /// Writes the tasks that reached a final state, and the run each retried task
    /// goes out as next, to the journal, before the LM that reported them hears its
    /// answer (it sends them again otherwise).
    pub(super) fn journal_ends(
        &mut self,
        ends: &[common::messages::TaskEnd],
        cancelled: &[common::TaskId],
        retries: &[gm_core::lifecycle::Retry],
    ) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        let is_final = |t: common::TaskId| self.tracker.task(t).is_some_and(|s| s.state.is_final());
        let mut finals: Vec<_> = ends
            .iter()
            .filter(|e| is_final(e.task))
            .map(|e| {
                let ended = crate::service::durable::journal::Ended {
                    attempt: e.attempt,
                    at: e.at,
                    node: e.node.0,
                    failure: e.failure.clone(),
                    cancelled: false,
                };
                (e.task, ended)
            })
            .collect();
        let now = clock::now();
        finals.extend(cancelled.iter().filter(|t| is_final(**t)).map(|t| {
            let ended = crate::service::durable::journal::Ended {
                attempt: self.tracker.task(*t).map_or(1, |s| s.attempt),
                at: now,
                node: 0,
                failure: None,
                cancelled: true,
            };
            (*t, ended)
        }));
        let runs: Vec<_> = retries
            .iter()
            .map(|r| (r.task, r.attempt, r.failed))
            .collect();
        if let Err(e) = journal.ended(&finals, &runs) {
            self.metrics.journal_errors += 1;
            tracing::error!(tasks = finals.len(), retries = runs.len(), error = %e, "cannot write task ends and retried runs to the journal: a restart would run them again");
        }
    }

    /// Writes the runs resumed tasks go out as (task, run, runs failed so far).
    pub(super) fn journal_runs(&mut self, runs: &[(common::TaskId, u32, u32)]) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        if let Err(e) = journal.ended(&[], runs) {
            self.metrics.journal_errors += 1;
            tracing::error!(tasks = runs.len(), error = %e, "cannot write the runs of resumed tasks to the journal: a second restart may reuse their numbers");
        }
    }

    /// Placement decisions as task events (and in the tracker).
    fn record_decisions(&mut self, now: Micros, out: &GmOutput) {
        let gm = self.core.id();
        let mut events = Vec::with_capacity(out.decisions.len());
        for d in &out.decisions {
            let kind = match &d.outcome {
                DecisionOutcome::Dispatched {
                    lm,
                    node,
                    placement,
                    ..
                } => {
                    self.tracker.dispatched(d.task, *lm, *node);
                    let branch = self
                        .core
                        .soft()
                        .choice(d.task)
                        .and_then(|c| c.branch.clone());
                    TaskEventKind::Dispatched {
                        gm,
                        lm: *lm,
                        node: *node,
                        placement: *placement,
                        branch,
                    }
                }
                DecisionOutcome::Requeued(reason) => {
                    if !self.tracker.pending(d.task, reason, false) {
                        continue;
                    }
                    TaskEventKind::Requeued {
                        gm,
                        reason: reason.clone(),
                    }
                }
                DecisionOutcome::Preempting { lm, victim } => {
                    // The request is among the output's messages; the LM's answer or
                    // its `launched` event tells what became of it.
                    tracing::debug!(task = %d.task, job = d.task.job.0, %lm, %victim, "no room: preempting");
                    continue;
                }
                DecisionOutcome::Unplaceable(reason) => {
                    tracing::info!(task = %d.task, job = d.task.job.0, %reason, "task can never be placed");
                    self.tracker.pending(d.task, reason, true);
                    TaskEventKind::Unplaceable {
                        gm,
                        reason: reason.clone(),
                    }
                }
            };
            events.push(TaskEvent {
                task: d.task,
                at: now,
                kind,
            });
        }
        if !events.is_empty() {
            (self.events)(events);
        }
    }
}
