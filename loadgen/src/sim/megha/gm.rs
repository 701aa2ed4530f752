//! The GM side of the simulation: scheduling passes (charged per decision) and the
//! handling of LM answers and snapshots.

use super::{Ev, Sim};
use crate::sim::ledger::Decision;
use crate::sim::CostModel;
use common::messages::{LaunchOutcome, LaunchResponse, LmSnapshot, Placement};
use common::reasons::PendingReason;
use common::Micros;
use global_master::core::DecisionOutcome;

impl Sim<'_> {
    pub(super) fn charge_snapshot(&mut self, now: Micros, g: usize, snapshot: &LmSnapshot) {
        let cost = CostModel::per_unit(snapshot.free.len() as u64, self.costs.gm_snapshot_node_ns);
        self.gm_busy[g] = now.max(self.gm_busy[g]) + cost;
    }

    pub(super) fn gm_pass(&mut self, now: Micros, g: usize) {
        if now < self.gm_busy[g] {
            self.queue.push(self.gm_busy[g], Ev::GmPass(g));
            return;
        }
        self.gm_pass_pending[g] = false;
        let out = self.gms[g].schedule(now);
        self.apply_pass(now, g, out);
    }

    /// Charges a GM pass's decisions, records them and sends its requests.
    pub(super) fn apply_pass(
        &mut self,
        now: Micros,
        g: usize,
        out: global_master::core::PassOutput,
    ) {
        if out.decisions.is_empty() {
            return;
        }
        let mut t = now;
        for d in &out.decisions {
            let cost = self.costs.gm_decision + CostModel::per_unit(d.words, self.costs.gm_word_ns);
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
        self.gm_busy[g] = t;
        let arrive = t + self.delay();
        for batch in out.batches {
            for req in &batch.requests {
                self.record(req.task.id).queued_until(t);
            }
            self.counters.launch_batches += 1;
            self.queue.push(arrive, Ev::LmBatch(batch));
        }
        for request in out.preempts {
            self.record(request.task.id).queued_until(t);
            self.queue.push(arrive, Ev::LmPreempt(request));
        }
    }

    pub(super) fn gm_response(&mut self, now: Micros, response: LaunchResponse) {
        let g = response.gm.index();
        self.charge_snapshot(now, g, &response.snapshot);
        for (task, outcome) in &response.outcomes {
            match outcome {
                LaunchOutcome::Launched {
                    placement: Placement::Repartition,
                } => self.counters.repartitions += 1,
                LaunchOutcome::Launched { .. } => {}
                LaunchOutcome::Rejected(_) => {
                    let rec = self.record(*task);
                    rec.in_flight_until(now);
                    rec.rejections += 1;
                    rec.decision = Decision::Pending;
                    rec.lm = None;
                    rec.node = None;
                    self.counters.lm_rejections += 1;
                }
            }
        }
        self.gms[g].handle_response(now, &response);
        self.request_pass(g, now);
        if g == self.designated && self.has_lras {
            self.lra_wake(now);
        }
    }
}
