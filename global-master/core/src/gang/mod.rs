//! Gangs at the GM that owns their job (issue 37; `docs/gangs.md`): a gang waits
//! here, not in the user queues, until a pass finds room for (at least
//! `min_members` of) its members; then each LM of the plan is sent its part as a
//! reserve of a new generation, the plan's room is deducted from the view, and the
//! gang commits when every part is held, or releases every part and waits again.
//!
//! - Answers of another generation than the current attempt's are stale: a `Held`
//!   one is released at once (its LM would otherwise hold it until expiry), never
//!   committed.
//! - The GM commits only until `commit_by` (the reserve's departure + half the
//!   hold): an LM's hold lasts `hold_for` from the reserve's arrival, so a commit
//!   sent in time reaches a part still held unless it travels longer than half
//!   the hold. Past `commit_by` with a part unanswered the attempt is released.
//! - A commit an LM answers `NotHeld` (its hold is gone: the LM restarted, the
//!   hold expired, or a member's node went down), or one that cannot be delivered
//!   while the part is surely held, breaks the gang: other parts may have launched,
//!   so the gang is restarted whole ([`restart`]; [`GangEffects::restarted`]).
//!
//! Time is an input: the attempt's timers are checked at every step.

pub mod plan;
mod requests;
mod restart;
mod types;

use requests::{describe, gang_request, release_request, stop_request};
use types::{Gang, Part, Phase};
pub use types::{GangConfig, GangEffects, GangStats};

use crate::cluster_view::ClusterView;
use common::gang::{GangSpec, OnTimeout, ANY_GENERATION};
use common::messages::{GangAnswer, GangOp, GangOutcome, GangRequest, LaunchRequest, TaskEnd};
use common::protocol::GmToLm;
use common::retry::RetryPolicy;
use common::{GmId, JobId, LmId, Micros, TaskId, TaskSpec};
use std::collections::BTreeMap;

/// The gangs of one GM.
#[derive(Debug, Default)]
pub struct Gangs {
    config: GangConfig,
    gangs: BTreeMap<JobId, Gang>,
    /// Where the next plan starts (rotates).
    start: usize,
    /// Members' runs of generations restarted whole.
    void: restart::VoidRuns,
    pub stats: GangStats,
}

impl Gangs {
    pub fn new(config: GangConfig) -> Self {
        Gangs {
            config,
            ..Gangs::default()
        }
    }

    /// Takes a gang: it waits for a pass. The caller checked `spec` against the
    /// task count (`GangSpec::checked`).
    pub fn submit(
        &mut self,
        now: Micros,
        job: JobId,
        tasks: Vec<TaskSpec>,
        spec: GangSpec,
        retry: RetryPolicy,
    ) {
        self.stats.submitted += 1;
        self.gangs.insert(
            job,
            Gang {
                tasks,
                spec,
                retry,
                deadline: now + spec.timeout,
                generation: 0,
                phase: Phase::Waiting { not_before: now },
                why: "waiting for a pass".into(),
                retry_pending: false,
                ends: Vec::new(),
            },
        );
    }

    /// A gang a restarted GM finds run in part (docs/gangs.md, "A GM restarted
    /// mid-commit"): restarted whole at once, a stop of [`ANY_GENERATION`] to each
    /// of the `lms` LMs, each member's run in `tasks` void.
    pub fn resume_broken(
        &mut self,
        now: Micros,
        (job, tasks): (JobId, Vec<TaskSpec>),
        (spec, retry): (GangSpec, RetryPolicy),
        lms: usize,
        (gm, life): (GmId, u64),
    ) -> GangEffects {
        self.submit(now, job, tasks, spec, retry);
        let mut fx = GangEffects::default();
        if let Some(gang) = self.gangs.get_mut(&job) {
            gang.generation = ANY_GENERATION;
            gang.phase = restart::committed_on((0..lms).map(|l| LmId(l as u16)), now);
        }
        self.restart(now, job, &mut fx, gm, life);
        fx
    }

    /// Gangs not started yet.
    pub fn len(&self) -> usize {
        self.gangs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.gangs.is_empty()
    }

