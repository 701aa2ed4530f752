//! Preemption verified by the LM (Megha Algorithm 2, the LM's half).
//!
//! A GM asks to preempt tasks of a `victim` queue to make room for one waiting task.
//! The LM, the only one with authoritative usage, first checks that the victim is over
//! its share here; then picks the node where the fewest victim tasks (then the least
//! lost work) free enough room for the task, preempts a minimal set of them, and
//! launches the waiting task in their place (in the same step: no victim is killed
//! for a task that would then wait). Preempted tasks go back to the GMs that own
//! their queues. The rules of [`common::preemption`] bound it: tasks in their
//! cool-down or at the per-task cap are never victims, a choice that would take the
//! victim queue below its protected share is not made, and at most `rate_limit`
//! tasks of a queue go per window (else `rate_limited`). A priority preemption
//! within a queue has its own cap and rate limit
//! ([`common::preemption::PreemptionRules::for_priority`]; none by default).

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::messages::{
    Placement, PreemptOutcome, PreemptRefusal, PreemptRequest, PreemptResponse,
};
use common::{Micros, NodeId, Resources, TaskId};

/// Which tasks to preempt on which node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VictimChoice {
    pub node: NodeId,
    pub victims: Vec<TaskId>,
}

impl LocalMaster {
    /// Handles a preemption request; the response carries the LM's new state. A
    /// fairness preemption that would kill is held first, under the rule `hold`
    /// (`core/preempt_hold.rs`).
    pub fn handle_preempt(
        &mut self,
        now: Micros,
        request: PreemptRequest,
    ) -> Result<LmEffects, LmError> {
        self.check_addressed(request.lm)?;
        self.check_life(request.gm, request.life)?;
        let mut effects = LmEffects::default();
        let (gm, task) = (request.gm, request.task.id);
        let outcome = match self.preempt_holds.until_of(gm, task) {
            // A late copy of a request this LM told the GM it did not hold: the
            // task went back to its queue and may run elsewhere.
            _ if self.preempt_holds.is_void(&request) => {
                PreemptOutcome::Refused(PreemptRefusal::Void)
            }
            // Sent again while held: the same answer, held once.
            Some(until) => PreemptOutcome::Held { until },
            None => match self.verify(now, &request) {
                Ok(choice) if choice.victims.is_empty() || !self.holds(&request) => {
                    self.carry_out(now, request, &choice, &mut effects)
                }
                Err(refusal) if !(self.holds(&request) && self.may_pass(&refusal, &request)) => {
                    PreemptOutcome::Refused(refusal)
                }
                _ => {
                    let until = now + self.rules().hold;
                    self.preempt_holds.hold(request, until);
                    PreemptOutcome::Held { until }
                }
            },
        };
        effects.preempt_response =
            Some(Box::new(self.preempt_answer(now, gm, task, outcome, false)));
        Ok(effects)
    }

    /// Preempts `choice`'s victims and launches the request's task on its node.
    pub(super) fn carry_out(
        &mut self,
        now: Micros,
        request: PreemptRequest,
        choice: &VictimChoice,
        effects: &mut LmEffects,
    ) -> PreemptOutcome {
        let priority = request.victim == request.task.queue;
        let preempted = self.preempt(now, (request.victim, priority), choice, effects);
        let placement = if self.topology.home[choice.node.index()] == request.gm {
            Placement::Internal
        } else {
            Placement::Repartition
        };
        self.allocate(
            now,
            request.gm,
            choice.node,
            placement,
            request.task,
            effects,
        );
        PreemptOutcome::Launched {
            node: choice.node,
            preempted,
        }
    }

    /// The answer to `gm`'s request for `task`, with this LM's state.
    pub(super) fn preempt_answer(
        &mut self,
        now: Micros,
        gm: common::GmId,
        task: TaskId,
        outcome: PreemptOutcome,
        held: bool,
    ) -> PreemptResponse {
        PreemptResponse {
            lm: self.topology.lm,
            gm,
            task,
            outcome,
            snapshot: self.snapshot(now),
            held,
        }
    }

    /// Whether room freeing by itself may make `refusal` moot, so that a held
    /// request waits for it rather than being refused: the rate limit, or victims
    /// that cannot free enough, when some node could host the task at all.
    fn may_pass(&self, refusal: &PreemptRefusal, request: &PreemptRequest) -> bool {
        let task = &request.task;
        match refusal {
            PreemptRefusal::RateLimited => true,
            PreemptRefusal::NothingToFree => (0..self.free.len()).any(|n| {
                !self.down[n]
                    && !self.drained[n]
                    && task.constraints.satisfied_by(self.topology.constraints[n])
                    && self.topology.capacity[n].fits(&task.resources)
            }),
            _ => false,
        }
    }

