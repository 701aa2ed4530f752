//! Gangs in the GM's step (see [`crate::gang`]): submission, the reserve rounds a
//! pass starts, the LMs' answers, the timers, and what a gang's end means to the
//! rest of the GM (ordinary queues, lifecycle, cancel).

use super::step::GmOutput;
use super::GlobalMaster;
use crate::gang::GangEffects;
use common::gang::GangSpec;
use common::messages::{GangAnswer, TaskEnd};
use common::retry::RetryPolicy;
use common::{JobId, LmId, Micros, TaskSpec};

impl GlobalMaster {
    /// Takes the tasks of one job as a gang. An empty job is nothing to wait for.
    pub(super) fn submit_gang(
        &mut self,
        now: Micros,
        tasks: Vec<TaskSpec>,
        retry: RetryPolicy,
        gang: GangSpec,
        out: &mut GmOutput,
    ) {
        let Some(job) = tasks.first().map(|t| t.id.job) else {
            return;
        };
        self.lifecycle.submitted(&tasks, retry);
        self.stats.submitted += tasks.len() as u64;
        for _ in &tasks {
            self.ordering.arrived();
        }
        self.gangs.submit(now, job, tasks, gang, retry);
        out.wants_pass = true;
    }

    /// Tasks a restarted GM resumes: those of the gangs that had not started go
    /// back to waiting as gangs (a gang with none of its tasks here is left
    /// alone); the others are returned. A gang some of whose members an LM holds
    /// (`held`, each as its run) while others resume here was left running in
    /// part (the earlier life died between a partial commit and its stops): it is
    /// restarted whole (docs/gangs.md, "A GM restarted mid-commit").
    pub(super) fn resume_gangs(
        &mut self,
        now: Micros,
        mut tasks: Vec<TaskSpec>,
        held: &[(TaskSpec, u32)],
        (gangs, retry): (Vec<(JobId, GangSpec)>, RetryPolicy),
        out: &mut GmOutput,
    ) -> Vec<TaskSpec> {
        for (job, spec) in gangs {
            let (mut members, rest): (Vec<TaskSpec>, Vec<TaskSpec>) =
                tasks.into_iter().partition(|t| t.id.job == job);
            tasks = rest;
            if members.is_empty() {
                continue;
            }
            let running: Vec<TaskSpec> = (held.iter())
                .filter(|(t, _)| t.id.job == job)
                .map(|(t, _)| t.clone())
                .collect();
            let broken = !running.is_empty();
            if broken {
                // Each member's last run is void, the one held and the one that
                // may have gone out alike: the restart runs each as the next.
                for t in &mut members {
                    t.attempt = t.attempt.saturating_sub(1);
                }
                members.extend(running);
            }
            let spec = GangSpec {
                min_members: spec.min_members.min(members.len() as u32),
                ..spec
            };
            self.stats.submitted += members.len() as u64;
            for _ in &members {
                self.ordering.arrived();
            }
            out.wants_pass = true;
            if !broken {
                self.gangs.submit(now, job, members, spec, retry);
                continue;
            }
            let (me, lms) = ((self.config.id, self.config.life), self.view.lms().len());
            let fx = (self.gangs).resume_broken(now, (job, members), (spec, retry), lms, me);
            self.apply_gang_effects(now, fx, out);
        }
        tasks
    }

    /// A pass's gang stage (before the ordinary pass, so that a gang is not starved
    /// by single tasks taking its room one by one).
    pub(super) fn place_gangs(&mut self, now: Micros, out: &mut GmOutput) {
        if self.gangs.is_empty() {
            return;
        }
        let (gm, life) = (self.config.id, self.config.life);
        let fx = self.gangs.place(now, &mut self.view, gm, life);
        self.apply_gang_effects(now, fx, out);
    }

    pub(super) fn gang_answered(&mut self, now: Micros, answer: &GangAnswer, out: &mut GmOutput) {
        self.apply_snapshot(now, &answer.snapshot);
        let (gm, life) = (self.config.id, self.config.life);
        let fx = self.gangs.answer(now, answer, &self.view, gm, life);
        self.apply_gang_effects(now, fx, out);
    }

    pub(super) fn gang_undelivered(
        &mut self,
        now: Micros,
        lm: LmId,
        job: JobId,
        generation: u32,
        out: &mut GmOutput,
    ) {
        let (gm, life) = (self.config.id, self.config.life);
        let fx = self.gangs.undelivered(now, lm, job, generation, gm, life);
        self.apply_gang_effects(now, fx, out);
    }

    /// The gangs' timers (checked at every step: time is an input). True when a
    /// pass may now do something for them.
    pub(super) fn gangs_due(&mut self, now: Micros, out: &mut GmOutput) -> bool {
        if !self.gangs.anything_due(now) {
            return false;
        }
        let (gm, life) = (self.config.id, self.config.life);
        let fx = self.gangs.due(now, gm, life);
        self.apply_gang_effects(now, fx, out);
        true
    }

    /// A cancelled job's gang leaves, its held parts released.
    pub(super) fn cancel_gang(&mut self, job: JobId, out: &mut GmOutput) {
        let (gm, life) = (self.config.id, self.config.life);
        if let Some((tasks, fx)) = self.gangs.cancel(job, gm, life) {
            self.stats.tasks_cancelled += tasks.len() as u64;
            out.cancelled.extend(tasks);
            out.to_lms.extend(fx.to_lms);
        }
    }

    fn apply_gang_effects(&mut self, now: Micros, fx: GangEffects, out: &mut GmOutput) {
        if fx.is_empty() {
            return;
        }
        let GangEffects {
            to_lms,
            started,
            to_queue,
            failed,
            partial,
            restarted,
            ended,
            credits,
            launched,
        } = fx;
        out.answered.launched.extend(launched);
        for (lm, node, resources) in credits {
            if let Some(view) = self.view.get_mut(lm.index()) {
                view.credit(node, &resources);
            }
        }
        out.to_lms.extend(to_lms);
        for (job, tasks) in started {
            self.stats.launched += tasks.len() as u64;
            out.gangs_started.push((job, tasks));
        }
        if !to_queue.is_empty() {
            for task in to_queue {
                self.backlog.push_ready(super::new_pending(now, task));
            }
            out.wants_pass = true;
        }
        for (job, tasks) in failed {
            for &task in &tasks {
                self.lifecycle.gave_up(task);
            }
            out.gangs_failed.push((job, tasks));
        }
        out.gangs_partial.extend(partial);
        for (job, members) in restarted {
            // Part of it may have run: stopped, and placed again whole. Reports of
            // the stopped runs are stale from now on.
            for &(task, attempt) in &members {
                self.lifecycle.relaunched(task, attempt);
            }
            out.gangs_restarted.push((job, members));
        }
        if !ended.is_empty() {
            self.tasks_ended(now, ended, out);
        }
    }

    /// The ends the gangs let through (see [`crate::gang::Gangs::take_end`]); with
    /// `hold`, those of members whose gang is committing wait for its start.
    pub(super) fn gang_ends(
        &mut self,
        now: Micros,
        ends: Vec<TaskEnd>,
        hold: bool,
        out: &mut GmOutput,
    ) -> Vec<TaskEnd> {
        if self.gangs.is_empty() && self.gangs.stats.broken == 0 {
            return ends;
        }
        let me = (self.config.id, self.config.life);
        let mut fx = GangEffects::default();
        let ends = (ends.into_iter())
            .filter_map(|end| self.gangs.take_end(now, end, hold, me, &mut fx))
            .collect();
        self.apply_gang_effects(now, fx, out);
        ends
    }
}