    /// A gang's tasks, its current generation and why it waits, if it waits here.
    pub fn waiting(&self, job: JobId) -> Option<(&[TaskSpec], u32, &str)> {
        let g = self.gangs.get(&job)?;
        Some((&g.tasks, g.generation, &g.why))
    }

    /// The retry policy a gang was submitted with.
    pub fn retry_of(&self, job: JobId) -> Option<RetryPolicy> {
        self.gangs.get(&job).map(|g| g.retry)
    }

    /// Tries every waiting gang whose retry time has come: a plan from the view
    /// with at least `min_members` picks becomes a reserve round of a new
    /// generation, its room deducted from the view.
    pub fn place(
        &mut self,
        now: Micros,
        view: &mut ClusterView,
        gm: GmId,
        life: u64,
    ) -> GangEffects {
        let mut fx = GangEffects::default();
        let lms = view.lms().len().max(1);
        let mut candidates: Option<plan::Candidates> = None;
        for (&job, gang) in self.gangs.iter_mut() {
            let Phase::Waiting { not_before } = gang.phase else {
                continue;
            };
            if not_before > now {
                continue;
            }
            gang.retry_pending = false;
            let candidates =
                candidates.get_or_insert_with(|| plan::Candidates::read(view, gm, self.start));
            // The first `min_members` members' demand against everything free: a
            // gang that cannot fit is not planned (an overloaded cluster costs one
            // read of the view per pass, not one plan per waiting gang).
            let least = (gang.tasks.iter())
                .take(gang.spec.min_members as usize)
                .map(|t| t.resources)
                .sum::<common::Resources>();
            if !candidates.total.fits(&least) {
                gang.why = format!(
                    "{} free in the view; the {} members that must start together need {}",
                    candidates.total, gang.spec.min_members, least
                );
                continue;
            }
            let picks = plan::plan(candidates, &gang.tasks);
            if picks.len() < gang.spec.min_members as usize {
                gang.why = format!(
                    "room for {} of the {} members that must start together",
                    picks.len(),
                    gang.spec.min_members
                );
                continue;
            }
            candidates.take(&picks, &gang.tasks);
            self.start = (self.start + 1) % lms;
            gang.generation += 1;
            self.stats.attempts += 1;
            let mut parts: BTreeMap<LmId, Part> = BTreeMap::new();
            for pick in picks {
                let task = gang.tasks[pick.member].clone();
                if let Some(v) = view.get_mut(pick.lm.index()) {
                    v.deduct(pick.node, &task.resources);
                }
                parts
                    .entry(pick.lm)
                    .or_insert_with(|| Part {
                        requests: Vec::new(),
                        held: false,
                        life: 0,
                        committed: false,
                    })
                    .requests
                    .push(LaunchRequest {
                        task,
                        node: pick.node,
                        placement: pick.placement,
                    });
            }
            for (&lm, part) in &parts {
                fx.to_lms.push(GmToLm::Gang(GangRequest {
                    gm,
                    life,
                    lm,
                    job,
                    generation: gang.generation,
                    op: GangOp::Reserve {
                        requests: part.requests.clone(),
                        hold_for: self.config.hold_for,
                    },
                }));
            }
            gang.why = format!(
                "generation {} reserving on {} LMs",
                gang.generation,
                parts.len()
            );
            gang.phase = Phase::Reserving {
                parts,
                commit_by: now + Micros(self.config.hold_for.0 / 2),
            };
        }
        fx
    }

