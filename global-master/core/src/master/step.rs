//! The GM's one entry point: `step(now, input) -> output`, in the raft-rs style.
//!
//! Client requests ([`ClientToGm`]), LM messages ([`LmToGm`]), the designated GM's
//! LRA submissions, timers (a scheduling pass, an LRA placer run) and transport
//! notices (a request that was never delivered) all go through [`GlobalMaster::step`].
//! It returns the requests to send ([`GmToLm`], each addressed by its LM), the
//! decisions it took (for reports and cost models) and what the driver should know
//! (answers, whether a pass is wanted). A driver delivers them without knowing their
//! variants.

use super::GlobalMaster;
use crate::lra_path::{LraPassOutput, LraRefused, LraSubmission};
use crate::outputs::{Decision, PassOutput, ResponseOutput};
use common::messages::TaskEnd;
use common::protocol::{ClientToGm, GmToLm, LmToGm};
use common::reasons::PendingReason;
use common::{LmId, Micros, TaskId};

/// What a GM takes.
#[derive(Clone, Debug)]
pub enum GmInput {
    Client(ClientToGm),
    Lm(LmToGm),
    /// An LRA for the designated GM's placer.
    SubmitLra(LraSubmission),
    /// Run one scheduling pass over the ready tasks.
    Schedule,
    /// The designated GM's LRA placer may run (if its interval has elapsed).
    LraPass,
    /// A task ended (observed on the event stream): an LRA container's resources and
    /// tags leave the placer's picture.
    TaskEnded(TaskId),
    /// The transport gave up on a request: it was never (or may never have been)
    /// acted on; its tasks go back to their queues.
    Undelivered(Undelivered),
}

/// A request the transport could not deliver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undelivered {
    Batch {
        lm: LmId,
        seq: u64,
        tasks: Vec<TaskId>,
    },
    Preempt {
        lm: LmId,
        task: TaskId,
    },
}

impl Undelivered {
    /// The notice for a request the transport gave up on.
    pub fn of(message: &GmToLm) -> Self {
        match message {
            GmToLm::Launch(b) => Undelivered::Batch {
                lm: b.lm,
                seq: b.seq,
                tasks: b.requests.iter().map(|r| r.task.id).collect(),
            },
            GmToLm::Preempt(p) => Undelivered::Preempt {
                lm: p.lm,
                task: p.task.id,
            },
        }
    }
}

/// What a GM sends and reports after one step.
#[derive(Debug, Default)]
pub struct GmOutput {
    /// Requests for the LMs, in the order they must leave (launch batches, then
    /// preemption requests); each names its LM ([`GmToLm::lm`]).
    pub to_lms: Vec<GmToLm>,
    /// The placement decisions of a pass, in order.
    pub decisions: Vec<Decision>,
    /// For a launch answer: which tasks launched, which were refused; for a
    /// preemption answer, the task if it launched.
    pub answered: ResponseOutput,
    /// For a preemption answer: whether the task now runs.
    pub preempt_launched: Option<bool>,
    /// For an LRA placer run: what it placed, left waiting or refused (its decisions
    /// and batches are in `decisions` and `to_lms`).
    pub lra_pass: Option<LraPassOutput>,
    /// For an LRA submission: why it was refused (nothing of it was kept).
    pub lra_refused: Option<LraRefused>,
    /// For a task end: whether it was a running LRA container of this GM. For an
    /// undelivered request: how many tasks went back to their queues.
    pub affected: usize,
    /// For an undelivered request: the tasks that went back to their queue (or to
    /// the LRA path), and why.
    pub requeued: Vec<(TaskId, PendingReason)>,
    /// For an LM's `Ended` message: the tasks of this GM that finished or failed.
    pub ended: Vec<TaskEnd>,
    /// The input may have made work placeable: the driver should run a pass soon.
    pub wants_pass: bool,
}

impl GmOutput {
    fn pass(&mut self, pass: PassOutput) {
        let PassOutput {
            decisions,
            batches,
            preempts,
        } = pass;
        self.decisions = decisions;
        self.to_lms = batches.into_iter().map(GmToLm::Launch).collect();
        self.to_lms
            .extend(preempts.into_iter().map(GmToLm::Preempt));
    }
}

impl GlobalMaster {
    /// Handles one input.
    pub fn step(&mut self, now: Micros, input: GmInput) -> GmOutput {
        let mut out = GmOutput::default();
        match input {
            GmInput::Client(ClientToGm::Submit(tasks)) => {
                for task in tasks {
                    self.submit(now, task);
                }
                out.wants_pass = true;
            }
            GmInput::Lm(message) => {
                match message {
                    LmToGm::State(snapshot) => self.apply_snapshot(now, &snapshot),
                    LmToGm::LaunchAnswer(response) => {
                        out.answered = self.handle_response(now, &response)
                    }
                    LmToGm::PreemptAnswer(response) => {
                        let launched = self.handle_preempt_response(now, &response);
                        if launched {
                            out.answered.launched.push(response.task);
                        }
                        out.preempt_launched = Some(launched);
                    }
                    LmToGm::Requeue(preempted) => self.requeue_preempted(now, &preempted),
                    // The end of a task changes nothing the GM places with (the LM's
                    // state does, in its next heartbeat): reported, no pass.
                    LmToGm::Ended(ended) => {
                        self.count_ends(&ended.ends);
                        out.ended = ended.ends;
                        return out;
                    }
                }
                out.wants_pass = true;
            }
            GmInput::SubmitLra(submission) => {
                out.lra_refused = self.submit_lra(now, submission).err();
            }
            GmInput::Schedule => out.pass(self.schedule(now)),
            GmInput::LraPass => {
                if let Some(mut lra) = self.lra_pass(now) {
                    out.pass(std::mem::take(&mut lra.pass));
                    out.lra_pass = Some(lra);
                }
            }
            GmInput::TaskEnded(task) => {
                out.affected = usize::from(self.lra_container_ended(now, task));
            }
            GmInput::Undelivered(Undelivered::Batch { lm, seq, tasks }) => {
                let reason = PendingReason::LmUnreachable { lm };
                out.requeued = tasks
                    .iter()
                    .filter(|t| self.dispatcher.awaits(t))
                    .map(|t| (*t, reason.clone()))
                    .collect();
                out.affected = self.abandon_batch(now, lm, seq, &tasks);
                out.wants_pass = out.affected > 0;
            }
            GmInput::Undelivered(Undelivered::Preempt { lm, task }) => {
                if self.abandon_preempt(now, lm, task) {
                    out.requeued = vec![(task, PendingReason::LmUnreachable { lm })];
                }
                out.affected = out.requeued.len();
                out.wants_pass = true;
            }
        }
        out
    }
}

impl GlobalMaster {
    /// Counts ends reported by the LMs (finished, failed).
    fn count_ends(&mut self, ends: &[TaskEnd]) {
        let stats = &mut self.stats;
        for end in ends {
            match end.failure {
                None => stats.tasks_finished += 1,
                Some(_) => stats.tasks_failed += 1,
            }
        }
    }
}
