//! LRAs in the simulator, through the designated GM's real LRA path.
//!
//! A job whose tasks are all `long_running` is an LRA: task `j` is container `j`
//! (its resources, tags and duration). It goes to the designated GM's
//! [`GlobalMaster::submit_lra`](gm_core::GlobalMaster::submit_lra); a
//! `GmLraPass` event runs the placer when the interval allows, and its launch batches
//! travel like any other. Container ends reach the designated GM as the LM's
//! `Finished` events would (two network delays after the worker's report). The
//! placer's own run time is not charged to the GM (only its decisions are).

use super::Sim;
use crate::sim::ledger::Decision;
use crate::sim::workload::Job;
use common::{GmId, Micros, QueueId, TaskId};
use gm_core::lra_path::{container_task, LraSubmission};
use gm_core::GmInput;
use lra_placer::{ContainerRequest, LraId, LraRequest};

impl Sim<'_> {
    pub(super) fn install_operator_constraints(&mut self) {
        let d = self.designated;
        for c in &self.config.lra_operator_constraints {
            if let Err(e) = self.gms[d].add_operator_constraint(c.clone()) {
                tracing::warn!(error = %e, "operator LRA constraint ignored");
            }
        }
    }

    pub(super) fn lra_arrival(&mut self, now: Micros, job: &Job, queue: QueueId) {
        let d = self.designated;
        let id = LraId(job.id);
        let numbered = job
            .tasks
            .iter()
            .enumerate()
            .all(|(j, t)| t.id == container_task(id, j));
        let submission = LraSubmission {
            request: LraRequest {
                id,
                containers: job
                    .tasks
                    .iter()
                    .map(|t| ContainerRequest::new(t.resources, t.tags.iter().cloned()))
                    .collect(),
                constraints: Vec::new(),
            },
            queue,
            durations: job.tasks.iter().map(|t| t.duration).collect(),
        };
        let accepted = if numbered {
            match self.gms[d]
                .step(now, GmInput::SubmitLra(submission))
                .lra_refused
            {
                Some(refused) => Err(refused.to_string()),
                None => Ok(()),
            }
        } else {
            Err("container tasks must be numbered 0..n".to_owned())
        };
        let ids: Vec<TaskId> = job.tasks.iter().map(|t| t.id).collect();
        match accepted {
            Ok(()) => {
                for task in ids {
                    let rec = self.record(task);
                    rec.gm = Some(GmId(d as u16));
                    rec.queue = queue;
                }
                self.lra_wake(now);
            }
            Err(e) => {
                tracing::warn!(job = job.id, error = %e, "LRA refused; its containers are reported unplaceable");
                for task in ids {
                    self.record(task).decision = Decision::Unplaceable;
                    self.done += 1;
                }
            }
        }
    }

    /// Queues a placer run for when the interval allows, if LRAs wait.
    pub(super) fn lra_wake(&mut self, now: Micros) {
        let d = self.designated;
        if self.lra_pass_pending || self.gms[d].lras_waiting() == 0 {
            return;
        }
        self.lra_pass_pending = true;
        let at = now.max(self.gms[d].next_lra_pass()).max(self.gm_busy[d]);
        self.push_gm(at, d, GmInput::LraPass);
    }

    pub(super) fn lra_pass(&mut self, now: Micros) {
        self.lra_pass_pending = false;
        let d = self.designated;
        let out = self.gms[d].step(now, GmInput::LraPass);
        match out.lra_pass.as_ref().map(|lra| lra.placed.is_empty()) {
            Some(placed_nothing) => {
                // Runs that place nothing, in a row: with nothing else going on, the
                // run is stalled (see the idle check of the LMs' ticks).
                if placed_nothing {
                    self.lra_fruitless += 1;
                } else {
                    self.lra_fruitless = 0;
                }
                self.apply_pass(now, d, out);
                self.lra_wake(now);
            }
            // Not due or no complete view yet: look again one interval later.
            None if self.gms[d].lras_waiting() > 0 => {
                self.lra_pass_pending = true;
                let at = now + self.gms[d].lra_interval();
                self.push_gm(at, d, GmInput::LraPass);
            }
            None => {}
        }
    }
}
