//! A restarted LM takes over from its previous life: the tasks its workers still hold
//! (adopted into the state) and those they finished meanwhile, so that a GM's launch
//! batch resent because the old LM never answered does not run a task twice.

use super::LocalMaster;
use crate::effects::{LmEffects, LmError};
use common::events::{TaskEvent, TaskEventKind};
use common::messages::{HeldTask, Placement, TaskEnd, TaskFailure};
use common::{Micros, NodeId, TaskId};

impl LocalMaster {
    /// Takes a task a worker already holds into the state (the worker registered again
    /// after this LM restarted): its resources are deducted from its node and its
    /// queue's usage, on behalf of the GM that accepted its job (named in the job id's
    /// top bits, [`common::JobId::accepted_by`]; a borrowed placement if the node is
    /// another partition's), or of the node's home partition when the id names no GM
    /// of this cluster. A GM that asks about it later claims it anyway
    /// (`claim_adopted`). A task already known is
    /// left as it is, and so is one reported lost (its kill is on its way). A task that does not fit in its node's free resources is
    /// accounted anyway (the worker runs it) and answered `Ok(false)` for the caller
    /// to report; a node this LM does not have is an error. A started task's
    /// `Started` event is issued again with its original time (the previous LM may
    /// have died before publishing it; observers drop duplicates).
    pub fn adopt(
        &mut self,
        now: Micros,
        held: HeldTask,
        effects: &mut LmEffects,
    ) -> Result<bool, LmError> {
        let HeldTask {
            node,
            task,
            started_at,
        } = held;
        let Some(home) = self.topology.home.get(node.index()).copied() else {
            return Err(LmError::UnknownTask {
                task: task.id,
                node,
            });
        };
        if self.running.contains_key(&task.id)
            || self.queued.contains_key(&task.id)
            || self.lost.contains(&(task.id, task.attempt))
        {
            // Known, or reported lost (being killed): left as it is.
            return Ok(true);
        }
        let fits = self.free[node.index()].fits(&task.resources);
        let id = task.id;
        let attempt = task.attempt;
        self.restarted.adopt(id);
        let named = task.id.job.accepted_by();
        let (owner, placement) = if named == home || named.0 >= self.topology.gms {
            (home, Placement::Internal)
        } else {
            (named, Placement::Repartition)
        };
        let mut ignored = LmEffects::default();
        self.allocate(now, owner, node, placement, task, &mut ignored);
        if let Some(alloc) = self.running.get_mut(&id) {
            alloc.started = started_at.is_some();
            alloc.started_at = started_at;
        }
        if let Some(at) = started_at {
            // Its GM learns it runs (again): a task of a job cancelled while this LM
            // was away is then stopped (the GM asks again).
            let start = common::messages::TaskStart {
                task: id,
                attempt,
                node,
                at,
            };
            effects.started(self.topology.lm, owner, start);
            effects.events.push(TaskEvent {
                task: id,
                at,
                kind: TaskEventKind::Started {
                    lm: self.topology.lm,
                    node,
                },
            });
        }
        self.version += 1;
        Ok(fits)
    }

    /// An adopted task ended: one that finished is remembered like the tasks finished
    /// before the restart (a late resend of the old LM's batch must not run it again);
    /// one that was killed goes back to its GM and may be launched again.
    pub(crate) fn ended_adopted(&mut self, task: TaskId) {
        self.restarted.ended(task);
    }

    /// The runs a worker registering again lists as ended that this LM still
    /// holds running on `nodes` (its nodes): their end reports never arrived (the
    /// worker was cut off, then restarted). The caller applies each as the worker's
    /// report (`Finished` or `Failed`, with its real end time) *before* it declares
    /// the worker's remaining tasks lost, so that a run that did end is not reported
    /// lost and run again.
    pub fn unheard_ends(
        &self,
        nodes: &[NodeId],
        ended: &[TaskEnd],
    ) -> Vec<common::messages::WorkerReport> {
        ended
            .iter()
            .filter_map(|end| {
                let alloc = self.running.get(&end.task)?;
                (alloc.task.attempt == end.attempt && nodes.contains(&alloc.node))
                    .then(|| end.report(alloc.node))
            })
            .collect()
    }

