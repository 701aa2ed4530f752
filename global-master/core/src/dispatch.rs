//! Sending work: adding launch requests to per-LM batches (with the view deductions
//! and quota counts a snapshot will later account for), and taking back a batch the
//! transport could not deliver.

use super::master::{GlobalMaster, InFlight, PassOutput};
use super::queue::Pending;
use common::messages::{LaunchBatch, LaunchRequest, Placement};
use common::reasons::PendingReason;
use common::{LmId, Micros, NodeId, Resources, TaskId, TaskKind};

impl GlobalMaster {
    /// A launch batch never reached its LM (the transport gave up): its tasks go back
    /// to their queues with the reason, and its deductions leave the view.
    pub fn abandon_batch(&mut self, _now: Micros, lm: LmId, seq: u64, tasks: &[TaskId]) -> usize {
        if let Some(in_flight) = self.in_flight.get_mut(lm.index()) {
            if let Some(pos) = in_flight.iter().position(|f| f.seq == seq) {
                if let Some(lost) = in_flight.remove(pos) {
                    lost.queueable_jobs
                        .iter()
                        .for_each(|j| self.quota.landed(*j));
                    if let Some(view) = self.lms[lm.index()].as_mut() {
                        lost.deducted.iter().for_each(|(n, r)| view.credit(*n, r));
                    }
                }
            }
        }
        let mut requeued = 0;
        for task in tasks {
            if let Some(mut pending) = self.outstanding.remove(task) {
                if self.is_lra_container(&pending.task) {
                    self.lra_answer(*task, lm, None);
                    continue;
                }
                pending.reason = Some(PendingReason::LmUnreachable { lm });
                self.queues.push_ready(pending);
                requeued += 1;
            }
        }
        self.quota
            .release()
            .into_iter()
            .for_each(|p| self.queues.push_ready(p));
        if requeued > 0 {
            self.failed_shapes.clear();
            self.queues.unblock_all();
        }
        requeued
    }

    /// Adds a launch request to the open batch for LM `l`; `deduct` takes its
    /// resources from the view (not for QUEUEABLE work, which the view does not see).
    pub(crate) fn dispatch(
        &mut self,
        l: usize,
        node: NodeId,
        placement: Placement,
        pending: &mut Pending,
        out: &mut PassOutput,
        deduct: bool,
    ) -> usize {
        let resources = if deduct {
            pending.task.resources
        } else {
            Resources::ZERO
        };
        if let Some(view) = self.lms[l].as_mut() {
            view.deduct(node, &resources);
        }
        let batch = match self.open_batches[l] {
            Some(b) if out.batches[b].requests.len() < self.config.batch_size.max(1) => b,
            _ => {
                self.next_seq[l] += 1;
                let seq = self.next_seq[l];
                out.batches.push(LaunchBatch {
                    gm: self.config.id,
                    lm: LmId(l as u16),
                    seq,
                    requests: Vec::new(),
                });
                self.in_flight[l].push_back(InFlight {
                    seq,
                    deducted: Vec::new(),
                    queueable_jobs: Vec::new(),
                });
                self.open_batches[l] = Some(out.batches.len() - 1);
                out.batches.len() - 1
            }
        };
        if let Some(f) = self.in_flight[l].back_mut() {
            f.deducted.push((node, resources));
            if pending.task.kind == TaskKind::Queueable {
                f.queueable_jobs.push(pending.task.id.job);
                self.quota.sent(pending.task.id.job);
            }
        }
        pending.attempts += 1;
        out.batches[batch].requests.push(LaunchRequest {
            task: pending.task.clone(),
            node,
            placement,
        });
        self.outstanding
            .insert(pending.task.id, Box::new(pending.clone()));
        batch
    }
}
