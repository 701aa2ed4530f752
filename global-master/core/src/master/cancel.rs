//! The job lifecycle after placement, as the GM core's stages: a cancelled job
//! leaves every queue and its LMs are asked to stop the rest; ends and starts
//! reported by the LMs feed the retry policy; anything of a cancelled job that
//! shows up again (a launch answer, a requeue, a start) is dropped or stopped.

use super::step::GmOutput;
use super::GlobalMaster;
use crate::lifecycle::EndSeen;
use common::messages::{CancelRequest, CancelResponse, TaskEnd, TaskStart};
use common::protocol::GmToLm;
use common::{JobId, LmId, Micros, TaskId};

impl GlobalMaster {
    /// Cancels `job`: its waiting tasks leave the queues (listed in
    /// `out.cancelled`), every LM is asked to stop what it runs of it. A job
    /// already cancelled changes nothing.
    pub(super) fn cancel_job(&mut self, job: JobId, out: &mut GmOutput) {
        if !self.lifecycle.cancel(job) {
            return;
        }
        self.stats.jobs_cancelled += 1;
        self.drop_waiting(job, out);
        // Tasks of its DAG's blocked stages end cancelled too.
        let held = self.dags.cancelled(job);
        self.stats.tasks_cancelled += held.len() as u64;
        out.cancelled.extend(held);
        for lm in 0..self.config.lms {
            self.ask_to_cancel(LmId(lm), job, out);
        }
    }

    /// Takes `task` out of the queues if it waits there (a resumed run whose
    /// earlier life's run ended it). True if it waited.
    fn withdraw(&mut self, task: TaskId) -> bool {
        let gone = self.backlog.remove_task(task).is_some()
            || !self.fairness.remove_if(&|t| *t == task).is_empty()
            || self.quota.remove_task(task).is_some();
        if gone {
            self.stats.resumed_runs_withdrawn += 1;
        }
        gone
    }

    /// Takes the waiting tasks of a cancelled job out of every queue.
    fn drop_waiting(&mut self, job: JobId, out: &mut GmOutput) {
        let mut gone = self.backlog.remove_job(job);
        gone.extend(self.fairness.remove_job(job));
        gone.extend(self.quota.remove_job(job));
        self.stats.tasks_cancelled += gone.len() as u64;
        out.cancelled.extend(gone.iter().map(|p| p.task.id));
    }

    fn ask_to_cancel(&mut self, lm: LmId, job: JobId, out: &mut GmOutput) {
        let request = GmToLm::Cancel(CancelRequest {
            gm: self.config.id,
            lm,
            job,
        });
        if !out.to_lms.contains(&request) {
            self.stats.cancels_sent += 1;
            out.to_lms.push(request);
        }
    }

    /// After an input that may have put tasks back in a queue (a refused launch or
    /// preemption, a requeue, an undelivered request): those of cancelled jobs leave.
    pub(super) fn drop_cancelled(&mut self, tasks: &[TaskId], out: &mut GmOutput) {
        let mut jobs: Vec<JobId> = tasks
            .iter()
            .map(|t| t.job)
            .filter(|j| self.lifecycle.is_cancelled(*j))
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job in jobs {
            self.drop_waiting(job, out);
        }
    }

    /// Tasks of cancelled jobs that now run at `lm` (a launch answer raced the
    /// cancel, a start after an LM restart): ask `lm` again to stop them.
    pub(super) fn stop_cancelled(
        &mut self,
        lm: LmId,
        tasks: impl IntoIterator<Item = TaskId>,
        out: &mut GmOutput,
    ) {
        for task in tasks {
            if self.lifecycle.is_cancelled(task.job) {
                self.ask_to_cancel(lm, task.job, out);
            }
        }
    }

    /// An LM's answer to a cancel request: its state, and the tasks it stopped.
    pub(super) fn cancel_answered(&mut self, now: Micros, r: &CancelResponse) {
        self.apply_snapshot(now, &r.snapshot);
        self.lifecycle.cancel_answered(r.lm, r.job);
        self.stats.tasks_cancelled += r.cancelled.len() as u64;
    }

    /// A cancel request the transport gave up on: sent again later, a few times.
    pub(super) fn cancel_undelivered(&mut self, now: Micros, lm: LmId, job: JobId) {
        if !self.lifecycle.resend_later(now, lm, job) {
            self.stats.cancels_abandoned += 1;
        }
    }