    /// Records a run a worker lists as ended when it registers again. A finished
    /// run: a GM resending its launch gets `Duplicate`, not a second run. A failed
    /// run: a GM asking about it is not told it is lost (its end goes to the GM
    /// with the failure, and the job's retry policy decides). A run this LM
    /// reported lost is not recorded: its GM retries the task, and the retry must
    /// not be answered `Duplicate`.
    ///
    /// True when this LM life had not heard of it: the caller announces it again
    /// (the life that saw it end may have died before its event reached the
    /// broker, or its report to the GM): a finish as a re-announced event
    /// ([`TaskEvent::reannounced`]), a failure through its GM, which alone knows
    /// whether the run is still the task's ([`common::messages::TasksEnded::reannounced`]).
    pub fn ended_before_restart(&mut self, end: &TaskEnd) -> bool {
        let (task, attempt) = (end.task, end.attempt);
        if self.is_lost_run(task, attempt) || self.gangs.is_void(task, attempt) {
            return false;
        }
        match &end.failure {
            None if self.restarted.has_finished(&task, attempt) => false,
            None => {
                self.restarted.finished(task, attempt);
                true
            }
            Some(_) if self.restarted.has_failed(task, attempt) => false,
            Some(_) => {
                self.restarted.failed(task, attempt);
                true
            }
        }
    }

    /// A GM asked about a task this LM adopted from its worker (on behalf of the
    /// node's home partition, not knowing who launched it): the asker launched it,
    /// so its end and start go there from now on, as a borrowed placement if the
    /// node is another partition's.
    fn claim_adopted(&mut self, task: TaskId, gm: common::GmId) {
        if !self.restarted.is_adopted(&task) {
            return;
        }
        let Some(alloc) = self.running.get_mut(&task) else {
            return;
        };
        if alloc.gm == gm {
            return;
        }
        alloc.gm = gm;
        let home = self.topology.home.get(alloc.node.index()).copied();
        alloc.placement = if home == Some(gm) {
            Placement::Internal
        } else {
            Placement::Repartition
        };
    }

    /// A GM asks which of its tasks this LM holds (running, queued in a worker,
    /// being preempted or cancelled) or remembers finished. With `forget`, the runs
    /// asked about that are neither end lost, as those of a worker that stopped
    /// answering do (see [`LocalMaster::nodes_lost`]): reported to the GM, in the
    /// event stream, and recorded, so that a worker registering later with one is
    /// told to kill it (see [`common::messages::ReconcileRequest::forget`]).
    /// Otherwise nothing changes, except that a task adopted after a restart is
    /// the asker's from then on (see `claim_adopted`), and that a held preemption
    /// request asked about that this LM answers it does not hold is void from
    /// then on (see `held_asked`).
    pub fn handle_reconcile(
        &mut self,
        now: Micros,
        request: common::messages::ReconcileRequest,
    ) -> Result<LmEffects, LmError> {
        self.check_addressed(request.lm)?;
        // Taken as the GM's newest life before answering: a launch of an older
        // life still on its way is refused from now on (issue 33, seed 14212).
        self.check_life(request.gm, request.life)?;
        let lm = self.topology.lm;
        let mut effects = LmEffects::default();
        let mut held = Vec::new();
        let mut finished = Vec::new();
        for (task, asked) in request.tasks {
            let run = match (self.running.get(&task), self.queued.get(&task)) {
                (Some(a), _) => Some((a.node, a.task.attempt)),
                (None, Some(q)) => Some((q.node, q.task.attempt)),
                (None, None) => self
                    .pending_kills
                    .get(&task)
                    .map(|k| (k.node, k.task.attempt)),
            };
            if run.is_some() {
                self.claim_adopted(task, request.gm);
            }
            match run {
                Some((node, attempt)) => held.push((task, node, attempt)),
                None if self.restarted.has_finished(&task, asked) => finished.push(task),
                // Its failure went to the GM when the worker listed it.
                None if self.restarted.has_failed(task, asked) => {}
                None if request.forget && self.lost.insert((task, asked)) => {
                    let failure = TaskFailure::Lost {
                        reason: format!("{lm} restarted and none of its workers holds the task"),
                    };
                    let end = TaskEnd {
                        used: None,
                        task,
                        attempt: asked,
                        node: NodeId(0),
                        at: now,
                        failure: Some(failure),
                    };
                    // Published by the GM when it takes it (`EndsPublished::ByGm`).
                    effects.lost(lm, request.gm, end);
                }
                None => {}
            }
        }
        let asker = (request.gm, request.life, request.preempt_seq);
        let preempts = self.held_asked(asker, &request.preempts);
        effects.reconcile_response = Some(Box::new(common::messages::ReconcileResponse {
            lm,
            gm: request.gm,
            held,
            finished,
            incarnation: self.incarnation,
            preempts,
        }));
        Ok(effects)
    }
}