    /// An LM's answer. The caller applied its snapshot to `view` first.
    pub fn answer(
        &mut self,
        now: Micros,
        answer: &GangAnswer,
        view: &ClusterView,
        gm: GmId,
        life: u64,
    ) -> GangEffects {
        let mut fx = GangEffects::default();
        let release =
            |lm: LmId, job: JobId, generation: u32| release_request(gm, life, lm, job, generation);
        let current = self
            .gangs
            .get(&answer.job)
            .filter(|g| g.generation == answer.generation);
        let Some(gang) = current else {
            // An abandoned attempt (or a gang that started or ended since): a part
            // it holds is given back now, never committed.
            self.stats.stale_answers += 1;
            if answer.outcome == GangOutcome::Held {
                fx.to_lms
                    .push(release(answer.lm, answer.job, answer.generation));
            }
            return fx;
        };
        let job = answer.job;
        let generation = gang.generation;
        let stage = match gang.phase {
            Phase::Waiting { .. } => Stage::Waiting,
            Phase::Reserving { .. } => Stage::Reserving,
            Phase::Committing { .. } => Stage::Committing,
            Phase::Stopping { .. } => Stage::Stopping,
        };
        match (&answer.outcome, stage) {
            (GangOutcome::Held, Stage::Reserving) => {
                self.stats.parts_held += 1;
                let gang = self.gangs.get_mut(&job).expect("current");
                let Phase::Reserving { parts, commit_by } = &mut gang.phase else {
                    unreachable!()
                };
                if let Some(p) = parts.get_mut(&answer.lm) {
                    p.held = true;
                    p.life = answer.snapshot.incarnation;
                }
                // A part held by an LM life the view has seen replaced died with
                // it: committing the others would start half the gang.
                let restarted = (parts.iter())
                    .find(|(lm, p)| {
                        view.lm(**lm)
                            .is_some_and(|v| v.incarnation != p.life && p.held)
                    })
                    .map(|(lm, _)| *lm);
                if let Some(lm) = restarted {
                    let why = format!("{lm} restarted since it held its part");
                    self.abandon(now, job, &why, &mut fx, gm, life);
                } else if parts.values().all(|p| p.held) {
                    if now <= *commit_by {
                        for &lm in parts.keys() {
                            fx.to_lms.push(gang_request(
                                gm,
                                life,
                                lm,
                                job,
                                generation,
                                GangOp::Commit,
                            ));
                        }
                        let parts = std::mem::take(parts);
                        let resend_until = *commit_by + Micros(self.config.hold_for.0 / 2);
                        gang.why = format!("generation {generation} committing");
                        gang.phase = Phase::Committing {
                            parts,
                            resend_until,
                        };
                    } else {
                        self.abandon(
                            now,
                            job,
                            "every part held, too late to commit",
                            &mut fx,
                            gm,
                            life,
                        );
                    }
                }
            }
            (GangOutcome::Refused(_) | GangOutcome::Stale { .. }, Stage::Reserving) => {
                self.stats.parts_refused += 1;
                if let GangOutcome::Stale { newest } = answer.outcome {
                    // A newer generation was seen there (an earlier life of this
                    // GM): the next attempt goes above it.
                    let gang = self.gangs.get_mut(&job).expect("current");
                    gang.generation = gang.generation.max(newest);
                }
                let why = format!(
                    "{} refused its part ({})",
                    answer.lm,
                    describe(&answer.outcome)
                );
                // The refusing LM holds nothing; every other part is released.
                self.abandon_except(now, job, Some(answer.lm), &why, &mut fx, gm, life);
            }
            (GangOutcome::Committed, Stage::Committing) => {
                let gang = self.gangs.get_mut(&job).expect("current");
                let Phase::Committing { parts, .. } = &mut gang.phase else {
                    unreachable!()
                };
                if let Some(p) = parts.get_mut(&answer.lm).filter(|p| !p.committed) {
                    p.committed = true;
                    fx.launched = p.requests.iter().map(|r| r.task.id).collect();
                }
                if parts.values().all(|p| p.committed) {
                    let gang = self.gangs.remove(&job).expect("current");
                    let Phase::Committing { parts, .. } = gang.phase else {
                        unreachable!()
                    };
                    let launched: Vec<TaskId> = (parts.values())
                        .flat_map(|p| p.requests.iter().map(|r| r.task.id))
                        .collect();
                    fx.to_queue
                        .extend((gang.tasks.into_iter()).filter(|t| !launched.contains(&t.id)));
                    fx.ended.extend(gang.ends);
                    self.stats.started += 1;
                    fx.started.push((job, launched));
                }
            }
            (GangOutcome::NotHeld, Stage::Committing) => {
                // Some part may already run: the gang is broken, restarted whole.
                self.restart(now, job, &mut fx, gm, life);
            }
            (GangOutcome::Released, Stage::Stopping) => {
                // (Every LM answer is followed by a pass.)
                let gang = self.gangs.get_mut(&job).expect("current");
                restart::stop_answered(now, gang, answer.lm);
            }
            // A reserve of an attempt given up, or of a stopped generation, that
            // arrived after its release or stop: given back at once.
            (GangOutcome::Held, Stage::Waiting | Stage::Stopping) => {
                fx.to_lms
                    .push(release(answer.lm, answer.job, answer.generation));
            }
            // Answers to releases, repeats: nothing to do.
            _ => {}
        }
        fx
    }