    /// Task ends from an LM: counted, failures retried under their job's policy
    /// (`out.retries`), and listed in `out.ended`, except the ends of runs already
    /// replaced by a retry and repeats (`out.stale`, counted).
    pub(super) fn tasks_ended(&mut self, now: Micros, mut ends: Vec<TaskEnd>, out: &mut GmOutput) {
        // Ends for good of DAG jobs' tasks, to move their DAGs on afterwards.
        let mut for_good = Vec::new();
        let dags = !self.dags.is_empty();
        // Kept in place: `ends` becomes `out.ended` (one message, no new vector).
        ends.retain_mut(|end| {
            let ran = end.attempt;
            let mut final_end = false;
            if !self.lifecycle.is_cancelled(end.task.job) {
                let seen = self.lifecycle.ended(now, end);
                final_end = dags && !matches!(seen, EndSeen::Retry(_));
                match seen {
                    EndSeen::Final => {}
                    // Its work was done by an earlier run that finished late: it
                    // ends finished, as that run.
                    EndSeen::DoneEarlier { run } => {
                        self.stats.late_finishes_taken += 1;
                        end.failure = None;
                        end.attempt = run;
                    }
                    EndSeen::Retry(retry) => out.retries.push(retry),
                    // A finish of an earlier life's run ends the task even if the
                    // resumed run went out (its LM answers it `Duplicate` there);
                    // an earlier failure that spent the budget only if the resumed
                    // run still waits (else that run's own end ends the task).
                    EndSeen::Earlier if self.withdraw(end.task) || end.failure.is_none() => {
                        self.lifecycle.end_for_good(end.task);
                    }
                    // A run reported lost finished after all: its end is the
                    // task's if its retry has not gone out.
                    EndSeen::LateFinish { waiting } if waiting || self.withdraw(end.task) => {
                        self.stats.late_finishes_taken += 1;
                        self.lifecycle.end_for_good(end.task);
                    }
                    EndSeen::Stale | EndSeen::Earlier | EndSeen::LateFinish { .. } => {
                        self.stats.stale_run_reports += 1;
                        out.stale.push((end.task, end.attempt));
                        return false;
                    }
                }
            }
            match end.failure {
                None => self.stats.tasks_finished += 1,
                Some(_) => self.stats.tasks_failed += 1,
            }
            self.ordering.run_ended(end.task);
            if self.dispatcher.run_ended(&end.task, ran) {
                // Its end overtook the LM's answer (the end comes straight from the
                // LM, the answer may be resent): the run was launched all the same.
                self.stats.ended_before_answer += 1;
                self.stats.launched += 1;
            }
            if final_end {
                for_good.push((end.task, end.failure.is_some()));
            }
            true
        });
        for (task, failed) in for_good {
            self.dag_task_ended(now, task, failed, out);
        }
        if out.ended.is_empty() {
            out.ended = ends;
        } else {
            out.ended.append(&mut ends);
        }
    }

    /// Task starts from `lm`: counted (those of runs already replaced by a retry
    /// only in `out.stale`); those of cancelled jobs are stopped again.
    pub(super) fn tasks_started(
        &mut self,
        lm: LmId,
        mut starts: Vec<TaskStart>,
        out: &mut GmOutput,
    ) {
        // Kept in place: `starts` becomes `out.started` (no new vectors).
        starts.retain(|s| {
            let stale = self.lifecycle.is_stale(s.task, s.attempt);
            if stale {
                self.stats.stale_run_reports += 1;
                out.stale.push((s.task, s.attempt));
            }
            !stale
        });
        self.stats.tasks_started += starts.len() as u64;
        self.stop_cancelled(lm, starts.iter().map(|s| s.task), out);
        out.started = starts;
    }

    /// Due work of the lifecycle: failed tasks whose backoff is over go back to
    /// their queues, cancel requests due are sent again. True if a task was queued.
    pub(super) fn lifecycle_due(&mut self, now: Micros, out: &mut GmOutput) -> bool {
        if !self.lifecycle.anything_due(now) {
            return false;
        }
        let retries = self.lifecycle.due_retries(now);
        let queued = !retries.is_empty();
        self.stats.tasks_retried += retries.len() as u64;
        self.backlog.push_all_ready(retries);
        for (lm, job) in self.lifecycle.due_resends(now) {
            self.ask_to_cancel(lm, job, out);
        }
        queued
    }
}
