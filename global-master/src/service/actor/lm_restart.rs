//! An LM restarted: its new life knows the tasks its workers still hold (they
//! register again) and those they report finished, but not a task whose worker
//! died while the LM was away, nor an end its previous life did not send. The core
//! names the LM when its view takes up the new life (`GmOutput::lm_new_lives`);
//! after `--lm-reconcile-delay-ms` (its workers register meanwhile) this GM asks it
//! about the tasks it believes run there ([`GmToLm::Reconcile`] with `forget`):
//! - held: its end will come as usual;
//! - remembered finished: it ends finished here (the LM does not know this GM
//!   launched it, so no other end will come);
//! - neither: the LM reports it lost (an ordinary `Ended` message, on its stream),
//!   and its job's retry policy decides; a worker that registers later still
//!   holding it is told to kill it, so it never runs twice on purpose.
//!
//! Failure stories: a lost or unanswered request is asked again (a few times, then
//! logged and given up: the LM's next restart asks again); a duplicate answer finds
//! the tasks already ended (only open tasks end); an answer from a life that has
//! since restarted again is still true of the tasks it names; a GM restart loses the
//! pending question, which its own journal reconcile covers.

use crate::core::GmInput;
use crate::service::actor::GmActor;
use actix::prelude::*;
use common::messages::{ReconcileRequest, ReconcileResponse, TaskEnd, TasksEnded};
use common::protocol::{GmToLm, LmToGm};
use common::{LmId, Micros, NodeId, TaskId};
use service_kit::clock;
use std::time::Duration;

/// How many times an unanswered question to a restarted LM is asked.
const ASKS: u32 = 5;
/// How long an LM has to answer it.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

impl GmActor {
    /// The core took up a new life of `lm` at `now`: ask it after the delay.
    pub(super) fn lm_restarted(&mut self, now: Micros, lm: LmId, ctx: &mut Context<Self>) {
        let life = self.core.view(lm).map(|v| v.incarnation);
        self.metrics.lm_restarts_seen += 1;
        tracing::info!(gm = %self.gm(), %lm, incarnation = life, delay_ms = self.lm_reconcile_delay.as_millis() as u64, "LM restarted; asking it which of our tasks it still holds once its workers had time to register");
        ctx.run_later(self.lm_reconcile_delay, move |act, ctx| {
            act.ask_restarted_lm(lm, life, now, 1, ctx)
        });
    }

    /// Asks `lm` (still in life `life`, else its newer life's own question is
    /// pending) about the tasks launched there by `seen_at`.
    fn ask_restarted_lm(
        &mut self,
        lm: LmId,
        life: Option<u64>,
        seen_at: Micros,
        ask: u32,
        ctx: &mut Context<Self>,
    ) {
        if self.core.view(lm).map(|v| v.incarnation) != life {
            tracing::debug!(%lm, "LM restarted again before this GM asked about its tasks; the newer life is asked instead");
            return;
        }
        let tasks = self.tracker.running_on(lm, seen_at);
        if tasks.is_empty() {
            return;
        }
        let Some(link) = self.links.get(lm.index()).cloned() else {
            return;
        };
        let request = GmToLm::Reconcile(ReconcileRequest {
            gm: self.gm(),
            lm,
            tasks: tasks.clone(),
            forget: true,
            life: self.core.life(),
            preempts: Vec::new(),
            preempt_seq: 0,
        });
        let me = ctx.address();
        tokio::spawn(async move {
            let answer = match tokio::time::timeout(ANSWER_WAIT, link.call(request)).await {
                Ok(Ok(LmToGm::ReconcileAnswer(a))) => Ok(a),
                Ok(Ok(other)) => Err(format!("unexpected answer {}", other.kind())),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} s", ANSWER_WAIT.as_secs())),
            };
            me.do_send(LmReconciled {
                lm,
                life,
                seen_at,
                ask,
                asked: tasks,
                answer,
            });
        });
    }
}

/// A restarted LM's answer about the tasks this GM believed ran there (or why
/// there is none).
#[derive(Message)]
#[rtype(result = "()")]
struct LmReconciled {
    lm: LmId,
    life: Option<u64>,
    seen_at: Micros,
    ask: u32,
    asked: Vec<(TaskId, u32)>,
    answer: Result<ReconcileResponse, String>,
}

impl Handler<LmReconciled> for GmActor {
    type Result = ();

    fn handle(&mut self, msg: LmReconciled, ctx: &mut Context<Self>) {
        let LmReconciled {
            lm,
            life,
            seen_at,
            ask,
            asked,
            answer,
        } = msg;
        let answer = match answer {
            Ok(a) => a,
            Err(why) if ask < ASKS => {
                tracing::warn!(%lm, error = %why, ask, "restarted LM did not answer which of our tasks it holds; asking again");
                ctx.run_later(self.lm_reconcile_delay, move |act, ctx| {
                    act.ask_restarted_lm(lm, life, seen_at, ask + 1, ctx)
                });
                return;
            }
            Err(why) => {
                self.metrics.lm_reconciles_failed += 1;
                tracing::error!(%lm, error = %why, tasks = asked.len(), "restarted LM never answered which of our tasks it holds; they stay launched there until it answers a later question or reports them");
                return;
            }
        };
        self.metrics.lm_reconciles += 1;
        let now = clock::now();
        let runs: std::collections::HashMap<TaskId, u32> = asked.iter().copied().collect();
        // Only tasks still open at the run asked about end here (an end may have
        // arrived meanwhile).
        let ends: Vec<TaskEnd> = answer
            .finished
            .iter()
            .filter_map(|task| {
                let run = *runs.get(task)?;
                let s = self.tracker.task(*task)?;
                (!s.state.is_final() && s.attempt == run).then(|| TaskEnd {
                    used: None,
                    task: *task,
                    attempt: run,
                    node: NodeId(s.node.unwrap_or(0)),
                    at: now,
                    failure: None,
                })
            })
            .collect();
        let held = answer.held.len();
        let lost = asked.len().saturating_sub(held + answer.finished.len());
        self.metrics.reconciled_finished += ends.len() as u64;
        self.metrics.reconciled_lost += lost as u64;
        tracing::info!(gm = %self.gm(), %lm, asked = asked.len(), held, finished = ends.len(), lost, "restarted LM answered which of our tasks it holds; the lost ones come as its reports");
        if !ends.is_empty() {
            let ended = TasksEnded {
                lm,
                gm: self.gm(),
                ends,
                publish: common::messages::EndsPublished::ByLm,
            };
            self.deliver(GmInput::Lm(LmToGm::Ended(ended)), ctx);
        }
    }
}
