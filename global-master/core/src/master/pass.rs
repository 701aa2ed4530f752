//! One scheduling pass: each ready task goes through the placement pipeline
//! ([`crate::placement`]: internal partitions round-robin across LMs, then external
//! partitions round-robin, a repartition) or, if QUEUEABLE, to one of the top-k
//! nodes by queuing delay ([`crate::opportunistic`]); launch requests are batched per
//! LM. A task that matches nowhere waits until the view gains resources (or preempts
//! under fairness); a task that no node could ever host leaves with a reason.

use super::GlobalMaster;
use crate::alsched::SoftTry;
use crate::backlog::{Popped, Probe, Shape};
use crate::fairness::Contention;
use crate::grown::GrownNodes;
use crate::opportunistic::QueueableChoice;
use crate::outputs::{Decision, DecisionOutcome, KnownMisses, PassOutput};
use crate::placement::{Attempt, Effort, Found, Miss, Views};
use crate::queue::{Pending, Queued};
use common::messages::{Placement, PreemptRequest};
use common::reasons::PendingReason;
use common::{LmId, Micros, TaskKind};

impl GlobalMaster {
    /// One scheduling pass over every ready task.
    pub fn schedule(&mut self, now: Micros) -> PassOutput {
        let mut out = PassOutput::default();
        if !self.view.is_full() || self.view.is_empty() {
            return out;
        }
        self.reorder(now);
        out.decisions = std::mem::take(&mut self.spare_decisions);
        // Queues with tasks waiting want room: they lend none of their share.
        let wanting = self.backlog.queues().lengths().filter(|(_, n)| *n > 0);
        self.fairness.set_wanting(wanting.map(|(q, _)| q));
        self.wake_blocked();
        // Tasks held back for a preferred placement (delay scheduling) try again.
        let held = self.soft.begin_pass(now);
        self.backlog.push_all_ready(held);
        if let Some(ms) = self.config.soft_ilp() {
            self.plan_soft_batch(ms);
        }
        // Every task ready now is decided in this pass (the woken ones come on top).
        out.decisions.reserve(self.backlog.queues().ready_len());
        loop {
            // A sleeping class fits only on a node that grew since the last wake.
            let (view, grown) = (&self.view, &mut self.grown);
            let mut probe = |(constraints, request): &Shape| {
                let Some(g) = grown.as_mut() else {
                    return Probe::Never;
                };
                if !g.any_room(view) {
                    return Probe::Never;
                }
                match g.fits_one(view, *constraints, request) {
                    true => Probe::Fits,
                    false => Probe::No,
                }
            };
            match self.backlog.pop_ready_bulk(&mut probe) {
                Some(Popped::Task(queued)) => {
                    let decision = self.place(now, queued, &mut out);
                    out.decisions.push(decision);
                }
                Some(Popped::Missed { count }) => self.missed(count, &mut out),
                None => break,
            }
        }
        self.backlog.end_pass();
        self.stats.woken = self.backlog.woken();
        self.dispatcher.close_open_batches();
        out
    }

    /// The exact solve of the waiting tasks of jobs with trees (an option): what it
    /// plans, each task takes in this pass if its node still has room. A failure
    /// is logged and counted, and the greedy step places the batch.
    fn plan_soft_batch(&mut self, time_limit_ms: u64) {
        let tasks: Vec<&common::TaskSpec> = self
            .backlog
            .queues()
            .iter()
            .map(|p| &p.task)
            .filter(|t| t.kind != TaskKind::Queueable && self.soft.has(t.id.job))
            .collect();
        if tasks.is_empty() {
            return;
        }
        let views = Views {
            lms: self.view.lms(),
            me: self.config.id.index(),
            gms: self.config.gms as usize,
        };
        match self.soft.plan_batch(&views, &tasks, time_limit_ms) {
            Ok(_) => self.stats.soft_ilp_solves += 1,
            Err(why) => {
                self.stats.soft_ilp_fallbacks += 1;
                tracing::warn!(tasks = tasks.len(), %why, "soft constraints: the batch solve failed; placing greedily");
            }
        }
    }

