//! The GM side of the simulation: scheduling passes (charged per decision) and the
//! handling of LM answers and snapshots.

use super::Sim;
use crate::sim::ledger::Decision;
use crate::sim::{probe, CostModel};
use common::messages::LmSnapshot;
use common::protocol::facts::{Asked, TaskFact};
use common::protocol::kind;
use common::protocol::LmToGm;
use common::reasons::PendingReason;
use common::{Micros, TaskId};
use gm_core::{DecisionOutcome, GmInput, GmOutput};

impl Sim<'_> {
    pub(super) fn charge_snapshot(&mut self, now: Micros, g: usize, snapshot: &LmSnapshot) {
        let cost = CostModel::per_unit(snapshot.free.len() as u64, self.costs.gm_snapshot_node_ns);
        self.gm_busy[g] = now.max(self.gm_busy[g]) + cost;
    }

    /// An input reaches a GM: a message from an LM (charged per node of the snapshot
    /// it carries), or one of its timers.
    pub(super) fn gm_input(&mut self, now: Micros, g: usize, input: GmInput) {
        match input {
            GmInput::Schedule => {
                if now < self.gm_busy[g] {
                    self.push_gm(self.gm_busy[g], g, GmInput::Schedule);
                    return;
                }
                self.gm_pass_pending[g] = false;
                let t0 = probe::start(self.probe.is_some());
                let out = self.gms[g].step(now, GmInput::Schedule);
                let ns = probe::stop(t0);
                self.settle_misses(&out.misses_settled);
                self.dag_progress(now, &out);
                if let Some(p) = self.probe.as_mut() {
                    let words = out.decisions.iter().map(|d| d.words).sum();
                    let bulk: u64 = out.known_misses.iter().map(|m| m.count).sum();
                    p.gm_pass.add(out.decisions.len() as u64 + bulk, words, ns);
                }
                self.apply_pass(now, g, out);
            }
            GmInput::LraPass => self.lra_pass(now),
            GmInput::Lm(ref message) => {
                // The input goes to the core as it came (unpacking and packing it
                // again would move the message twice).
                let nodes = message.snapshot().map(|s| s.free.len() as u64);
                if let Some(snapshot) = message.snapshot() {
                    self.charge_snapshot(now, g, snapshot);
                }
                self.observe_lm_message(now, message);
                let answer = message.kind() == kind::LAUNCH_ANSWER;
                let t0 = probe::start(self.probe.is_some());
                let out = self.gms[g].step(now, input);
                let ns = probe::stop(t0);
                self.settle_misses(&out.misses_settled);
                self.dag_progress(now, &out);
                if let (Some(p), Some(nodes), false) = (self.probe.as_mut(), nodes, answer) {
                    p.gm_snapshot.add(nodes, 0, ns);
                }
                if out.wants_pass {
                    self.request_pass(g, now);
                }
                // Requests an answer makes (a gang's commits or releases).
                if !out.to_lms.is_empty() {
                    self.send_from_gm(self.gm_busy[g].max(now), out.to_lms);
                }
                if answer && g == self.designated && self.has_lras {
                    self.lra_wake(now);
                }
            }
            other => {
                let out = self.gms[g].step(now, other);
                self.settle_misses(&out.misses_settled);
                if out.wants_pass {
                    self.request_pass(g, now);
                }
            }
        }
    }

    /// Books the known misses a GM counted in bulk and paid into tasks now (they
    /// left their line): one decision each that examined nothing, as the GM would
    /// have reported them one by one. Their processing goes into the task's next
    /// interval (see `TaskRecord::owed_processing`), which holds them.
    pub(super) fn settle_misses(&mut self, settled: &[(TaskId, u32)]) {
        let cost = self.costs.gm_decision_of(0, false);
        for &(task, owed) in settled {
            let rec = self.record(task);
            rec.attempts += owed;
            rec.owed_processing += Micros(cost.0 * u64::from(owed));
        }
    }

    /// Books what a GM's DAG stage decided: a released task arrives now (its
    /// allocation time counts from the end of its parent stages, its job's
    /// completion time from the job's arrival); a task that will never run (a
    /// parent stage was unplaceable) is done, as unplaceable.
    pub(super) fn dag_progress(&mut self, now: Micros, out: &GmOutput) {
        for task in &out.released {
            let rec = self.record(*task);
            rec.arrival = now;
            rec.mark = now;
        }
        for never in &out.never_run {
            self.record(never.task).decision = Decision::Unplaceable;
            self.counters.dag_never_run += 1;
            self.done += 1;
        }
    }

    /// A gang part held (an LM's answer to a reserve of `tasks`): its members' room
    /// is secured from `done` on.
    pub(super) fn book_gang_holds(
        &mut self,
        out: &lm_core::LmOutput,
        tasks: &[TaskId],
        done: Micros,
    ) {
        let held = (out.to_gms.iter()).any(|(_, m)| {
            matches!(m, LmToGm::GangAnswer(a)
                if a.outcome == common::messages::GangOutcome::Held && a.op == "reserve")
        });
        if held {
            for task in tasks {
                self.record(*task).secured = Some(done);
            }
        }
    }

    /// Books what an LM's message tells about tasks: launches, refusals, preemptions.
    fn observe_lm_message(&mut self, now: Micros, message: &LmToGm) {
        message.for_each_task(|task, fact| match fact {
            TaskFact::Launched { repartition } => {
                if repartition {
                    self.counters.repartitions += 1;
                }
            }
            TaskFact::Rejected(_) => {
                let rec = self.record(task);
                rec.in_flight_until(now);
                rec.rejections += 1;
                rec.decision = Decision::Pending;
                rec.lm = None;
                rec.node = None;
                self.counters.lm_rejections += 1;
            }
            TaskFact::PreemptedToLaunch { .. } => self.record(task).decision = Decision::Preemption,
            TaskFact::PreemptRefused(_) => {
                self.record(task).in_flight_until(now);
                self.counters.preempt_refused += 1;
            }
            // The task waits at the LM for room; the final answer follows.
            TaskFact::PreemptHeld { .. } => {}
            // Starts and ends are booked from the worker reports (zero cost here, no
            // pass); the simulator cancels nothing.
            TaskFact::Requeued { .. }
            | TaskFact::Cancelled
            | TaskFact::NotYours
            | TaskFact::Ended(_)
            | TaskFact::Started => {}
        });
    }

    /// Charges a GM pass's decisions, records them and sends its requests.
    pub(super) fn apply_pass(&mut self, now: Micros, g: usize, out: GmOutput) {
        if out.decisions.is_empty() && out.known_misses.is_empty() {
            self.gms[g].recycle_decisions(out.decisions);
            // A pass may send gang reserves without a single-task decision.
            if !out.to_lms.is_empty() {
                self.send_from_gm(self.gm_busy[g].max(now), out.to_lms);
            }
            return;
        }
        let mut t = now;
        // Known misses counted in bulk, each a decision that examined nothing; the
        // tasks book theirs when they leave their line (`settle_misses`).
        let miss_cost = self.costs.gm_decision_of(0, false);
        let mut misses = out.known_misses.iter().peekable();
        for (i, d) in out.decisions.iter().enumerate() {
            while let Some(m) = misses.next_if(|m| m.after == i) {
                t += Micros(miss_cost.0 * m.count);
                self.counters.requeues += m.count;
                self.counters.bulk_misses += m.count;
            }
            let dispatched = matches!(d.outcome, DecisionOutcome::Dispatched { .. });
            let cost = self.costs.gm_decision_of(d.words, dispatched);
            let rec = self.record(d.task);
            rec.queued_until(t);
            t += cost;
            rec.processed_until(t);
            rec.attempts += 1;
            match &d.outcome {
                DecisionOutcome::Dispatched {
                    lm,
                    node,
                    placement,
                    ..
                } => {
                    rec.lm = Some(*lm);
                    rec.node = Some(*node);
                    rec.decision = Decision::from_placement(*placement);
                }
                DecisionOutcome::Requeued(reason) => {
                    self.counters.requeues += 1;
                    if matches!(reason, PendingReason::OverQueueableQuota { .. }) {
                        self.counters.quota_held += 1;
                    }
                }
                DecisionOutcome::Preempting { .. } => self.counters.preempt_attempts += 1,
                DecisionOutcome::Unplaceable(_) => {
                    rec.decision = Decision::Unplaceable;
                    self.done += 1;
                }
            }
        }
        for m in misses {
            t += Micros(miss_cost.0 * m.count);
            self.counters.requeues += m.count;
            self.counters.bulk_misses += m.count;
        }
        self.gm_busy[g] = t;
        self.gms[g].recycle_decisions(out.decisions);
        for message in &out.to_lms {
            message.for_each_task(|task, asked| match asked {
                Asked::Launch | Asked::Preempt => self.record(task).queued_until(t),
                Asked::GangReserve => {}
            });
            if message.kind() == kind::LAUNCH {
                self.counters.launch_batches += 1;
            }
        }
        self.send_from_gm(t, out.to_lms);
    }
}
