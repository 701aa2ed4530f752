//! A GM asks a restarted LM which of its tasks there it still holds, as the GM
//! service does (`global-master/src/service/lm_restart.rs`): the core names the LM
//! when its view takes up the new life; after the delay the GM calls the LM with
//! the tasks it saw launched there before; the ones the LM remembers finished end
//! finished at the GM, and the LM reports the others lost on its stream.

use super::{tasks, Ev, Launched, World};
use common::messages::{ReconcileRequest, ReconcileResponse, TaskEnd, TasksEnded};
use common::protocol::{GmToLm, LmToGm};
use common::{GmId, LmId, Micros, NodeId, TaskId};
use gm_core::{GmInput, GmOutput};

/// How many times the GM service asks a restarted LM (`lm_restart::ASKS`).
const ASKS: u32 = 5;

impl World<'_> {
    /// What the GM service's tracker keeps of one step's output: where its tasks
    /// were launched, and that ended ones run nowhere; new lives of LMs are asked
    /// about after the delay. `lm` is the LM of the answer stepped, if one.
    pub(super) fn track_launches(&mut self, g: u16, lm: Option<u16>, out: &mut GmOutput) {
        if let Some(l) = lm {
            for task in &out.answered.launched {
                let run = self.journal_runs.get(task).map_or(1, |r| r.0);
                let at = self.now;
                self.launched_at.insert(
                    *task,
                    Launched {
                        gm: g,
                        lm: l,
                        run,
                        at,
                    },
                );
            }
        }
        for end in &out.ended {
            self.launched_at.remove(&end.task);
        }
        let Some(delay) = self.config.lm_reconcile else {
            return;
        };
        for l in std::mem::take(&mut out.lm_new_lives) {
            let life = self.gm_life[g as usize];
            self.reconcile_asks.insert((g, l.0), 0);
            self.note(|| format!("  gm{g} sees a new life of lm{}", l.0));
            self.queue
                .push(self.now + delay, Ev::LmReconcile(g, life, l.0, self.now));
        }
    }

    /// Forgets where a crashed GM's tasks run (its journal restart asks again).
    pub(super) fn forget_launches(&mut self, g: u16) {
        self.launched_at.retain(|_, l| l.gm != g);
    }

    /// A restarted GM's reconcile found `task` held by `lm` as run `run`.
    pub(super) fn held_at(&mut self, g: u16, lm: u16, task: TaskId, run: u32) {
        let at = self.now;
        self.launched_at
            .insert(task, Launched { gm: g, lm, run, at });
    }

    pub(super) fn ask_restarted_lm(&mut self, g: u16, life: u32, l: u16, seen_at: Micros) {
        if self.gm_life[g as usize] != life || self.gms[g as usize].is_none() {
            return;
        }
        let mut asked: Vec<(TaskId, u32)> = self
            .launched_at
            .iter()
            .filter(|(_, x)| x.gm == g && x.lm == l && x.at <= seen_at)
            .map(|(t, x)| (*t, x.run))
            .collect();
        if asked.is_empty() {
            return;
        }
        asked.sort_unstable();
        self.note(|| {
            format!(
                "  gm{g} asks lm{l} about [{}]",
                tasks(asked.iter().map(|a| a.0))
            )
        });
        let request = GmToLm::Reconcile(ReconcileRequest {
            gm: GmId(g),
            lm: LmId(l),
            tasks: asked,
            forget: true,
            life: self.gms[g as usize].as_ref().map_or(0, |gm| gm.life()),
            preempts: Vec::new(),
            preempt_seq: 0,
        });
        self.call(g, request);
    }

    /// The question went unanswered (the LM is down or cut off): asked again after
    /// the delay, at most [`ASKS`] times in all, as the GM service does.
    pub(super) fn restarted_lm_unanswered(&mut self, g: u16, life: u32, l: u16, asked_at: Micros) {
        let Some(delay) = self.config.lm_reconcile else {
            return;
        };
        let asks = self.reconcile_asks.entry((g, l)).or_insert(0);
        *asks += 1;
        if *asks >= ASKS {
            self.note(|| format!("  gm{g} gives up asking lm{l} about its tasks"));
            return;
        }
        self.queue
            .push(self.now + delay, Ev::LmReconcile(g, life, l, asked_at));
    }

    /// The restarted LM's answer: tasks it remembers finished end so at the GM
    /// (if still launched there as the run asked about).
    pub(super) fn lm_reconciled(&mut self, g: u16, answer: ReconcileResponse) {
        let l = answer.lm.0;
        let ends: Vec<TaskEnd> = answer
            .finished
            .iter()
            .filter_map(|task| {
                let x = self.launched_at.get(task)?;
                // (A void run of a gang restarted whole: its GM drops the end.)
                let void = (self.gang_next_run.get(task)).is_some_and(|next| x.run < *next);
                (x.gm == g && x.lm == l && !void).then_some(TaskEnd {
                    used: None,
                    task: *task,
                    attempt: x.run,
                    node: NodeId(0),
                    at: self.clock(super::Role::Gm(g)),
                    failure: None,
                })
            })
            .collect();
        if ends.is_empty() {
            return;
        }
        self.note(|| {
            format!(
                "  gm{g} reconcile with lm{l}: finished [{}]",
                tasks(ends.iter().map(|e| e.task))
            )
        });
        for end in &ends {
            self.checker.gm_ended_by_reconcile(end.task);
        }
        self.reconcile_ends = true;
        let ended = TasksEnded {
            lm: LmId(l),
            gm: GmId(g),
            ends,
            publish: common::messages::EndsPublished::ByLm,
        };
        self.gm_step(g, GmInput::Lm(LmToGm::Ended(ended)));
        self.reconcile_ends = false;
    }
}
