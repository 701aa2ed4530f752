//! What the LM wants done after handling an input ([`LmEffects`]), and why it may
//! refuse an input ([`LmError`]). A leaf.

use common::events::TaskEvent;
use common::messages::{
    CancelResponse, EndsPublished, KillTask, LaunchResponse, LmSnapshot, PreemptResponse,
    PreemptedTasks, PromoteTask, StartTask, TaskEnd, TaskStart, TasksEnded, TasksStarted,
};
use common::{GmId, JobId, LmId, Micros, NodeId, TaskId, TaskSpec};

/// What the LM wants done after handling an input. The rare answers (preemption,
/// cancel, reconcile, gang) are boxed: inline they made every step's effects
/// (built and moved at every step) several hundred bytes larger.
#[derive(Debug, Default)]
pub struct LmEffects {
    /// The answer to a launch batch (send to that GM).
    pub response: Option<LaunchResponse>,
    /// State to broadcast to every GM.
    pub heartbeat: Option<LmSnapshot>,
    /// Tasks to start on workers.
    pub starts: Vec<StartTask>,
    pub events: Vec<TaskEvent>,
    /// The answer to a preemption request (send to that GM).
    pub preempt_response: Option<Box<PreemptResponse>>,
    /// Final answers to preemption requests held before (each to its GM, on the
    /// GM's stream).
    pub held_preempt_answers: Vec<PreemptResponse>,
    /// Tasks to stop on workers (preempted).
    pub kills: Vec<KillTask>,
    /// Preempted tasks to hand back to the GMs that own their queues.
    pub requeues: Vec<PreemptedTasks>,
    /// QUEUEABLE tasks promoted to GUARANTEED (tell their workers).
    pub promoted: Vec<PromoteTask>,
    /// Tasks that ended at their workers, for the GMs that launched them.
    pub ended: Vec<TasksEnded>,
    /// Tasks that started at their workers, for the GMs that launched them.
    pub started: Vec<TasksStarted>,
    /// The answer to a cancel request (send to that GM).
    pub cancel_response: Option<Box<CancelResponse>>,
    /// The answer to a restarted GM's reconcile request (send to that GM).
    pub reconcile_response: Option<Box<common::messages::ReconcileResponse>>,
    /// Tasks a worker reported finished that this LM did not hold (see
    /// `LocalMaster::handle_worker_report`): remembered for their GM's reconcile
    /// request; the driver logs and counts them.
    pub unowned_finished: Vec<TaskId>,
    /// The answer to a step of a gang transaction (send to that GM).
    pub gang_response: Option<Box<common::messages::GangAnswer>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LmError {
    #[error("worker report for task {task} on {node}, which is not running there")]
    UnknownTask { task: TaskId, node: NodeId },
    #[error("{node} is not a node of this LM")]
    UnknownNode { node: NodeId },
    #[error("launch batch is addressed to {got}, this is {want}")]
    WrongLm { got: LmId, want: LmId },
    /// A launch batch or preemption of a life of `gm` older than one this LM has
    /// seen: that process was replaced (a standby took over) and is fenced.
    #[error("request of {gm} life {life} refused: this LM has seen its newer life {newest} (the sender was replaced and is fenced)")]
    OlderGmLife { gm: GmId, life: u64, newest: u64 },
    /// A gang's stop naming, among its members, a task of another job: a GM
    /// names only its gang's own tasks, so this one would void another job's runs
    /// (perhaps another GM's). Refused whole, nothing applied.
    #[error("gang stop of job {job} names task {task} of another job as a member; refused")]
    ForeignGangMember { job: JobId, task: TaskId },
}

impl LmEffects {
    /// Hands a preempted (or shed, or reclaimed) task back to `gm`, which owns its
    /// queue: one message per GM.
    pub fn requeue(&mut self, lm: LmId, gm: GmId, task: TaskSpec, lost: Micros) {
        match self.requeues.iter_mut().find(|r| r.gm == gm) {
            Some(r) => r.tasks.push((task, lost)),
            None => self.requeues.push(PreemptedTasks {
                lm,
                gm,
                tasks: vec![(task, lost)],
            }),
        }
    }
}

impl LmEffects {
    /// Tells `gm`, which launched the task, that it ended (its event published
    /// here): one message per GM.
    pub fn ended(&mut self, lm: LmId, gm: GmId, end: TaskEnd) {
        self.ended_published_by(lm, gm, end, EndsPublished::ByLm);
    }

    /// Tells `gm` this LM's verdict that a run is lost, for the GM to publish
    /// when it takes it (see [`EndsPublished::ByGm`]): one message per GM.
    pub fn lost(&mut self, lm: LmId, gm: GmId, end: TaskEnd) {
        self.ended_published_by(lm, gm, end, EndsPublished::ByGm);
    }

    fn ended_published_by(&mut self, lm: LmId, gm: GmId, end: TaskEnd, publish: EndsPublished) {
        match (self.ended.iter_mut()).find(|e| e.gm == gm && e.publish == publish) {
            Some(e) => e.ends.push(end),
            None => self.ended.push(TasksEnded {
                lm,
                gm,
                ends: vec![end],
                publish,
            }),
        }
    }
}

impl LmEffects {
    /// Tells `gm`, which launched the task, that it started: one message per GM.
    pub fn started(&mut self, lm: LmId, gm: GmId, start: TaskStart) {
        match self.started.iter_mut().find(|s| s.gm == gm) {
            Some(s) => s.starts.push(start),
            None => self.started.push(TasksStarted {
                lm,
                gm,
                starts: vec![start],
            }),
        }
    }
}