    /// Whether a request that would kill (or cannot kill yet) is held first: a
    /// fairness preemption, with a hold configured. A priority preemption is not
    /// held (the higher class should not wait).
    fn holds(&self, request: &PreemptRequest) -> bool {
        self.fairness.is_some()
            && request.victim != request.task.queue
            && self.rules().hold > Micros::ZERO
    }

    pub(super) fn verify(
        &self,
        now: Micros,
        request: &PreemptRequest,
    ) -> Result<VictimChoice, PreemptRefusal> {
        if request.victim == request.task.queue {
            return self.verify_priority(now, request);
        }
        let Some(fairness) = &self.fairness else {
            return Err(PreemptRefusal::NoFairness);
        };
        let task = &request.task;
        if task.resources.any_zero() {
            return Err(PreemptRefusal::Invalid {
                detail: "every resource dimension must be positive".into(),
            });
        }
        if request.gm.0 >= self.topology.gms {
            return Err(PreemptRefusal::Invalid {
                detail: format!("{} is not one of the global masters", request.gm),
            });
        }
        if self.running.contains_key(&task.id) {
            return Err(PreemptRefusal::Duplicate);
        }
        let usage = self.usage(request.victim);
        let usage_share = fairness.policy.share(&usage, &self.total);
        let share = fairness.share_of(request.victim);
        if usage_share <= share {
            return Err(PreemptRefusal::VictimNotOverShare { usage_share, share });
        }
        if self.preempt_room(now, request.victim) == 0 {
            return Err(PreemptRefusal::RateLimited);
        }
        self.choose_victims(now, request.victim, task)
            .ok_or(PreemptRefusal::NothingToFree)
    }

    /// A priority preemption (the victim queue is the task's own): only tasks of a
    /// lower class of the queue go, and they free all the task needs, so the
    /// queue's usage does not grow and no other queue's share moves. The rules
    /// for priority hold (cool-down; their own cap and rate limit, none by
    /// default), not fairness's budget.
    fn verify_priority(
        &self,
        now: Micros,
        request: &PreemptRequest,
    ) -> Result<VictimChoice, PreemptRefusal> {
        let task = &request.task;
        if task.resources.any_zero() || request.gm.0 >= self.topology.gms {
            return Err(PreemptRefusal::Invalid {
                detail: "a positive request from one of the global masters".into(),
            });
        }
        if self.running.contains_key(&task.id) {
            return Err(PreemptRefusal::Duplicate);
        }
        if self.priority_room(now, request.victim) == 0 {
            return Err(PreemptRefusal::RateLimited);
        }
        self.choose_lower_classes(now, task)
            .ok_or(PreemptRefusal::NothingToFree)
    }

    /// How many more tasks of `victim` the rate limit lets this LM preempt now.
    fn preempt_room(&self, now: Micros, victim: common::QueueId) -> usize {
        self.preempt_log.room(victim, now, &self.rules())
    }

    /// How many more tasks of `queue` this LM may preempt now for priority
    /// preemptions within it (their own rate limit).
    fn priority_room(&self, now: Micros, queue: common::QueueId) -> usize {
        self.priority_log
            .room(queue, now, &self.rules().for_priority())
    }

    /// The preemption rules: the configured ones, or the defaults without queues.
    fn rules(&self) -> common::preemption::PreemptionRules {
        self.fairness
            .as_ref()
            .map_or_else(Default::default, |f| f.rules)
    }

    /// The node where preempting the fewest victim tasks (then losing the least work)
    /// makes room for `task`, with a minimal set of victims: none of them could be
    /// spared. Within the rules: no task in its cool-down or at the per-task cap, no
    /// more tasks than the rate limit leaves, and the victim queue keeps its
    /// protected share of this LM.
    pub fn choose_victims(
        &self,
        now: Micros,
        victim: common::QueueId,
        task: &common::TaskSpec,
    ) -> Option<VictimChoice> {
        let rules = self.rules();
        let max_victims = self.preempt_room(now, victim);
        let usage = self.usage(victim);
        // The least the victim queue may keep here, in its share policy's terms.
        let keeps = |freed: &Resources| match &self.fairness {
            Some(f) => {
                let protected = rules.protected_fraction * f.share_of(victim);
                f.policy.share(&usage.saturating_sub(freed), &self.total) + 1e-12 >= protected
            }
            None => true,
        };
        self.choose(
            now,
            task,
            true,
            &|a| a.queue == victim && rules.may_preempt_task(a.task.preemptions, a.started_at, now),
            &|freed, count| count <= max_victims && keeps(freed),
        )
    }

