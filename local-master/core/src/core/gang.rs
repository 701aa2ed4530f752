//! Gang transactions at the LM (see `common::gang` and `docs/gangs.md`): a reserve
//! is verified against the true state and its room held (taken out of `free`, so
//! that no launch, preemption or other gang gets it and every snapshot shows it
//! used) until the commit of that generation launches it, a release gives it back,
//! or it expires (a [`crate::LmInput::Tick`] at or after its expiry: time is an
//! input).

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use crate::gang_holds::Hold;
use crate::validate::validate_placement;
use common::gang::ANY_GENERATION;
use common::messages::{GangAnswer, GangOp, GangOutcome, GangRequest, LaunchRequest};
use common::reasons::RejectReason;
use common::{GmId, JobId, Micros, TaskId, TaskKind};

impl LocalMaster {
    /// One step of a gang's transaction; answered with the LM's state.
    pub fn handle_gang(&mut self, now: Micros, request: GangRequest) -> Result<LmEffects, LmError> {
        self.check_addressed(request.lm)?;
        // Before the life is admitted (which may record a newer one): a refused
        // request changes nothing.
        if let GangOp::Stop { members } = &request.op {
            if let Some(&(task, _)) = members.iter().find(|(t, _)| t.job != request.job) {
                return Err(LmError::ForeignGangMember {
                    job: request.job,
                    task,
                });
            }
        }
        self.check_life(request.gm, request.life)?;
        let GangRequest {
            gm,
            life,
            job,
            generation,
            op,
            ..
        } = request;
        let label = op.label();
        let mut effects = LmEffects::default();
        let outcome = match op {
            GangOp::Reserve { requests, hold_for } => {
                self.gang_reserve(now, gm, job, generation, requests, hold_for)
            }
            GangOp::Commit => self.gang_commit(now, (gm, life), job, generation, &mut effects),
            GangOp::Release => self.gang_release(gm, job, generation),
            GangOp::Stop { members } if generation == ANY_GENERATION => {
                self.gang_stop_any((gm, life), job, &members, &mut effects)
            }
            GangOp::Stop { members } => self.gang_stop(gm, job, generation, &members, &mut effects),
        };
        effects.gang_response = Some(Box::new(GangAnswer {
            lm: self.topology.lm,
            gm,
            job,
            generation,
            op: label.to_owned(),
            outcome,
            snapshot: self.snapshot(now),
        }));
        Ok(effects)
    }

    fn gang_reserve(
        &mut self,
        now: Micros,
        gm: GmId,
        job: JobId,
        generation: u32,
        requests: Vec<LaunchRequest>,
        hold_for: Micros,
    ) -> GangOutcome {
        let seen = self.gangs.seen(gm, job);
        if generation < seen.newest || seen.committed.is_some() {
            // An abandoned attempt (the GM moved on), or a gang already launched
            // here: nothing is held for it.
            self.gangs.counters.stale += 1;
            return GangOutcome::Stale {
                newest: seen.newest.max(seen.committed.unwrap_or(0)),
            };
        }
        self.gangs.saw(gm, job, generation);
        match self.gangs.get(gm, job) {
            // The same reserve again (its answer was lost): the same answer.
            Some(hold) if hold.generation == generation && hold.requests == requests => {
                return GangOutcome::Held
            }
            // An older generation is abandoned (or the same one of an earlier
            // life of the GM, which numbers its generations anew): its room
            // comes back first.
            Some(_) => self.give_back_hold(gm, job),
            None => {}
        }
        match self.check_part(gm, &requests) {
            Ok(()) => {
                for r in &requests {
                    let n = r.node.index();
                    self.free[n] = self.free[n].saturating_sub(&r.task.resources);
                    self.touch(n);
                }
                self.version += 1;
                self.gangs.counters.held += 1;
                let expires = now + hold_for;
                self.gangs.insert(
                    gm,
                    job,
                    Hold {
                        generation,
                        requests,
                        expires,
                    },
                );
                GangOutcome::Held
            }
            Err(reasons) => {
                self.gangs.counters.refused += 1;
                GangOutcome::Refused(reasons)
            }
        }
    }

