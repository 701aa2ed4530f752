//! A GM restarted on its journal, as the GM service does it: the reconcile exchange
//! with the LMs it can reach, then its open tasks resumed as new runs.

use super::event::Ev;
use super::in_doubt::InDoubt;
use super::trace::tasks;
use super::World;
use crate::sim::faults::plan::Role;
use common::messages::ReconcileRequest;
use common::protocol::{GmToLm, LmToGm};
use common::{GmId, LmId, Micros, TaskId, TaskSpec};
use gm_core::{GmInput, Resumed};
use lm_core::LmInput;
use std::collections::{HashMap, HashSet};

impl World<'_> {
    /// Every task whose end GM `g` had not recorded, unless an LM it reaches holds
    /// it (its end will come) or remembers it finished (it ends so), goes out again
    /// as a run after the last one it went out as, under its job's retry policy;
    /// while an LM is silent, those it may run wait (see [`World::settle_resume`]).
    pub(super) fn resume_from_journal(&mut self, g: u16) {
        let open = self.checker.open_at_gm(g);
        let lms = (0..self.lms.len() as u16).collect();
        let deadline = self.now + self.config.doubt_timeout;
        self.settle_resume(g, open, lms, deadline);
    }

    /// A restarted GM's tasks waiting on silent LMs: ask those again.
    pub(super) fn ask_again_to_resume(&mut self, g: u16, life: u32) {
        if self.gm_life[g as usize] != life || self.gms[g as usize].is_none() {
            return;
        }
        let Some(InDoubt {
            tasks,
            silent,
            deadline,
        }) = self.resume_doubt.remove(&g)
        else {
            return;
        };
        let open: HashSet<TaskId> = self.checker.open_at_gm(g).into_iter().collect();
        let tasks = tasks.into_iter().filter(|t| open.contains(t)).collect();
        self.settle_resume(g, tasks, silent, deadline);
    }

    /// Asks `lms` about `open`; a task none of the answering LMs holds or finished
    /// waits while one of `lms` is silent (it may run there), asked again every
    /// [`ASK_AGAIN`] until the doubt timeout (`deadline`), as in the GM service.
    fn settle_resume(&mut self, g: u16, open: Vec<TaskId>, lms: Vec<u16>, deadline: Micros) {
        let (held, finished, silent) = self.reconcile(g, &open, &lms);
        let wait = !silent.is_empty() && self.now < deadline;
        let mut doubt = Vec::new();
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
            if wait {
                doubt.push(t);
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
        let ended_now: HashSet<TaskId> = ended.iter().copied().collect();
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
            let gangs = self.resumed_gangs(&resubmit, &mut keep, &ended_now);
            if !gangs.is_empty() {
                let jobs: Vec<u64> = gangs.iter().map(|g| g.0 .0).collect();
                self.note(|| format!("  gm{g} resumes gangs {jobs:?}"));
            }
            let resume = Resumed {
                tasks: resubmit,
                held: keep,
                retry,
                dags: Vec::new(),
                gangs,
            };
            self.gm_step(g, GmInput::Resume(resume));
        }
        if !doubt.is_empty() {
            self.note(|| {
                format!(
                    "  gm{g} resume waits for lm{silent:?}: [{}]",
                    tasks(doubt.iter().copied())
                )
            });
            let life = self.gm_life[g as usize];
            self.resume_doubt.insert(
                g,
                InDoubt {
                    tasks: doubt,
                    silent,
                    deadline,
                },
            );
            self.queue
                .push(self.now + ASK_AGAIN, Ev::ResumeAsk(g, life));
        }
    }

    /// The reconcile exchange: every LM of `lms` GM `g` can reach says which of
    /// `open` it holds and which it remembers finished; the others (down or cut
    /// off) are silent.
    fn reconcile(&mut self, g: u16, open: &[TaskId], lms: &[u16]) -> Reconciled {
        let (mut held, mut finished, mut silent) = (HashMap::new(), HashSet::new(), Vec::new());
        let life = self.gms[g as usize].as_ref().map_or(0, |gm| gm.life());
        for &l in lms {
            // A restarted LM not ready yet (its workers have not all registered
            // again) answers every GM request busy, as the LM service does: it
            // cannot say yet what it holds (seed 709363).
            if !self.up(Role::Lm(l)) || self.blocked(Role::Gm(g), Role::Lm(l)) || !self.ready(l) {
                silent.push(l);
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
                life,
                preempts: Vec::new(),
                preempt_seq: 0,
            });
            let Some(lm) = self.lms[l as usize].as_mut() else {
                silent.push(l);
                continue;
            };
            let Ok(out) = lm.step(now, LmInput::Gm(request)) else {
                silent.push(l);
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
        (held, finished, silent)
    }
}

/// Which LM holds each task (and its run), which tasks LMs remember finished, and
/// the LMs that did not answer.
type Reconciled = (HashMap<TaskId, (u16, u32)>, HashSet<TaskId>, Vec<u16>);

/// How soon silent LMs are asked again (the GM service's `ASK_AGAIN`).
const ASK_AGAIN: Micros = Micros(3_000_000);