    /// A request the transport gave up on. A reserve's attempt is abandoned (its
    /// other parts released); a commit is sent again until the part's earliest
    /// expiry, after which it may have expired while others run: the gang is
    /// broken.
    pub fn undelivered(
        &mut self,
        now: Micros,
        lm: LmId,
        job: JobId,
        generation: u32,
        gm: GmId,
        life: u64,
    ) -> GangEffects {
        let mut fx = GangEffects::default();
        let Some(gang) = self.gangs.get(&job).filter(|g| g.generation == generation) else {
            return fx;
        };
        match gang.phase {
            Phase::Reserving { .. } => {
                let why = format!("reserve to {lm} not delivered");
                // The part may have been held after all: released too.
                self.abandon_except(now, job, None, &why, &mut fx, gm, life);
            }
            // Sent again while the part is surely still held (or launched: a
            // commit answered before is answered `Committed` again); after that
            // the part may have expired while others launched: broken.
            Phase::Committing {
                ref parts,
                resend_until,
            } if now < resend_until && parts.get(&lm).is_some_and(|p| !p.committed) => {
                self.stats.commits_resent += 1;
                fx.to_lms
                    .push(gang_request(gm, life, lm, job, generation, GangOp::Commit));
            }
            Phase::Committing { .. } => self.restart(now, job, &mut fx, gm, life),
            // A stop is sent until its LM answers it.
            Phase::Stopping { ref awaiting, .. } if awaiting.contains(&lm) => {
                fx.to_lms.push(stop_request(gm, life, lm, job, gang));
            }
            Phase::Stopping { .. } | Phase::Waiting { .. } => {}
        }
        fx
    }

    /// The timers: an attempt past `commit_by` is released; a waiting gang past its
    /// deadline times out.
    pub fn due(&mut self, now: Micros, gm: GmId, life: u64) -> GangEffects {
        let mut fx = GangEffects::default();
        let late: Vec<JobId> = (self.gangs.iter())
            .filter(
                |(_, g)| matches!(g.phase, Phase::Reserving { commit_by, .. } if commit_by < now),
            )
            .map(|(j, _)| *j)
            .collect();
        for job in late {
            self.abandon(
                now,
                job,
                "a part was not answered in time",
                &mut fx,
                gm,
                life,
            );
        }
        for g in self.gangs.values_mut() {
            restart::ready(now, g);
            if matches!(g.phase, Phase::Waiting { not_before } if not_before <= now) {
                // Its retry time came: the caller wants a pass.
                g.retry_pending = false;
            }
        }
        let timed_out: Vec<JobId> = (self.gangs.iter())
            .filter(|(_, g)| matches!(g.phase, Phase::Waiting { .. }) && g.deadline <= now)
            .map(|(j, _)| *j)
            .collect();
        for job in timed_out {
            let gang = self.gangs.remove(&job).expect("listed");
            self.stats.timed_out += 1;
            match gang.spec.on_timeout {
                OnTimeout::Fail => fx
                    .failed
                    .push((job, gang.tasks.iter().map(|t| t.id).collect())),
                OnTimeout::RunPartial => {
                    fx.partial.push(job);
                    fx.to_queue.extend(gang.tasks);
                }
            }
        }
        fx
    }

    /// When the next timer is due.
    pub fn next_wakeup(&self) -> Option<Micros> {
        (self.gangs.values())
            .filter_map(|g| match g.phase {
                Phase::Reserving { commit_by, .. } => Some(commit_by + Micros(1)),
                Phase::Waiting { not_before } if g.retry_pending => {
                    Some(not_before.min(g.deadline))
                }
                Phase::Waiting { .. } => Some(g.deadline),
                Phase::Stopping { .. } => restart::wakeup(g),
                Phase::Committing { .. } => None,
            })
            .min()
    }

