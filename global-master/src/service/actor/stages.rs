//! What the core's DAG stage decided, carried out (see `gm_core::dag`): tasks held
//! for a parent stage show `blocked`, released ones `queued`; a task that will never
//! run (a parent stage failed, or its gang timed out) ends failed, is journalled and
//! published like any end.

use super::{GmActor, SubmitRefused};
use crate::core::{GmInput, GmOutput};
use crate::service::observe::status::JobState;
use actix::Context;
use common::dag::JobDag;
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{TaskEnd, TaskFailure};
use common::JobId;
use common::{Micros, NodeId};

impl GmActor {
    /// Journals the gangs that left their coordinator (started whole, failed, or
    /// given up to run one by one: a next life resumes them as ordinary tasks) and
    /// the new runs of gangs restarted whole, before those runs go out
    /// (docs/gangs.md, "A GM restarted mid-commit").
    pub(super) fn journal_gangs(&mut self, out: &GmOutput) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        let left: Vec<JobId> = (out.gangs_started.iter().map(|g| g.0))
            .chain(out.gangs_failed.iter().map(|g| g.0))
            .chain(out.gangs_partial.iter().copied())
            .collect();
        if let Err(e) = journal.gangs_left(&left) {
            self.metrics.journal_errors += 1;
            tracing::error!(gangs = left.len(), error = %e, "cannot journal that gangs left their coordinator: a restart would restart them whole");
        }
        for (job, members) in &out.gangs_restarted {
            if let Err(e) = journal.gang_restarted(members) {
                self.metrics.journal_errors += 1;
                tracing::error!(job = job.0, error = %e, "cannot journal a gang's restart: a second restart may reuse its run numbers");
            }
        }
    }

    /// Blocked and released tasks into the tracker; tasks that never run end failed.
    pub(super) fn record_dag_progress(&mut self, now: Micros, out: &GmOutput) {
        for b in &out.blocked {
            self.tracker.blocked(b.task, &b.stage, &b.waits_for);
        }
        for task in &out.released {
            self.tracker.released(*task);
        }
        // Tasks that will never run: of a stage whose parent failed, or of a gang
        // that did not start within its timeout (`on_timeout = fail`).
        let mut unrun: Vec<(common::TaskId, String)> = (out.never_run.iter())
            .map(|never| {
                tracing::info!(task = %never.task, job = never.task.job.0, stage = %never.stage, cause = %never.cause, "task will not run");
                (never.task, never.cause.to_string())
            })
            .collect();
        for (job, tasks) in &out.gangs_failed {
            tracing::info!(
                job = job.0,
                tasks = tasks.len(),
                "gang did not start within its timeout: its tasks fail unrun"
            );
            unrun.extend(
                tasks
                    .iter()
                    .map(|t| (*t, "its gang did not start within its timeout".to_owned())),
            );
        }
        if unrun.is_empty() {
            return;
        }
        let mut events = Vec::with_capacity(unrun.len());
        let mut ends = Vec::with_capacity(unrun.len());
        for (task, reason) in unrun {
            let failure = TaskFailure::StartFailed { reason };
            events.push(TaskEvent {
                task,
                at: now,
                kind: TaskEventKind::Failed {
                    detail: failure.to_string(),
                    reannounced: false,
                },
            });
            let attempt = self.tracker.task(task).map_or(1, |s| s.attempt);
            self.tracker.never_run(task, failure.clone(), now);
            ends.push(TaskEnd {
                used: None,
                task,
                attempt,
                node: NodeId(0),
                at: now,
                failure: Some(failure),
            });
        }
        self.journal_ends(&ends, &[], &[]);
        (self.events)(events);
    }

    /// The jobs a submitted job runs after: each of this GM, known, and the
    /// submitter's (unless an admin submits), or of another GM and checked there
    /// (`elsewhere`: each with its outcome then, `None` while active). Returns
    /// those that ended already, with their outcome (`true`: finished).
    pub(super) fn check_after_jobs(
        &self,
        dag: &JobDag,
        user: Option<&str>,
        admin: bool,
        elsewhere: &[(JobId, Option<bool>)],
    ) -> Result<Vec<(JobId, bool)>, SubmitRefused> {
        let me = self.gm().0;
        let mut ended = Vec::new();
        for (index, after) in dag.after_jobs.iter().enumerate() {
            let job = after.job.0;
            let gm = crate::service::admission::route::job_owner(job);
            if gm != me {
                match elsewhere.iter().find(|(j, _)| *j == after.job) {
                    Some((_, Some(ok))) => ended.push((after.job, *ok)),
                    Some((_, None)) => {}
                    None => return Err(SubmitRefused::OtherGm { index, job, gm }),
                }
                continue;
            }
            let status = self.tracker.job(after.job);
            match status {
                Some(s) if admin || s.user.as_deref() == user => match s.state {
                    JobState::Active => {}
                    state => ended.push((after.job, state == JobState::Finished)),
                },
                // Forgotten by the tracker (retention), its outcome journalled.
                None if admin => match self.journal_outcome(after.job) {
                    Some(ok) => ended.push((after.job, ok)),
                    None => return Err(SubmitRefused::UnknownJob { index, job }),
                },
                _ => return Err(SubmitRefused::UnknownJob { index, job }),
            }
        }
        Ok(ended)
    }

    pub(super) fn journal_outcome(&self, job: JobId) -> Option<bool> {
        let journal = self.journal.as_ref()?;
        journal.outcomes(&[job]).ok()?.first().map(|(_, ok)| *ok)
    }

    /// Jobs that ended in this step that DAG jobs run after: the core hears of it
    /// (once per job: the core forgets who waited once told).
    pub(super) fn report_ended_jobs(&mut self, ctx: &mut Context<Self>) {
        let ended = self.tracker.take_ended_jobs();
        if ended.is_empty() || self.core.dags().awaited_jobs().next().is_none() {
            return;
        }
        for job in ended {
            if !self.core.dags().awaits(job) {
                continue;
            }
            let ok = self
                .tracker
                .job(job)
                .is_some_and(|s| s.state == JobState::Finished);
            tracing::info!(job = job.0, ok, "a job other jobs run after ended");
            self.deliver(GmInput::JobEnded { job, ok }, ctx);
        }
    }

    /// After a restarted GM resumed DAG jobs that run after `jobs`: those already
    /// ended (read back from the journal, or ended while the GM was away and
    /// remembered in its journal's outcomes) are reported to the core now.
    /// Jobs of other GMs are left to [`super::remote_after::watch`], which asks
    /// their GMs.
    pub(super) fn settle_awaited(&mut self, jobs: Vec<JobId>, ctx: &mut Context<Self>) {
        let me = self.gm().0;
        for job in jobs {
            if !self.core.dags().awaits(job)
                || crate::service::admission::route::job_owner(job.0) != me
            {
                continue;
            }
            let ok = match self.tracker.job(job) {
                Some(s) if s.state == JobState::Active => continue,
                Some(s) => s.state == JobState::Finished,
                None => match self.journal_outcome(job) {
                    Some(ok) => ok,
                    None => {
                        tracing::warn!(job = job.0, "a resumed job runs after a job whose outcome is no longer known (not in the journal): taken as failed");
                        false
                    }
                },
            };
            self.deliver(GmInput::JobEnded { job, ok }, ctx);
        }
    }
}
