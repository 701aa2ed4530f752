//! Sending work: launch requests grouped into per-LM batches, the view deductions a
//! snapshot will later account for, the tasks awaiting an LM's answer, and taking
//! back a batch the transport could not deliver.

use crate::cluster_view::ClusterView;
use crate::outputs::PassOutput;
use crate::queue::Pending;
use crate::view::LmView;
use common::messages::{LaunchBatch, LaunchRequest, Placement};
use common::{GmId, JobId, LmId, NodeId, Resources, TaskId, TaskKind};
use rustc_hash::FxHashMap as HashMap;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

/// A batch sent and not yet included in a snapshot of its LM.
#[derive(Debug)]
struct InFlight {
    seq: u64,
    deducted: Vec<(NodeId, Resources)>,
    /// The job of every QUEUEABLE task in the batch (for quotas).
    queueable_jobs: Vec<JobId>,
}

/// A task awaiting an answer, and the batch (LM, sequence number) that carries it
/// (`None` for a preemption request).
type Awaiting = (Box<Pending>, Option<(LmId, u64)>);

/// Per LM: batch sequence numbers, batches in flight and the batch open in the
/// current pass; and every task sent and not yet answered.
#[derive(Debug)]
pub struct Dispatcher {
    gm: GmId,
    /// This GM's life ([`common::messages::LaunchBatch::life`]; 0: unfenced).
    life: u64,
    batch_size: usize,
    next_seq: Vec<u64>,
    in_flight: Vec<VecDeque<InFlight>>,
    open_batches: Vec<Option<usize>>,
    /// Dispatched tasks (and preemption requests) waiting for the LM's answer,
    /// with the batch (LM, sequence number) that carries them (`None` for a
    /// preemption request).
    outstanding: HashMap<TaskId, Awaiting>,
}

impl Dispatcher {
    /// Batches to each LM are numbered from `first_seq + 1`.
    pub fn new(gm: GmId, lms: usize, batch_size: usize, first_seq: u64) -> Self {
        Dispatcher {
            gm,
            life: 0,
            batch_size,
            next_seq: vec![first_seq; lms],
            in_flight: (0..lms).map(|_| VecDeque::new()).collect(),
            open_batches: vec![None; lms],
            outstanding: HashMap::default(),
        }
    }

    /// Launch batches carry this life (see `GmConfig::life`).
    pub fn with_life(mut self, life: u64) -> Self {
        self.life = life;
        self
    }

    /// Tasks sent to an LM and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Whether this GM awaits an answer for `task`.
    pub fn awaits(&self, task: &TaskId) -> bool {
        self.outstanding.contains_key(task)
    }

    /// The task awaiting an answer, if any.
    pub fn awaiting(&self, task: &TaskId) -> Option<&Pending> {
        self.outstanding.get(task).map(|(pending, _)| &**pending)
    }

    /// A task asked to be preempted for awaits its answer.
    pub fn await_answer(&mut self, pending: Box<Pending>) {
        self.outstanding.insert(pending.task.id, (pending, None));
    }

    /// The task a preemption answer is for, if this GM was waiting for it.
    pub fn answered(&mut self, task: &TaskId) -> Option<Box<Pending>> {
        self.outstanding.remove(task).map(|(pending, _)| pending)
    }

    /// Run `attempt` of `task` ended: it was launched, whatever became of its
    /// batch's answer, which is no longer awaited (given up later, the batch would
    /// put the task back in its queue: a second run). LRA containers are left to
    /// their own path, which answers for them.
    pub fn run_ended(&mut self, task: &TaskId, attempt: u32) -> bool {
        let launched = self.outstanding.get(task).is_some_and(|(p, batch)| {
            batch.is_some() && p.task.attempt == attempt && p.task.kind != TaskKind::LongRunning
        });
        if launched {
            self.outstanding.remove(task);
        }
        launched
    }

    /// The task an answer to batch `seq` of `lm` is for, if this GM awaits that
    /// batch's answer for it. A task sent again since (a retry of a lost run after
    /// the first batch was given up or left in doubt) awaits its new batch: the
    /// old batch's late answer is not its own, and is `None`.
    pub fn answered_in(&mut self, lm: LmId, seq: u64, task: &TaskId) -> Option<Box<Pending>> {
        // One probe of the table (nothing iterates it: its layout does not matter).
        match self.outstanding.entry(*task) {
            Entry::Occupied(e) if e.get().1 == Some((lm, seq)) => Some(e.remove().0),
            _ => None,
        }
    }

    /// Batch `batch` as it is worth sending again: only the requests whose task still
    /// awaits this batch's answer. A run whose end came on the LM's stream was
    /// launched, and one answered, cancelled or taken back is settled: resent to a
    /// restarted LM (which no longer knows the batch), it would run again. `None`
    /// when nothing in it is awaited any more: sending it again cannot tell anything.
    pub fn still_in_doubt(&self, batch: &LaunchBatch) -> Option<LaunchBatch> {
        let requests: Vec<LaunchRequest> = batch
            .requests
            .iter()
            .filter(|r| {
                self.outstanding.get(&r.task.id).is_some_and(|(p, sent)| {
                    *sent == Some((batch.lm, batch.seq)) && p.task.attempt == r.task.attempt
                })
            })
            .cloned()
            .collect();
        (!requests.is_empty()).then(|| LaunchBatch {
            requests,
            resend: true,
            ..batch.clone()
        })
    }