    /// A waiting gang's deadline or retry time has come, or an attempt is late.
    pub fn anything_due(&self, now: Micros) -> bool {
        self.gangs.values().any(|g| match g.phase {
            Phase::Reserving { commit_by, .. } => commit_by < now,
            Phase::Waiting { not_before } => {
                g.deadline <= now || (g.retry_pending && not_before <= now)
            }
            Phase::Stopping { .. } => restart::wakeup(g).is_some_and(|at| at <= now),
            Phase::Committing { .. } => false,
        })
    }

    /// A member's end, if the gangs let it through: with `hold`, held while its
    /// gang commits (taken once every part is committed: [`GangEffects::ended`]);
    /// dropped if it is the end of a run of a generation restarted whole. A
    /// failure that cannot be held breaks a committing gang ([`restart::breaks`]).
    pub fn take_end(
        &mut self,
        now: Micros,
        end: TaskEnd,
        hold: bool,
        (gm, life): (GmId, u64),
        fx: &mut GangEffects,
    ) -> Option<TaskEnd> {
        let gang = self.gangs.get_mut(&end.task.job);
        if restart::breaks(gang.as_deref(), &self.void, &end, hold) {
            self.stats.void_ends += 1;
            self.restart(now, end.task.job, fx, gm, life);
            return None;
        }
        restart::take_end(gang, &self.void, end, hold, &mut self.stats.void_ends)
    }

    /// Restarts a gang broken after its commit whole (see [`restart`]).
    fn restart(&mut self, now: Micros, job: JobId, fx: &mut GangEffects, gm: GmId, life: u64) {
        let Some(gang) = self.gangs.get_mut(&job) else {
            return;
        };
        self.stats.broken += 1;
        for lm in restart::stop(now, job, gang, &self.config, &mut self.void, fx) {
            fx.to_lms.push(stop_request(gm, life, lm, job, gang));
        }
    }

    /// Drops a gang (its job was cancelled): every part it holds is released.
    pub fn cancel(
        &mut self,
        job: JobId,
        gm: GmId,
        life: u64,
    ) -> Option<(Vec<TaskId>, GangEffects)> {
        let gang = self.gangs.remove(&job)?;
        let mut fx = GangEffects::default();
        if let Phase::Reserving { parts, .. } | Phase::Committing { parts, .. } = &gang.phase {
            for &lm in parts.keys() {
                fx.to_lms
                    .push(release_request(gm, life, lm, job, gang.generation));
            }
        }
        Some((gang.tasks.iter().map(|t| t.id).collect(), fx))
    }

    fn abandon(
        &mut self,
        now: Micros,
        job: JobId,
        why: &str,
        fx: &mut GangEffects,
        gm: GmId,
        life: u64,
    ) {
        self.abandon_except(now, job, None, why, fx, gm, life);
    }

    /// Releases every part of the current attempt (but `except`'s) and waits.
    #[allow(clippy::too_many_arguments)]
    fn abandon_except(
        &mut self,
        now: Micros,
        job: JobId,
        except: Option<LmId>,
        why: &str,
        fx: &mut GangEffects,
        gm: GmId,
        life: u64,
    ) {
        let Some(gang) = self.gangs.get_mut(&job) else {
            return;
        };
        let parts = match &mut gang.phase {
            Phase::Reserving { parts, .. } | Phase::Committing { parts, .. } => {
                std::mem::take(parts)
            }
            Phase::Waiting { .. } | Phase::Stopping { .. } => return,
        };
        self.stats.released_attempts += 1;
        // A part not held changed nothing at its LM (refused, or its reserve never
        // arrived): no snapshot will undo the view's deduction. A held part's LM
        // changed (its answer's snapshot shows the hold) and will change again
        // when the release lands: its snapshots set the view right.
        for (&lm, part) in parts.iter().filter(|(_, p)| !p.held) {
            for r in &part.requests {
                fx.credits.push((lm, r.node, r.task.resources));
            }
        }
        for &lm in parts.keys().filter(|lm| Some(**lm) != except) {
            fx.to_lms
                .push(release_request(gm, life, lm, job, gang.generation));
        }
        gang.why = format!("generation {}: {why}", gang.generation);
        gang.retry_pending = true;
        gang.phase = Phase::Waiting {
            not_before: now + self.config.retry_after,
        };
    }
}

#[derive(Clone, Copy)]
enum Stage {
    Waiting,
    Reserving,
    Committing,
    Stopping,
}