    /// After a gain: wakes the blocked tasks whose shape fits a node that grew since
    /// the last wake (every blocked task under [`crate::backlog::WakePolicy::All`]),
    /// and those of queues the fairness step may preempt for.
    fn wake_blocked(&mut self) {
        self.grown = None;
        if !self.backlog.wake_pending() {
            return;
        }
        let selective = self.backlog.wakes_selectively();
        let grown = self.view.take_raised();
        let lms = self.view.lms();
        let fairness = &mut self.fairness;
        let live: Vec<_> = self
            .backlog
            .blocked_queues()
            .into_iter()
            .filter(|q| fairness.may_preempt_for(lms, *q))
            .collect();
        self.backlog.begin_pass(live);
        if selective {
            self.grown = Some(GrownNodes::new(grown, &self.view));
        }
    }

    /// Places one task: the pipeline; on a match, dispatch; on a miss, the task
    /// leaves (unplaceable) or, lacking free resources now, goes to the fairness step
    /// and waits.
    fn place(&mut self, now: Micros, queued: Queued, out: &mut PassOutput) -> Decision {
        let Queued {
            key,
            mut pending,
            was_blocked,
        } = queued;
        if pending.attempts > 0 {
            self.stats.retries += 1;
        }
        if pending.task.kind == TaskKind::Queueable {
            return self.place_queueable(pending, out);
        }
        let shape = (pending.task.constraints, pending.task.resources);
        let views = Views {
            lms: self.view.lms(),
            me: self.config.id.index(),
            gms: self.config.gms as usize,
        };
        // A blocked task of a selective wake fits only on a node that grew since the
        // last wake: once none of those has room for it, the scan would fail.
        let known_miss = self.backlog.is_known_miss(&shape)
            || (was_blocked
                && self
                    .grown
                    .as_mut()
                    .is_some_and(|g| !g.fits_one(&self.view, shape.0, &shape.1)));
        // A job with a utility tree: its best branch with room first (alsched); the
        // pipeline below is its fallback. Other jobs go straight to the pipeline.
        let soft = !known_miss && self.soft.has(pending.task.id.job);
        let mut soft_effort = crate::placement::Effort::default();
        let soft_try = match soft {
            true => self.soft.place(&views, &pending.task, &mut soft_effort),
            false => SoftTry::Fallback,
        };
        let Attempt { mut effort, result } = match soft_try {
            SoftTry::Found(found) => Attempt {
                effort: soft_effort,
                result: Ok(found),
            },
            SoftTry::Hold { relax_at } => {
                return self.hold(relax_at, pending, soft_effort);
            }
            SoftTry::Fallback => self.placement.run(&views, shape.0, shape.1, known_miss),
        };
        if soft && !matches!(soft_try, SoftTry::Found(_)) {
            effort.partitions += soft_effort.partitions;
            effort.words += soft_effort.words;
        }
        let task = pending.task.id;
        let outcome = match result {
            Ok(found) if soft => {
                let node = self
                    .view
                    .get(found.lm)
                    .and_then(|v| v.topology.constraints.get(found.node.index()))
                    .copied()
                    .unwrap_or_default();
                self.soft.tell_branch(&mut pending.task);
                let outcome = self.dispatch_found(found, pending, out);
                self.soft.landed(task, node);
                outcome
            }
            Ok(found) => self.dispatch_found(found, pending, out),
            Err(Miss::Unplaceable(reason)) => {
                self.stats.unplaceable += 1;
                DecisionOutcome::Unplaceable(reason)
            }
            Err(miss @ Miss::NoFreeResources { .. }) => {
                // One reason per miss: the doomed class and the task both take it.
                let reason = miss.reason();
                self.backlog.remember_miss(shape, &reason);
                let queued = Queued {
                    key,
                    pending,
                    was_blocked,
                };
                self.no_room(now, queued, reason, out)
            }
        };
        Decision {
            task,
            partitions: effort.partitions,
            words: effort.words,
            outcome,
        }
    }

