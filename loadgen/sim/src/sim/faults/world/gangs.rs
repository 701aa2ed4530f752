//! The fault run's gang invariant (issue 37, docs/gangs.md): a gang never runs
//! partially for good. After a gang commit launched members, every member must be
//! launched or held somewhere; when one is not (its part died with its LM, or its
//! node went down, after the GM heard every part held: no commit protocol can
//! prevent that, holds live in LM memory), the GM must restart the gang whole
//! (stop every member, run them all again as a new generation). A partial commit
//! the GM never repaired by the end of the run is a violation.

use super::World;
use crate::sim::faults::check::{self, Invariant};
use common::gang::GangSpec;
use common::protocol::LmToWorker;
use common::{GmId, JobId, TaskId, TaskSpec};
use std::collections::HashSet;

impl World<'_> {
    /// Job `k`'s gang, if it is one (as its GM journals it): with `--gangs`, every
    /// third job of two tasks or more. Past the horizon it gives up starting
    /// together (run_partial), so that liveness holds on a cluster the faults left
    /// too small.
    pub(super) fn gang_spec(&self, k: usize) -> Option<GangSpec> {
        let tasks = self.jobs.get(k)?.1.len();
        (self.config.gangs && k.is_multiple_of(3) && tasks >= 2).then_some(GangSpec {
            min_members: tasks as u32,
            timeout: self.config.horizon,
            on_timeout: common::gang::OnTimeout::RunPartial,
        })
    }

    /// The GM journals the gangs that left its gang coordinator (started whole,
    /// failed, or given up to run one by one).
    pub(super) fn gangs_left(&mut self, out: &gm_core::GmOutput) {
        let started = out.gangs_started.iter().map(|g| g.0);
        let failed = out.gangs_failed.iter().map(|g| g.0);
        let partial = out.gangs_partial.iter().copied();
        self.gangs_left.extend(started.chain(failed).chain(partial));
    }

    /// The gangs a restarted GM resumes as gangs (docs/gangs.md, "A GM restarted
    /// mid-commit"): those its journal does not record as gone from its gang
    /// coordinator, with a member to run again (`resubmit`) and none waiting on a
    /// silent LM nor resumed earlier apart. Their members that ran (an LM holds
    /// them, in `keep`; or they ended, as their journaled run) are added to
    /// `keep`: the core restarts such a gang whole.
    pub(super) fn resumed_gangs(
        &self,
        resubmit: &[(TaskSpec, u32)],
        keep: &mut Vec<(TaskSpec, u32)>,
        ended: &HashSet<TaskId>,
    ) -> Vec<(JobId, GangSpec)> {
        let again: HashSet<TaskId> = resubmit.iter().map(|(t, _)| t.id).collect();
        let mut gangs = Vec::new();
        for (k, (_, tasks)) in self.jobs.iter().enumerate() {
            let Some(job) = tasks.first().map(|t| t.id.job) else {
                continue;
            };
            let Some(spec) = self
                .gang_spec(k)
                .filter(|_| !self.gangs_left.contains(&job))
            else {
                continue;
            };
            if !tasks.iter().any(|t| again.contains(&t.id)) {
                continue;
            }
            let held: HashSet<TaskId> = keep.iter().map(|(t, _)| t.id).collect();
            let ran: Vec<TaskId> = (tasks.iter())
                .map(|t| t.id)
                .filter(|t| !again.contains(t) && !held.contains(t))
                .collect();
            let gone = |t: &TaskId| ended.contains(t) || self.checker.gm_has_ended(*t);
            if !ran.iter().all(gone) {
                continue;
            }
            for t in ran {
                let (run, failed) = self.journal_runs.get(&t).copied().unwrap_or((1, 0));
                if let Some(mut spec) = self.specs.get(&t).cloned() {
                    spec.attempt = run;
                    keep.push((spec, failed));
                }
            }
            gangs.push((job, spec));
        }
        gangs
    }

    /// After a gang commit launched members of `job`: every member is launched (now
    /// or before) or held at some LM, so none can be left out of the gang.
    fn gang_whole(&self, gm: GmId, job: JobId) -> Result<(), String> {
        let Some((_, tasks)) = self
            .jobs
            .iter()
            .find(|(_, t)| t.first().is_some_and(|t| t.id.job == job))
        else {
            return Ok(());
        };
        let held: Vec<TaskId> = (self.lms.iter().flatten())
            .filter_map(|lm| lm.gang_hold(gm, job))
            .flat_map(|(_, tasks)| tasks)
            .collect();
        match tasks
            .iter()
            .find(|t| !self.checker.launched(&t.id) && !held.contains(&t.id))
        {
            None => Ok(()),
            Some(t) => Err(format!(
                "a commit of {job}'s gang launched members while {} was neither held nor launched",
                t.id
            )),
        }
    }

    /// [`World::gang_whole`] after a commit (its LM's output `out`) that launched
    /// members: a partial one is remembered until its GM restarts the gang whole.
    /// A commit that launched only void runs (it reached its LM after the GM had
    /// restarted the gang whole: its stop, still on its way, kills them and the GM
    /// drops their ends) is repaired already (seed 3201).
    pub(super) fn gang_checked(&mut self, gm: GmId, job: JobId, out: &lm_core::LmOutput) {
        let launched_now = (out.events.iter()).any(|e| {
            e.task.job == job && matches!(e.kind, common::events::TaskEventKind::Launched { .. })
        });
        if !launched_now {
            return;
        }
        let runs: Vec<(TaskId, u32)> = (out.to_workers.iter())
            .filter_map(|o| match o {
                LmToWorker::Start(s) if s.task.id.job == job => Some((s.task.id, s.task.attempt)),
                _ => None,
            })
            .collect();
        let void = |(task, run): &(TaskId, u32)| {
            (self.gang_next_run.get(task)).is_some_and(|next| run < next)
        };
        if !runs.is_empty() && runs.iter().all(void) {
            self.note(|| {
                format!("  a commit of {job}'s restarted gang launched void runs {runs:?}")
            });
            return;
        }
        if let Err(detail) = self.gang_whole(gm, job) {
            self.note(|| format!("  partial gang commit (to be restarted whole): {detail}"));
            self.gang_partial.entry(job).or_insert(detail);
        }
    }

    /// A GM restarted the gang of `job` whole: its partial commit (if any) is
    /// repaired, and each member's runs before `next` are void.
    pub(super) fn gang_restarted(&mut self, job: JobId, members: &[(TaskId, u32)]) {
        self.gang_partial.remove(&job);
        self.gang_restarts += 1;
        for &(task, next) in members {
            self.gang_next_run.insert(task, next);
            self.checker.gang_restarted(task);
        }
    }

    /// An end of a gang member restarted whole, before its next run launched: the
    /// end of a void run (e.g. a finish a restarted LM learns from its worker's
    /// registration, which names no run).
    pub(super) fn void_gang_end(&self, event: &common::events::TaskEvent) -> bool {
        use common::events::TaskEventKind::{Failed, Finished};
        matches!(event.kind, Finished { .. } | Failed { .. })
            && self.gang_next_run.contains_key(&event.task)
            && !self.checker.launched(&event.task)
    }

    /// At the end of the run: every partial gang commit was repaired.
    pub(super) fn gangs_repaired(&self) -> Result<(), check::Broken> {
        match self.gang_partial.iter().next() {
            None => Ok(()),
            Some((_, detail)) => Err((
                Invariant::PartialGang,
                format!("{detail}, and its GM never restarted the gang whole"),
            )),
        }
    }
}