    /// [`LocalMaster::choose_victims`] for a priority preemption: tasks of lower
    /// classes of the task's own queue, freeing all it needs by themselves.
    pub fn choose_lower_classes(
        &self,
        now: Micros,
        task: &common::TaskSpec,
    ) -> Option<VictimChoice> {
        let rules = self.rules().for_priority();
        let max_victims = self.priority_room(now, task.queue);
        self.choose(
            now,
            task,
            false,
            &|a| {
                a.queue == task.queue
                    && a.task.priority < task.priority
                    && rules.may_preempt_task(a.task.preemptions, a.started_at, now)
            },
            &|_, count| count <= max_victims,
        )
    }

    /// The node and minimal victim set, among the `eligible` tasks, that make room
    /// for `task` (with the node's free resources if `with_free`, else by the
    /// victims alone) and that `accept` takes (freed, count): fewest victims, then
    /// least work lost.
    fn choose(
        &self,
        now: Micros,
        task: &common::TaskSpec,
        with_free: bool,
        eligible: &dyn Fn(&crate::allocation::Allocation) -> bool,
        accept: &dyn Fn(&Resources, usize) -> bool,
    ) -> Option<VictimChoice> {
        let mut best: Option<(usize, u64, VictimChoice)> = None;
        for (n, on_node) in self.on_node.iter().enumerate() {
            // A drained node takes no new work, even by preemption.
            if self.drained[n]
                || !task.constraints.satisfied_by(self.topology.constraints[n])
                || !self.topology.capacity[n].fits(&task.resources)
            {
                continue;
            }
            // Most recently started first: they lose the least work.
            let mut candidates: Vec<(&TaskId, Resources, Option<Micros>)> = on_node
                .iter()
                .filter_map(|t| self.running.get(t).map(|a| (t, a)))
                .filter(|(_, a)| eligible(a) && !a.gang)
                .map(|(t, a)| (t, a.resources, a.started_at))
                .collect();
            candidates.sort_by_key(|(t, _, started)| {
                (std::cmp::Reverse(started.unwrap_or(Micros::MAX)), **t)
            });
            let mut room = if with_free {
                self.free[n]
            } else {
                Resources::ZERO
            };
            let mut chosen = Vec::new();
            for (t, res, started) in &candidates {
                if room.fits(&task.resources) {
                    break;
                }
                room = room.add(res);
                chosen.push((**t, *res, *started));
            }
            if !room.fits(&task.resources) {
                continue;
            }
            // Drop any victim the task does not need after all.
            let mut i = 0;
            while i < chosen.len() {
                let without = room.saturating_sub(&chosen[i].1);
                if without.fits(&task.resources) {
                    room = without;
                    chosen.remove(i);
                } else {
                    i += 1;
                }
            }
            let freed = chosen.iter().map(|(_, r, _)| *r).sum::<Resources>();
            if !accept(&freed, chosen.len()) {
                continue;
            }
            let lost: u64 = chosen
                .iter()
                .map(|(_, _, s)| s.map_or(0, |s| now.since(s).0))
                .sum();
            let key = (chosen.len(), lost);
            if best.as_ref().is_none_or(|(c, l, _)| key < (*c, *l)) {
                best = Some((
                    key.0,
                    key.1,
                    VictimChoice {
                        node: NodeId(n as u32),
                        victims: chosen.into_iter().map(|(t, _, _)| t).collect(),
                    },
                ));
            }
        }
        best.map(|(_, _, choice)| choice)
    }

    fn preempt(
        &mut self,
        now: Micros,
        (victim, priority): (common::QueueId, bool),
        choice: &VictimChoice,
        effects: &mut LmEffects,
    ) -> Vec<TaskId> {
        let mut preempted = Vec::new();
        for &task in &choice.victims {
            // Requeued once the worker confirms the kill; if the task finishes first,
            // its finish stands and nothing is requeued (it runs exactly once).
            if self.kill_running(now, task, effects) {
                if let Some(kill) = self.pending_kills.get_mut(&task) {
                    kill.task.preemptions += 1;
                }
                preempted.push(task);
            }
        }
        let rules = self.rules();
        if priority {
            (self.priority_log).record(victim, now, preempted.len(), &rules.for_priority());
        } else {
            (self.preempt_log).record(victim, now, preempted.len(), &rules);
        }
        preempted
    }
}