    /// Every request of a part checked as a launch would be, and the part's total
    /// per node against the free room: all or nothing. Gangs do not reclaim room
    /// from QUEUEABLE work and cannot be QUEUEABLE.
    fn check_part(
        &self,
        gm: GmId,
        requests: &[LaunchRequest],
    ) -> Result<(), Vec<(TaskId, RejectReason)>> {
        let mut taken: Vec<(usize, common::Resources)> = Vec::new();
        let mut refused = Vec::new();
        for r in requests {
            let id = r.task.id;
            let n = r.node.index();
            // (A member of a gang restarted whole whose earlier run's kill is not
            // confirmed yet counts as running.)
            let checked = if self.running.contains_key(&id)
                || self.queued.contains_key(&id)
                || self.is_cancelling(id)
                || self.restarted.has_finished(&id, r.task.attempt)
                || self.gangs.holds_task(id)
                || requests.iter().filter(|o| o.task.id == id).count() > 1
            {
                Err(RejectReason::Duplicate)
            } else if r.task.kind == TaskKind::Queueable {
                Err(RejectReason::Invalid {
                    detail: format!("task {id} of a gang is QUEUEABLE"),
                })
            } else {
                validate_placement(&self.topology, gm, r)
            };
            let checked = checked.and_then(|()| {
                if self.is_down(r.node) {
                    return Err(RejectReason::NodeDown);
                }
                if self.is_drained(r.node) {
                    return Err(RejectReason::NodeDrained);
                }
                let before = (taken.iter())
                    .filter(|(m, _)| *m == n)
                    .map(|(_, res)| *res)
                    .sum::<common::Resources>();
                let free = self.free[n].saturating_sub(&before);
                if free.fits(&r.task.resources) {
                    taken.push((n, r.task.resources));
                    Ok(())
                } else {
                    Err(RejectReason::InsufficientResources { free })
                }
            });
            if let Err(reason) = checked {
                refused.push((id, reason));
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(refused)
        }
    }

    fn gang_commit(
        &mut self,
        now: Micros,
        (gm, life): (GmId, u64),
        job: JobId,
        generation: u32,
        effects: &mut LmEffects,
    ) -> GangOutcome {
        let seen = self.gangs.seen(gm, job);
        if seen.committed == Some(generation) {
            return GangOutcome::Committed;
        }
        let held = self
            .gangs
            .get(gm, job)
            .filter(|h| h.generation == generation);
        let Some(hold) = held else {
            self.gangs.counters.not_held += 1;
            return GangOutcome::NotHeld;
        };
        if hold.requests.iter().any(|r| self.is_down(r.node)) {
            // Its worker died while the part was held: nothing of the part
            // launches (a member never starts alone); the GM restarts the gang
            // whole (docs/gangs.md, "Restart whole").
            self.give_back_hold(gm, job);
            self.gangs.counters.not_held += 1;
            return GangOutcome::NotHeld;
        }
        let Some(hold) = self.gangs.take(gm, job) else {
            return GangOutcome::NotHeld;
        };
        self.gangs.mark_committed(gm, job, Some((generation, life)));
        self.gangs.counters.committed += 1;
        for r in hold.requests {
            let n = r.node.index();
            self.free[n] = self.free[n].add(&r.task.resources);
            self.touch(n);
            let id = r.task.id;
            self.allocate(now, gm, r.node, r.placement, r.task, effects);
            if let Some(a) = self.running.get_mut(&id) {
                a.gang = true;
            }
        }
        self.version += 1;
        GangOutcome::Committed
    }

    fn gang_release(&mut self, gm: GmId, job: JobId, generation: u32) -> GangOutcome {
        self.gangs.saw(gm, job, generation);
        if self
            .gangs
            .get(gm, job)
            .is_some_and(|h| h.generation <= generation)
        {
            self.give_back_hold(gm, job);
            self.gangs.counters.released += 1;
        }
        GangOutcome::Released
    }

    /// The gang is restarted whole (see [`GangOp::Stop`]): its members this GM
    /// launched here are stopped unless a newer generation was committed here, a
    /// part held for this generation or an older one is given back, and a commit of
    /// this generation is forgotten (the next generation may be reserved here).
    fn gang_stop(
        &mut self,
        gm: GmId,
        job: JobId,
        generation: u32,
        members: &[(TaskId, u32)],
        effects: &mut LmEffects,
    ) -> GangOutcome {
        self.gang_release(gm, job, generation);
        self.void_members(members);
        let seen = self.gangs.seen(gm, job);
        if seen.committed.is_none_or(|c| c <= generation) {
            self.stop_members(gm, job, effects);
        }
        GangOutcome::Released
    }

    /// A restarted GM's stop of a gang an earlier life of it left running in part
    /// (see [`ANY_GENERATION`]): the members here are stopped unless this GM life
    /// (or a newer one) committed a generation here since, a part held is given
    /// back (the restarted GM reserves nothing before every stop is answered: a
    /// hold is an earlier life's), and no generation is recorded as seen.
    fn gang_stop_any(
        &mut self,
        (gm, life): (GmId, u64),
        job: JobId,
        members: &[(TaskId, u32)],
        effects: &mut LmEffects,
    ) -> GangOutcome {
        self.give_back_hold(gm, job);
        self.void_members(members);
        let seen = self.gangs.seen(gm, job);
        if seen.committed_life.is_none_or(|by| by < life) {
            self.stop_members(gm, job, effects);
        }
        GangOutcome::Released
    }

    /// The runs of a gang restarted whole before each member's next one are void.
    fn void_members(&mut self, members: &[(TaskId, u32)]) {
        for &(task, next) in members {
            self.restarted.forget_finished(task, next);
            self.gangs.void_before(task, next);
        }
    }

    /// Kills the members of gang (`gm`, `job`) launched here and forgets its commit.
    fn stop_members(&mut self, gm: GmId, job: JobId, effects: &mut LmEffects) {
        let (stopped, _) = self.stop_job(gm, job, effects);
        self.gangs.counters.stopped += stopped.len() as u64;
        self.gangs.mark_committed(gm, job, None);
    }

    /// Gives a held part's room back to its nodes.
    fn give_back_hold(&mut self, gm: GmId, job: JobId) {
        if let Some(hold) = self.gangs.take(gm, job) {
            for r in &hold.requests {
                let n = r.node.index();
                if self.is_down(r.node) {
                    // A down node has nothing free; it comes back whole, less
                    // what is still held there.
                    continue;
                }
                let back = self.free[n].add(&r.task.resources);
                let cap = self.topology.capacity[n];
                self.free[n] = common::Resources::new(
                    back.cpu_millis.min(cap.cpu_millis),
                    back.memory_mb.min(cap.memory_mb),
                );
                self.touch(n);
            }
            self.version += 1;
        }
    }

    /// Gives back every hold expired at `now` (its GM never committed nor released:
    /// it died, or its commit was lost).
    pub(crate) fn expire_holds(&mut self, now: Micros) -> usize {
        let expired = self.gangs.take_expired(now);
        for ((gm, job), hold) in &expired {
            self.gangs.insert(*gm, *job, hold.clone());
            self.give_back_hold(*gm, *job);
        }
        self.gangs.counters.expired += expired.len() as u64;
        expired.len()
    }

    /// Gang transaction counters at this LM.
    pub fn gang_counters(&self) -> crate::gang_holds::GangCounters {
        self.gangs.counters
    }

    /// The part held for gang (`gm`, `job`): its generation and tasks.
    pub fn gang_hold(&self, gm: GmId, job: JobId) -> Option<(u32, Vec<TaskId>)> {
        let hold = self.gangs.get(gm, job)?;
        Some((
            hold.generation,
            hold.requests.iter().map(|r| r.task.id).collect(),
        ))
    }

    /// Gang parts held now.
    pub fn gang_holds(&self) -> usize {
        self.gangs.len()
    }
}
