//! The LM's one entry point: `step(now, input) -> output`, in the raft-rs style.
//!
//! Every message an LM takes ([`GmToLm`], [`WorkerToLm`]) and the passage of time
//! ([`LmInput::Tick`]) go through [`LocalMaster::step`], which returns what to send,
//! addressed: orders for the workers of its nodes, messages for one GM or all of
//! them, lifecycle events to publish, and when to be woken next. A driver delivers
//! them without knowing their variants.

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::events::TaskEvent;
use common::messages::LmSnapshot;
use common::protocol::{GmAddress, GmToLm, LmToGm, LmToWorker, WorkerToLm};
use common::{Micros, NodeId, TaskId};

/// What an LM takes.
#[derive(Clone, Debug, PartialEq)]
pub enum LmInput {
    Gm(GmToLm),
    Worker(WorkerToLm),
    /// Time passed: send the heartbeat when due (with promotions and shedding).
    Tick,
    /// The worker of these nodes stopped answering (the driver's judgement: it owns
    /// the clock and the transport): their tasks end lost, the nodes are down.
    WorkerLost {
        nodes: Vec<NodeId>,
        reason: String,
    },
    /// The worker of these nodes is back, holding these runs (node, task,
    /// [`common::TaskSpec::attempt`]): the nodes are up again; held runs reported
    /// lost are killed.
    WorkerBack {
        nodes: Vec<NodeId>,
        holding: Vec<(NodeId, TaskId, u32)>,
    },
    /// An operator drained `node` (`drained`: no new work lands there, running work
    /// finishes) or undrained it; see `core/drain.rs`.
    Drain {
        node: NodeId,
        drained: bool,
    },
}

/// What an LM sends after one step, in the order it must leave: worker orders first
/// (promotions, then kills, then starts, so that a kill arrives before the start that
/// reuses its room), then messages for the GMs.
#[derive(Debug, Default)]
pub struct LmOutput {
    pub to_workers: Vec<LmToWorker>,
    pub to_gms: Vec<(GmAddress, LmToGm)>,
    /// Lifecycle events for observers (the event stream).
    pub events: Vec<TaskEvent>,
    /// When the LM next wants a [`LmInput::Tick`].
    pub next_wakeup: Micros,
    /// Finished tasks this LM did not hold, kept for their GM's reconcile request
    /// (see `LmEffects::unowned_finished`): the driver logs and counts them.
    pub unowned_finished: Vec<common::TaskId>,
}

impl LmOutput {
    /// The answer to a launch batch among the messages, if this step made one.
    pub fn launch_answer(&self) -> Option<&common::messages::LaunchResponse> {
        self.to_gms.iter().find_map(|(_, m)| match m {
            LmToGm::LaunchAnswer(r) => Some(r),
            _ => None,
        })
    }

    /// The answer to a preemption request among the messages, if this step made one.
    pub fn preempt_answer(&self) -> Option<&common::messages::PreemptResponse> {
        self.to_gms.iter().find_map(|(_, m)| match m {
            LmToGm::PreemptAnswer(r) => Some(&**r),
            _ => None,
        })
    }

    /// The heartbeat among the messages, if this step sent one.
    pub fn heartbeat(&self) -> Option<&LmSnapshot> {
        self.to_gms.iter().find_map(|(to, m)| match (to, m) {
            (GmAddress::All, LmToGm::State(s)) => Some(s),
            _ => None,
        })
    }
}

