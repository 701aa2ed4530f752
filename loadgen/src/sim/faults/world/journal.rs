//! A GM restarted on its journal, as the GM service does it: the reconcile exchange
//! with the LMs it can reach, then its open tasks resumed as new runs.

use super::{tasks, World};
use crate::sim::faults::plan::Role;
use common::messages::ReconcileRequest;
use common::protocol::{GmToLm, LmToGm};
use common::{GmId, LmId, TaskId, TaskSpec};
use global_master::core::{GmInput, Resumed};
use local_master::LmInput;
use std::collections::{HashMap, HashSet};

impl World<'_> {
    /// Every task whose end GM `g` had not recorded, unless an LM it reaches holds
    /// it (its end will come) or remembers it finished (it ends so), goes out again
    /// as a run after the last one it went out as, under its job's retry policy.
    pub(super) fn resume_from_journal(&mut self, g: u16) {
        let open = self.checker.open_at_gm(g);
        let (held, finished) = self.reconcile(g, &open);
        let mut resubmit: Vec<(TaskSpec, u32)> = Vec::new();
        let mut keep: Vec<(TaskSpec, u32)> = Vec::new();
        let mut ended = Vec::new();
        for t in open {
            if let Some(&(l, run)) = held.get(&t) {
                self.held_at(g, l, t, run);
                if let Some(mut spec) = self.specs.get(&t).cloned() {
                    spec.attempt = run;
                    let failed = self.journal_runs.get(&t).map_or(0, |r| r.1);
                    keep.push((spec, failed));
                }
                continue;
            }
            if finished.contains(&t) {
                ended.push(t);
                continue;
            }
            let Some(mut spec) = self.specs.get(&t).cloned() else {
                continue;
            };
            let (run, failed) = self.journal_runs.get(&t).copied().unwrap_or((1, 0));
            spec.attempt = run + 1;
            self.journal_runs.insert(t, (run + 1, failed));
            self.checker.resubmitted(t);
            resubmit.push((spec, failed));
        }
        if !ended.is_empty() {
            self.note(|| {
                format!(
                    "  gm{g} reconcile: finished at their LMs [{}]",
                    tasks(ended.iter().copied())
                )
            });
            for t in ended {
                self.checker.gm_ended_by_reconcile(t);
            }
        }
        if !resubmit.is_empty() || !keep.is_empty() {
            self.note(|| {
                format!(
                    "  gm{g} journal resubmits [{}]",
                    tasks(resubmit.iter().map(|(t, _)| t.id))
                )
            });
            let retry = self.config.retry;
            let resume = Resumed {
                tasks: resubmit,
                held: keep,
                retry,
            };
            self.gm_step(g, GmInput::Resume(resume));
        }
    }

    /// The reconcile exchange: every LM GM `g` can reach says which of `open` it
    /// holds and which it remembers finished (an LM down or cut off counts as
    /// holding none, as in the service after its timeout).
    fn reconcile(
        &mut self,
        g: u16,
        open: &[TaskId],
    ) -> (HashMap<TaskId, (u16, u32)>, HashSet<TaskId>) {
        let (mut held, mut finished) = (HashMap::new(), HashSet::new());
        for l in 0..self.lms.len() as u16 {
            if !self.up(Role::Lm(l)) || self.blocked(Role::Gm(g), Role::Lm(l)) {
                continue;
            }
            let now = self.clock(Role::Lm(l));
            let tasks = open
                .iter()
                .map(|t| (*t, self.journal_runs.get(t).map_or(1, |r| r.0)))
                .collect();
            let request = GmToLm::Reconcile(ReconcileRequest {
                gm: GmId(g),
                lm: LmId(l),
                tasks,
                forget: false,
            });
            let Some(lm) = self.lms[l as usize].as_mut() else {
                continue;
            };
            let Ok(out) = lm.step(now, LmInput::Gm(request)) else {
                continue;
            };
            for (_, message) in out.to_gms {
                if let LmToGm::ReconcileAnswer(a) = message {
                    if let Some(gm) = self.gms[g as usize].as_mut() {
                        gm.lm_life_heard(a.lm, a.incarnation);
                    }
                    held.extend(a.held.iter().map(|h| (h.0, (l, h.2))));
                    finished.extend(a.finished);
                }
            }
        }
        (held, finished)
    }
}