    /// `count` blocked tasks of known misses (bulk misses, see
    /// [`crate::queue::Popped::Missed`]): what [`GlobalMaster::place`] does to each
    /// of them, at once. Each is a retry that skips the scan (the cursors move) and
    /// requeues its task with its shape's reason (the queue gives it to the tasks);
    /// no fairness step is configured.
    fn missed(&mut self, count: usize, out: &mut PassOutput) {
        let views = Views {
            lms: self.view.lms(),
            me: self.config.id.index(),
            gms: self.config.gms as usize,
        };
        self.placement.skip_known_misses(&views, count);
        self.stats.retries += count as u64;
        self.stats.requeues += count as u64;
        let after = out.decisions.len();
        match out.known_misses.last_mut() {
            Some(last) if last.after == after => last.count += count as u64,
            _ => out.known_misses.push(KnownMisses {
                after,
                count: count as u64,
            }),
        }
    }

    /// Delay scheduling: no preferred branch has room and the job still waits for
    /// one; the task is held back until the next pass.
    fn hold(&mut self, relax_at: Micros, mut pending: Box<Pending>, effort: Effort) -> Decision {
        let reason = PendingReason::WaitingForPreferred {
            relax_at_us: relax_at.0,
        };
        self.stats.requeues += 1;
        pending.reason = Some(reason.clone());
        pending.attempts += 1;
        let task = pending.task.id;
        self.soft.hold(relax_at, pending);
        Decision {
            task,
            partitions: effort.partitions,
            words: effort.words,
            outcome: DecisionOutcome::Requeued(reason),
        }
    }

    fn dispatch_found(
        &mut self,
        found: Found,
        pending: Box<Pending>,
        out: &mut PassOutput,
    ) -> DecisionOutcome {
        let Found {
            lm,
            node,
            placement,
        } = found;
        self.ordering
            .dispatched(pending.task.id, pending.task.resources);
        let batch =
            self.dispatcher
                .dispatch(&mut self.view, lm, node, placement, pending, out, true);
        match placement {
            Placement::Internal => self.stats.dispatched_internal += 1,
            Placement::Repartition => self.stats.dispatched_repartition += 1,
        }
        DecisionOutcome::Dispatched {
            lm: LmId(lm as u16),
            node,
            placement,
            batch,
        }
    }

    /// No node has room now: the fairness step (preempt a queue over its share, once
    /// the task has waited the preemption grace), or the task waits until the view
    /// gains resources (or a preemption slot frees).
    fn no_room(
        &mut self,
        now: Micros,
        queued: Queued,
        mut reason: PendingReason,
        out: &mut PassOutput,
    ) -> DecisionOutcome {
        let Queued {
            key,
            mut pending,
            was_blocked,
        } = queued;
        let shape = (pending.task.constraints, pending.task.resources);
        let decided = self
            .fairness
            .decide(self.view.lms(), pending.task.queue, shape);
        // A preempting priority class may take the room of lower classes of its
        // own queue (the LM verifies the classes) when fairness takes none.
        let decided = match decided {
            Contention::Preempt { .. } => decided,
            other if self.config.priorities.preempting(pending.task.priority) => {
                let queue = pending.task.queue;
                match self.fairness.priority_victim(self.view.lms(), queue, shape) {
                    Contention::NoVictim => other,
                    priority => priority,
                }
            }
            other => other,
        };
        match decided {
            Contention::Preempt { victim, .. }
                if victim != pending.task.queue
                    && now.since(*pending.contended_since.get_or_insert(now))
                        < self.fairness.grace() =>
            {
                // Room may free by itself within the grace: wait for it first (as
                // a task that found no room). A priority preemption within the
                // queue does not wait: the higher class should not.
            }
            Contention::Preempt { lm, victim } => {
                self.stats.preempt_attempts += 1;
                let seq = self.fairness.asked(lm);
                pending.attempts += 1;
                out.preempts.push(PreemptRequest {
                    gm: self.config.id,
                    life: self.config.life,
                    lm,
                    task: pending.task.clone(),
                    victim,
                    seq,
                });
                pending.preempting = Some((lm, victim));
                self.dispatcher.await_answer(pending);
                return DecisionOutcome::Preempting { lm, victim };
            }
            Contention::OverShare => reason = PendingReason::OverShare,
            Contention::NoVictim => {}
            Contention::Busy => {
                self.stats.requeues += 1;
                pending.reason = Some(reason.clone());
                pending.attempts += 1;
                self.fairness.wait_for_slot(pending);
                return DecisionOutcome::Requeued(reason);
            }
        }
        self.stats.requeues += 1;
        pending.reason = Some(reason.clone());
        pending.attempts += 1;
        self.backlog.push_blocked(Queued {
            key,
            pending,
            was_blocked,
        });
        DecisionOutcome::Requeued(reason)
    }