impl LocalMaster {
    /// Handles one input. An error changes nothing: the input was not for this LM
    /// (another LM's batch) or is about a task that does not run where it says.
    pub fn step(&mut self, now: Micros, input: LmInput) -> Result<LmOutput, LmError> {
        let ticked = matches!(input, LmInput::Tick);
        let mut effects = match input {
            LmInput::Gm(GmToLm::Launch(batch)) => self.handle_launch_batch(now, batch)?,
            LmInput::Gm(GmToLm::Preempt(request)) => self.handle_preempt(now, request)?,
            LmInput::Gm(GmToLm::Cancel(request)) => self.handle_cancel(now, request)?,
            LmInput::Gm(GmToLm::Reconcile(request)) => self.handle_reconcile(now, request)?,
            LmInput::Gm(GmToLm::Gang(request)) => self.handle_gang(now, request)?,
            LmInput::Worker(WorkerToLm::Report(report)) => {
                self.handle_worker_report(now, report)?
            }
            LmInput::Tick => self.tick(now),
            LmInput::WorkerLost { nodes, reason } => self.nodes_lost(now, &nodes, &reason)?,
            LmInput::WorkerBack { nodes, holding } => self.nodes_back(&nodes, &holding)?,
            LmInput::Drain { node, drained } => self.drain_step(now, node, drained)?,
        };
        // Room this step freed goes to the held preemption requests first (a tick
        // serves them before its heartbeat).
        if !ticked {
            self.serve_held_preempts(now, &mut effects);
        }
        Ok(self.output(effects))
    }