    /// Adds a launch request to the open batch for LM `l`; `deduct` takes its
    /// resources from the view (not for QUEUEABLE work, which the view does not see).
    /// The task then awaits the answer as it is (no copy). Returns the index of the
    /// batch in `out.batches`.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &mut self,
        view: &mut ClusterView,
        l: usize,
        node: NodeId,
        placement: Placement,
        mut pending: Box<Pending>,
        out: &mut PassOutput,
        deduct: bool,
    ) -> usize {
        let resources = if deduct {
            pending.task.resources
        } else {
            Resources::ZERO
        };
        if let Some(view) = view.get_mut(l) {
            view.deduct(node, &resources);
        }
        let batch = match self.open_batches[l] {
            Some(b) if out.batches[b].requests.len() < self.batch_size.max(1) => b,
            _ => {
                self.next_seq[l] += 1;
                let seq = self.next_seq[l];
                out.batches.push(LaunchBatch {
                    gm: self.gm,
                    life: self.life,
                    lm: LmId(l as u16),
                    seq,
                    resend: false,
                    requests: Vec::new(),
                });
                self.in_flight[l].push_back(InFlight {
                    seq,
                    deducted: Vec::new(),
                    queueable_jobs: Vec::new(),
                });
                self.open_batches[l] = Some(out.batches.len() - 1);
                out.batches.len() - 1
            }
        };
        if let Some(f) = self.in_flight[l].back_mut() {
            f.deducted.push((node, resources));
            if pending.task.kind == TaskKind::Queueable {
                f.queueable_jobs.push(pending.task.id.job);
            }
        }
        pending.attempts += 1;
        out.batches[batch].requests.push(LaunchRequest {
            task: pending.task.clone(),
            node,
            placement,
        });
        let sent_in = (out.batches[batch].lm, out.batches[batch].seq);
        self.outstanding
            .insert(pending.task.id, (pending, Some(sent_in)));
        batch
    }

    /// Ends a pass: the next dispatch to any LM opens a new batch.
    pub fn close_open_batches(&mut self) {
        self.open_batches.iter_mut().for_each(|b| *b = None);
    }

    /// A snapshot of LM `l` includes its batches up to `applied`: they leave the
    /// in-flight list; answers the jobs of their QUEUEABLE tasks, in order.
    pub fn landed(&mut self, l: usize, applied: u64) -> Vec<JobId> {
        let mut jobs = Vec::new();
        let Some(in_flight) = self.in_flight.get_mut(l) else {
            return jobs;
        };
        while in_flight.front().is_some_and(|f| f.seq <= applied) {
            if let Some(landed) = in_flight.pop_front() {
                jobs.extend(landed.queueable_jobs);
            }
        }
        jobs
    }

    /// LM `l` started a new life: the batches sent to it whose calls are settled
    /// (answered, or given up) leave the in-flight list, whatever their numbers.
    /// The new life's snapshot is the truth about them (what the old life applied
    /// it adopted from its workers, or lost), and its record of applied batches
    /// starts again, so no snapshot of it would ever include them: their
    /// deductions would stay in the view for good (issue 33, seed 16687). Batches
    /// still awaiting an answer stay (the new life may apply them). Returns the
    /// jobs of their QUEUEABLE tasks, as [`Dispatcher::landed`] does.
    pub fn forget_settled(&mut self, l: usize) -> Vec<JobId> {
        let lm = LmId(l as u16);
        let Some(in_flight) = self.in_flight.get_mut(l) else {
            return Vec::new();
        };
        let awaited: Vec<u64> = self
            .outstanding
            .values()
            .filter_map(|(_, batch)| batch.filter(|(at, _)| *at == lm).map(|(_, seq)| seq))
            .collect();
        let mut jobs = Vec::new();
        in_flight.retain_mut(|f| {
            if awaited.contains(&f.seq) {
                return true;
            }
            jobs.append(&mut f.queueable_jobs);
            false
        });
        jobs
    }

    /// Launches sent after a snapshot was taken are not in it: deducts them again
    /// from LM `l`'s fresh view.
    pub fn deduct_in_flight(&self, l: usize, view: &mut LmView) {
        for f in self.in_flight.get(l).into_iter().flatten() {
            for (node, res) in &f.deducted {
                view.deduct(*node, res);
            }
        }
    }

    /// Batch `seq` never reached LM `lm`: its deductions go back to the view; answers
    /// the jobs of its QUEUEABLE tasks (nothing if the batch is unknown or landed).
    pub fn abandon(&mut self, view: &mut ClusterView, lm: LmId, seq: u64) -> Vec<JobId> {
        let Some(in_flight) = self.in_flight.get_mut(lm.index()) else {
            return Vec::new();
        };
        let Some(lost) = in_flight
            .iter()
            .position(|f| f.seq == seq)
            .and_then(|pos| in_flight.remove(pos))
        else {
            return Vec::new();
        };
        if let Some(view) = view.get_mut(lm.index()) {
            lost.deducted.iter().for_each(|(n, r)| view.credit(*n, r));
        }
        lost.queueable_jobs
    }
}