    /// A QUEUEABLE task: held back while its job is at its quota, otherwise sent to
    /// one of the top-k nodes by queuing delay (never deducted from the view).
    fn place_queueable(&mut self, mut pending: Box<Pending>, out: &mut PassOutput) -> Decision {
        let task = pending.task.id;
        let decided = |partitions, words, outcome| Decision {
            task,
            partitions,
            words,
            outcome,
        };
        if let Some(limit) = self.quota.over(task.job) {
            let reason = PendingReason::OverQueueableQuota { limit };
            pending.reason = Some(reason.clone());
            self.quota.hold(pending);
            self.stats.quota_held += 1;
            return decided(0, 0, DecisionOutcome::Requeued(reason));
        }
        // A job with a utility tree: the top-k of its best branch's set first.
        let soft = self.soft.has(task.job);
        let me = self.config.id;
        let (opportunistic, view) = (&mut self.opportunistic, &mut self.view);
        let choice = match soft {
            true => self
                .soft
                .choose_queueable(&pending.task, |set| {
                    match opportunistic.choose_where(view, &pending.task, me, |c| set.holds(c)) {
                        QueueableChoice::Nowhere => None,
                        chosen => Some(chosen),
                    }
                })
                .unwrap_or_else(|| opportunistic.choose(view, &pending.task, me)),
            false => opportunistic.choose(view, &pending.task, me),
        };
        let (l, node, placement, candidates) = match choice {
            QueueableChoice::Node {
                lm,
                node,
                placement,
                candidates,
            } => (lm, node, placement, candidates),
            QueueableChoice::Nowhere => {
                let counts = self.placement.host_count(
                    self.view.lms(),
                    pending.task.constraints,
                    pending.task.resources,
                );
                self.stats.unplaceable += 1;
                let reason = if counts.with_constraints == 0 {
                    PendingReason::NoNodeWithConstraints
                } else {
                    PendingReason::NoNodeLargeEnough
                };
                return decided(0, 0, DecisionOutcome::Unplaceable(reason));
            }
        };
        let attributes = self
            .view
            .get(l)
            .and_then(|v| v.topology.constraints.get(node.index()))
            .copied()
            .unwrap_or_default();
        if soft {
            self.soft.tell_branch(&mut pending.task);
        }
        let batch =
            self.dispatcher
                .dispatch(&mut self.view, l, node, placement, pending, out, false);
        if soft {
            self.soft.landed(task, attributes);
        }
        self.quota.sent(task.job);
        self.stats.dispatched_queueable += 1;
        let outcome = DecisionOutcome::Dispatched {
            lm: LmId(l as u16),
            node,
            placement,
            batch,
        };
        decided(1, candidates as u64, outcome)
    }
}