    fn output(&self, effects: LmEffects) -> LmOutput {
        let LmEffects {
            response,
            heartbeat,
            starts,
            events,
            preempt_response,
            held_preempt_answers,
            kills,
            requeues,
            promoted,
            ended,
            started,
            cancel_response,
            reconcile_response,
            unowned_finished,
            gang_response,
        } = effects;
        let mut to_workers = Vec::with_capacity(promoted.len() + kills.len() + starts.len());
        to_workers.extend(promoted.into_iter().map(LmToWorker::Promote));
        to_workers.extend(kills.into_iter().map(LmToWorker::Kill));
        to_workers.extend(starts.into_iter().map(LmToWorker::Start));
        let answers = [
            response.is_some(),
            preempt_response.is_some(),
            reconcile_response.is_some(),
            cancel_response.is_some(),
            gang_response.is_some(),
            heartbeat.is_some(),
        ];
        let answers = answers.into_iter().filter(|a| *a).count();
        let mut to_gms = Vec::with_capacity(
            answers + held_preempt_answers.len() + requeues.len() + started.len() + ended.len(),
        );
        if let Some(r) = response {
            to_gms.push((GmAddress::One(r.gm), LmToGm::LaunchAnswer(r)));
        }
        if let Some(r) = preempt_response {
            to_gms.push((GmAddress::One(r.gm), LmToGm::PreemptAnswer(r)));
        }
        for r in held_preempt_answers {
            to_gms.push((GmAddress::One(r.gm), LmToGm::PreemptAnswer(Box::new(r))));
        }
        for r in requeues {
            to_gms.push((GmAddress::One(r.gm), LmToGm::Requeue(r)));
        }
        if let Some(r) = reconcile_response {
            to_gms.push((GmAddress::One(r.gm), LmToGm::ReconcileAnswer(*r)));
        }
        if let Some(r) = cancel_response {
            to_gms.push((GmAddress::One(r.gm), LmToGm::CancelAnswer(r)));
        }
        if let Some(r) = gang_response {
            to_gms.push((GmAddress::One(r.gm), LmToGm::GangAnswer(r)));
        }
        for s in started {
            to_gms.push((GmAddress::One(s.gm), LmToGm::Started(s)));
        }
        for e in ended {
            to_gms.push((GmAddress::One(e.gm), LmToGm::Ended(e)));
        }
        if let Some(s) = heartbeat {
            to_gms.push((GmAddress::All, LmToGm::State(s)));
        }
        LmOutput {
            to_workers,
            to_gms,
            events,
            next_wakeup: self.next_wakeup(),
            unowned_finished,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::cluster::{LmSpec, NodeSpec};
    use common::messages::{LaunchBatch, LaunchRequest, Placement, WorkerReport};
    use common::{ConstraintSet, GmId, LmId, NodeId, Resources, TaskId, TaskSpec};

    fn lm() -> LocalMaster {
        let node = NodeSpec {
            capacity: Resources::cores(2, 1024),
            constraints: ConstraintSet::EMPTY,
        };
        let spec = LmSpec {
            id: LmId(0),
            partitions: vec![vec![node; 1]; 2],
        };
        LocalMaster::new(&spec, 2, crate::LmConfig::default(), Micros(0))
    }

    fn batch(lm: u16, task: u64) -> GmToLm {
        GmToLm::Launch(LaunchBatch {
            gm: GmId(1),
            life: 0,
            lm: LmId(lm),
            seq: 1,
            resend: false,
            requests: vec![LaunchRequest {
                task: TaskSpec::short(TaskId::new(task, 0), Resources::cores(1, 10), Micros(5)),
                node: NodeId(1),
                placement: Placement::Internal,
            }],
        })
    }

    #[test]
    fn a_launch_orders_the_worker_then_answers_the_gm_that_asked() {
        let mut lm = lm();
        let out = lm.step(Micros(3), LmInput::Gm(batch(0, 7))).unwrap();
        assert!(matches!(&out.to_workers[..], [LmToWorker::Start(s)] if s.node == NodeId(1)));
        assert!(matches!(
            &out.to_gms[..],
            [(GmAddress::One(GmId(1)), LmToGm::LaunchAnswer(r))] if r.seq == 1
        ));
        assert!(out.heartbeat().is_none());
    }

    #[test]
    fn a_tick_when_due_sends_the_state_to_every_gm_and_names_the_next_one() {
        let mut lm = lm();
        let out = lm.step(Micros(0), LmInput::Tick).unwrap();
        assert!(out.heartbeat().is_some());
        assert_eq!(out.next_wakeup, crate::LmConfig::default().heartbeat_period);
        let early = lm.step(Micros(1), LmInput::Tick).unwrap();
        assert!(early.heartbeat().is_none() && early.to_gms.is_empty());
    }

    #[test]
    fn a_batch_for_another_lm_or_a_failure_of_an_unknown_task_changes_nothing() {
        let mut lm = lm();
        let before = lm.free().to_vec();
        assert!(lm.step(Micros(1), LmInput::Gm(batch(5, 7))).is_err());
        let report = WorkerReport::Failed {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(9, 0),
            at: Micros(2),
            failure: common::messages::TaskFailure::Exit { code: 1 },
        };
        assert!(lm
            .step(Micros(2), LmInput::Worker(WorkerToLm::Report(report)))
            .is_err());
        assert_eq!(lm.free(), &before[..]);
    }

    /// A worker finished a task while this LM was away (it restarted since): the
    /// LM cannot tell its GM (it does not know which), so it keeps the finish for
    /// the GM's question, publishes it once, and changes no resources.
    #[test]
    fn a_finish_of_a_task_not_held_is_kept_and_published_once() {
        let mut lm = lm();
        let before = lm.free().to_vec();
        let task = TaskId::new(9, 0);
        let report = WorkerReport::Finished {
            used: None,
            attempt: 1,
            node: NodeId(0),
            task,
            at: Micros(2),
        };
        let input = || LmInput::Worker(WorkerToLm::Report(report.clone()));
        let out = lm.step(Micros(2), input()).expect("kept");
        assert_eq!(out.unowned_finished, vec![task]);
        assert_eq!(out.events.len(), 1, "published: {:?}", out.events);
        assert!(out.to_gms.is_empty() && out.to_workers.is_empty());
        assert_eq!(lm.free(), &before[..]);
        let again = lm.step(Micros(3), input()).expect("a repeat");
        assert!(again.events.is_empty() && again.unowned_finished.is_empty());
        let ask = GmToLm::Reconcile(common::messages::ReconcileRequest {
            gm: GmId(1),
            lm: LmId(0),
            tasks: vec![(task, 1)],
            forget: true,
            life: 0,
            preempts: Vec::new(),
            preempt_seq: 0,
        });
        let out = lm.step(Micros(4), LmInput::Gm(ask)).expect("for this LM");
        let [(_, LmToGm::ReconcileAnswer(a))] = &out.to_gms[..] else {
            panic!("one answer and no lost end: {:?}", out.to_gms);
        };
        assert_eq!(a.finished, vec![task]);
    }
}
