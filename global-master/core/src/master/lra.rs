//! The GM's side of the designated GM's LRA path ([`crate::lra_path`]): who may take
//! LRAs, and the parts a placer run works with.

use super::GlobalMaster;
use crate::lra_path::pass::PassParts;
use crate::lra_path::{LraPassOutput, LraRefused, LraStatus, LraSubmission};
use common::{Micros, TaskId};
use lra_placer::{ConstraintError, LraId, PlacementConstraint};

impl GlobalMaster {
    /// Accepts an LRA for the next interval. Validates it (containers, tags,
    /// constraints naming `node` or `rack`) and refuses it whole when it is invalid.
    pub fn submit_lra(&mut self, now: Micros, submission: LraSubmission) -> Result<(), LraRefused> {
        if !self.is_designated() {
            return Err(LraRefused::NotDesignated {
                designated: self.config.designated_gm.0,
            });
        }
        self.lra.submit(now, submission)?;
        self.stats.lra_submitted += 1;
        Ok(())
    }

    /// Adds an operator constraint (MEDEA section 3); it applies from the next pass.
    pub fn add_operator_constraint(
        &mut self,
        constraint: PlacementConstraint,
    ) -> Result<(), ConstraintError> {
        self.lra.add_operator_constraint(constraint)
    }

    /// The status of an LRA this GM holds.
    pub fn lra_status(&self, id: LraId) -> Option<LraStatus> {
        self.lra.status(id)
    }

    /// LRAs waiting for an interval.
    pub fn lras_waiting(&self) -> usize {
        self.lra.waiting()
    }

    /// Containers of LRAs that wait for a placement.
    pub fn lra_pending_containers(&self) -> Vec<TaskId> {
        self.lra.pending_containers()
    }

    /// The LRA scheduling interval.
    pub fn lra_interval(&self) -> Micros {
        self.lra.interval()
    }

    /// When the next LRA pass may run.
    pub fn next_lra_pass(&self) -> Micros {
        self.lra.next_pass()
    }

    /// Runs the LRA placer if LRAs wait, the interval has elapsed and the view is
    /// complete; `None` otherwise.
    pub fn lra_pass(&mut self, now: Micros) -> Option<LraPassOutput> {
        let parts = PassParts {
            view: &mut self.view,
            dispatcher: &mut self.dispatcher,
            stats: &mut self.stats,
            me: self.config.id,
        };
        let out = self.lra.pass(now, parts)?;
        self.dispatcher.close_open_batches();
        Some(out)
    }

    /// A container of an LRA ended (finished, preempted or killed): its resources are
    /// the LM's again and its tags stop counting. Answers false for a task that is no
    /// running LRA container of this GM.
    pub fn lra_container_ended(&mut self, _now: Micros, task: TaskId) -> bool {
        self.lra.container_ended(task, &mut self.stats)
    }
}
