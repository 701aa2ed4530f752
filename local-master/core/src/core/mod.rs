//! [`LocalMaster`], the LM state machine. Inputs: launch batches from GMs, reports
//! from workers, and the passage of time. Outputs ([`LmEffects`]): responses and
//! heartbeats for GMs, start orders for workers, lifecycle events.
//!
//! The state is private to this module; its methods are split by concern into
//! submodules: [`step`] (the one entry point), `launch.rs` (launch batches, taking
//! and returning resources), `reports.rs` (worker reports), [`preempt`],
//! [`restart`] and [`queueable`]. Batch answers ([`BatchAnswers`]) and what a
//! restarted LM remembers ([`Restarted`]) are parts of their own.

mod cancel;
mod drain;
mod gang;
mod launch;
mod liveness;
pub mod preempt;
mod preempt_hold;
pub mod queueable;
mod reports;
pub mod restart;
mod spares;
pub mod step;

pub use crate::allocation::Allocation;
use crate::allocation::{PendingKill, Queued};
use crate::answers::BatchAnswers;
pub use crate::config::{LmConfig, QueueableConfig};
pub use crate::effects::{LmEffects, LmError};
use crate::restarted::Restarted;
use common::bounded::Bounded;
use common::cluster::LmSpec;
use common::fairness::FairnessConfig;
use common::messages::{free_changed_len, LmSnapshot, LmTopology, FREE_BLOCK, FREE_SUB_BLOCK};
use common::quota::JobContainers;
use common::{GmId, JobId, LmId, Micros, NodeId, QueueId, Resources, TaskId};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use spares::Spares;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many lost runs an LM remembers (and as many whose end it absorbed), about
/// 40 bytes each: far more than a cluster loses between a worker's death and its
/// return.
pub const LOST_MEMORY: usize = 1 << 17;

/// A snapshot's version, `free` and `free_changed` (see [`LocalMaster::snapshot`]).
type BuiltFree = (u64, Arc<Vec<Resources>>, Arc<Vec<u64>>);

#[derive(Debug)]
pub struct LocalMaster {
    topology: Arc<LmTopology>,
    free: Vec<Resources>,
    running: HashMap<TaskId, Allocation>,
    /// Tasks on each node (for preemption), in launch order.
    on_node: Vec<Vec<TaskId>>,
    usage: BTreeMap<QueueId, Resources>,
    total: Resources,
    fairness: Option<Arc<FairnessConfig>>,
    /// Preemptions made per victim queue in the rate window.
    preempt_log: crate::preempt_log::PreemptionLog,
    /// The same for priority preemptions within a queue (their own rate limit).
    priority_log: crate::preempt_log::PreemptionLog,
    /// Fairness preemption requests held for room that frees by itself.
    preempt_holds: crate::preempt_holds::PreemptHolds,
    /// Preempted tasks waiting for the worker to confirm the kill.
    pending_kills: HashMap<TaskId, PendingKill>,
    /// Tasks of cancelled jobs whose kill is on its way to the worker (their
    /// resources are free already): the GM that cancelled them, the node, the run.
    cancelling: HashMap<TaskId, (GmId, NodeId, u32)>,
    /// Per node: resources held by running QUEUEABLE tasks (included in `free`'s
    /// deduction, but reclaimable by any other task).
    q_held: Vec<Resources>,
    /// QUEUEABLE tasks sent to a worker's queue and not yet reported started.
    queued: HashMap<TaskId, Queued>,
    /// Per node: the queued QUEUEABLE tasks, in the order they were sent.
    queued_on: Vec<Vec<TaskId>>,
    queueable: Option<QueueableConfig>,
    /// Tasks this LM has shed once: never shed again, so shedding always ends.
    shed_once: HashSet<TaskId>,
    /// Per job: outstanding QUEUEABLE and running GUARANTEED containers (quotas).
    jobs: HashMap<JobId, JobContainers>,
    answers: BatchAnswers,
    version: u64,
    /// This life (its start time, µs; see [`LmSnapshot::incarnation`]).
    incarnation: u64,
    /// Start orders of this life so far (each one's [`common::messages::Dispatch`]).
    dispatches: u64,
    /// Tasks of the previous life: adopted, or finished ([`LocalMaster::adopt`]).
    restarted: Restarted,
    /// The `free` and `free_changed` (blocks, then sub-blocks) of the last snapshot
    /// built, and its version.
    snapshot_cache: Option<BuiltFree>,
    /// Earlier snapshots' `free` and `free_changed`, to build the next one in when
    /// the last one's are still held ([`LocalMaster::build_free`]).
    spares: Spares,
    /// One bit per block of [`FREE_BLOCK`] nodes: a node's `free` or `q_held` was
    /// written since the last snapshot built ([`LocalMaster::touch`]), so the next
    /// one rebuilds and compares only those blocks.
    dirty: Vec<u64>,
    /// Per node: its worker stopped answering ([`LocalMaster::nodes_lost`]); nothing
    /// is offered or launched there until it is back.
    down: Vec<bool>,
    /// Per node: an operator drained it ([`LocalMaster::set_drained`]): nothing new
    /// is offered or launched there; what runs there runs on.
    drained: Vec<bool>,
    /// Runs (task, [`common::TaskSpec::attempt`]) reported lost whose worker may
    /// still report them (or come back holding them): their reports are absorbed,
    /// and a start is answered with a kill. The task's retry is another run, so its
    /// reports are never taken for the lost run's.
    /// Bounded ([`LOST_MEMORY`], oldest forgotten first): a report of a run
    /// forgotten so is one of a task this LM does not hold.
    lost: Bounded<(TaskId, u32)>,
    /// Lost runs whose end was absorbed: a worker listing one finished later must
    /// not make the GM's retry a `Duplicate`. Bounded likewise.
    lost_ended: Bounded<(TaskId, u32)>,
    /// Gang parts held until their commit, release or expiry (`core/gang.rs`).
    gangs: crate::gang_holds::GangHolds,
    config: LmConfig,
    next_heartbeat: Micros,
}

impl LocalMaster {
    /// An LM for `spec`, whose first heartbeat goes out at `now`.
    pub fn new(spec: &LmSpec, gms: u16, config: LmConfig, now: Micros) -> Self {
        let mut home = Vec::new();
        let mut constraints = Vec::new();
        let mut capacity = Vec::new();
        for (_, gm, node) in spec.nodes() {
            home.push(gm);
            constraints.push(node.constraints);
            capacity.push(node.capacity);
        }
        let topology = LmTopology {
            lm: spec.id,
            gms,
            home,
            constraints,
            capacity,
        };
        let total = topology.capacity.iter().sum::<Resources>();
        let topology_nodes = topology.node_count();
        LocalMaster {
            free: topology.capacity.clone(),
            on_node: vec![Vec::new(); topology.node_count()],
            q_held: vec![Resources::ZERO; topology.node_count()],
            queued: HashMap::default(),
            queued_on: vec![Vec::new(); topology.node_count()],
            queueable: None,
            shed_once: HashSet::default(),
            jobs: HashMap::default(),
            topology: Arc::new(topology),
            running: HashMap::default(),
            usage: BTreeMap::new(),
            total,
            fairness: None,
            preempt_log: Default::default(),
            priority_log: Default::default(),
            preempt_holds: Default::default(),
            pending_kills: HashMap::default(),
            cancelling: HashMap::default(),
            answers: BatchAnswers::new(gms as usize),
            // Versions start at the start time, so that the snapshots of a restarted LM
            // supersede those of its previous life in every GM's view (one change per
            // microsecond would be needed to catch up).
            version: now.0.max(1),
            incarnation: now.0.max(1),
            dispatches: 0,
            restarted: Restarted::default(),
            snapshot_cache: None,
            spares: Spares::default(),
            dirty: vec![0; topology_nodes.div_ceil(FREE_BLOCK).div_ceil(64)],
            down: vec![false; topology_nodes],
            drained: vec![false; topology_nodes],
            lost: Bounded::new(LOST_MEMORY),
            lost_ended: Bounded::new(LOST_MEMORY),
            gangs: Default::default(),
            config,
            next_heartbeat: now,
        }
    }

    /// Takes `life` as this life (instead of the start time): a life the service
    /// keeps above the previous one in its data dir, whatever the clock (issue 33).
    /// Before the first step. Snapshot versions start there too, so that they
    /// supersede the previous life's in every GM's view.
    pub fn set_life(&mut self, life: u64) {
        self.incarnation = life.max(1);
        self.version = self.version.max(self.incarnation);
    }

    /// Enables QUEUEABLE support: the per-node cap, queuing-delay estimates in every
    /// snapshot, and load shedding if configured.
    pub fn with_queueable(mut self, config: QueueableConfig) -> Self {
        self.queueable = Some(config);
        self
    }

    /// QUEUEABLE tasks waiting in worker queues, as the LM knows them.
    pub fn queued_len(&self) -> usize {
        self.queued.len()
    }

    /// Enables preemption verified against these queue shares.
    pub fn with_fairness(mut self, fairness: Arc<FairnessConfig>) -> Self {
        self.fairness = Some(fairness);
        self
    }

    /// The sum of all node capacities.
    pub fn total_capacity(&self) -> Resources {
        self.total
    }

    /// The number the next start order of this life will carry
    /// ([`common::messages::Dispatch::seq`]).
    pub fn next_dispatch(&self) -> u64 {
        self.dispatches + 1
    }

    /// This life's number (its start time, µs): the `lm_life` of its dispatches.
    pub fn life(&self) -> u64 {
        self.incarnation
    }

    pub fn id(&self) -> LmId {
        self.topology.lm
    }

    pub fn topology(&self) -> &Arc<LmTopology> {
        &self.topology
    }

    /// Free resources per node (authoritative).
    pub fn free(&self) -> &[Resources] {
        &self.free
    }

    pub fn running(&self) -> &HashMap<TaskId, Allocation> {
        &self.running
    }

    /// Resources in use by a queue, as this LM knows it.
    pub fn usage(&self, queue: QueueId) -> Resources {
        self.usage.get(&queue).copied().unwrap_or_default()
    }

    /// When [`LocalMaster::tick`] next has something to do.
    pub fn next_wakeup(&self) -> Micros {
        [self.gangs.next_expiry(), self.preempt_holds.next_expiry()]
            .into_iter()
            .flatten()
            .fold(self.next_heartbeat, Micros::min)
    }

    /// Marks node `n`'s block for the next snapshot: its `free` or `q_held` was
    /// written. Every write of either goes through here.
    #[inline]
    pub(crate) fn touch(&mut self, n: usize) {
        let block = n / FREE_BLOCK;
        self.dirty[block / 64] |= 1 << (block % 64);
    }

    /// The current state, as sent to GMs.
    pub fn snapshot(&mut self, now: Micros) -> LmSnapshot {
        let (free, free_changed) = match self.snapshot_cache.take() {
            Some((v, free, changed)) if v == self.version => (free, changed),
            previous => {
                let (free, changed) = self.build_free(previous);
                self.dirty.fill(0);
                (free, changed)
            }
        };
        self.snapshot_cache = Some((self.version, free.clone(), free_changed.clone()));
        LmSnapshot {
            lm: self.topology.lm,
            incarnation: self.incarnation,
            version: self.version,
            taken_at: now,
            topology: self.topology.clone(),
            free,
            free_changed,
            applied_batches: self.answers.applied().to_vec(),
            usage: self.usage.iter().map(|(q, r)| (*q, *r)).collect(),
            queue_delay: match self.queueable {
                Some(_) => Arc::new(self.queue_delays(now)),
                None => Arc::new(Vec::new()),
            },
            queueable_held: match self.queueable {
                Some(_) => Arc::new(self.q_held.clone()),
                None => Arc::new(Vec::new()),
            },
            jobs: match self.queueable {
                Some(_) => Arc::new(self.job_counts()),
                None => Arc::new(Vec::new()),
            },
        }
    }

    /// A snapshot's `free` (QUEUEABLE work is invisible to the GMs' views: any other
    /// task may take its place) and `free_changed` (blocks, then sub-blocks). From
    /// the previous snapshot built, only the dirty blocks are rebuilt and compared
    /// (the others are as they were), in place when no one holds that snapshot's
    /// vectors any more (every GM has applied it: a GM keeps no `free` that comes
    /// with `free_changed`), else in a spare no one holds any more (an earlier
    /// snapshot's, brought up to date: see [`spares`]), else in copies; without
    /// one, every block.
    fn build_free(&mut self, previous: Option<BuiltFree>) -> (Arc<Vec<Resources>>, Arc<Vec<u64>>) {
        let nodes = self.free.len();
        let blocks = nodes.div_ceil(FREE_BLOCK);
        let visible = |n: usize| {
            if self.drained[n] {
                Resources::ZERO
            } else {
                self.free[n].add(&self.q_held[n])
            }
        };
        #[cfg(debug_assertions)]
        let expected = {
            let free: Vec<Resources> = (0..nodes).map(visible).collect();
            let changed = free_changed(
                previous.as_ref().map(|(_, f, c)| (&f[..], &c[..])),
                &free,
                self.version,
            );
            (free, changed)
        };
        let built = match previous {
            Some((_, mut old, mut changed))
                if old.len() == nodes && changed.len() == free_changed_len(nodes) =>
            {
                self.spares.age(&self.dirty);
                if Arc::get_mut(&mut old).is_none() || Arc::get_mut(&mut changed).is_none() {
                    // Still held (by messages on their way): build in a spare, or a copy.
                    let (free, changed_now) = match self.spares.take_equal_to(&old, &changed) {
                        Some(spare) => spare,
                        None => (Arc::new(old.to_vec()), Arc::new(changed.to_vec())),
                    };
                    let held = (
                        std::mem::replace(&mut old, free),
                        std::mem::replace(&mut changed, changed_now),
                    );
                    self.spares.keep(held.0, held.1, &self.dirty);
                }
                let (free, changed_now) = (Arc::make_mut(&mut old), Arc::make_mut(&mut changed));
                let (block_changed, sub_changed) = changed_now.split_at_mut(blocks);
                for (w, &word) in self.dirty.iter().enumerate() {
                    let mut word = word;
                    while word != 0 {
                        let block = w * 64 + word.trailing_zeros() as usize;
                        word &= word - 1;
                        let end = ((block + 1) * FREE_BLOCK).min(nodes);
                        let mut block_differs = false;
                        for sub in (block * FREE_BLOCK..end).step_by(FREE_SUB_BLOCK) {
                            let mut differs = false;
                            let range = sub..(sub + FREE_SUB_BLOCK).min(end);
                            let (own, held, drained) = (
                                &self.free[range.clone()],
                                &self.q_held[range.clone()],
                                &self.drained[range.clone()],
                            );
                            // `visible` over zipped slices (indexed, it cost more).
                            let nodes = free[range].iter_mut().zip(own).zip(held).zip(drained);
                            for (((old, own), held), drained) in nodes {
                                let now = if *drained {
                                    Resources::ZERO
                                } else {
                                    own.add(held)
                                };
                                differs |= now != *old;
                                *old = now;
                            }
                            if differs {
                                sub_changed[sub / FREE_SUB_BLOCK] = self.version;
                                block_differs = true;
                            }
                        }
                        if block_differs {
                            block_changed[block] = self.version;
                        }
                    }
                }
                (old, changed)
            }
            _ => {
                // A full build: the spares' stale blocks are relative to a snapshot
                // this one does not follow from.
                self.spares.clear();
                let free: Vec<Resources> = (0..nodes).map(visible).collect();
                let changed = free_changed(None, &free, self.version);
                (Arc::new(free), Arc::new(changed))
            }
        };
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            (&built.0[..], &built.1[..]),
            (&expected.0[..], &expected.1[..]),
            "the dirty blocks miss a change"
        );
        built
    }

    /// Sends the periodic heartbeat when it is due.
    pub fn tick(&mut self, now: Micros) -> LmEffects {
        let mut effects = LmEffects::default();
        self.expire_holds(now);
        self.serve_held_preempts(now, &mut effects);
        if now >= self.next_heartbeat {
            self.promote_due(now, &mut effects);
            self.shed(now, &mut effects);
            effects.heartbeat = Some(self.snapshot(now));
            while self.next_heartbeat <= now {
                self.next_heartbeat += self.config.heartbeat_period.max(Micros(1));
            }
        }
        effects
    }

    /// A launch batch or preemption request for another LM is refused.
    fn check_addressed(&self, lm: LmId) -> Result<(), LmError> {
        if lm == self.topology.lm {
            Ok(())
        } else {
            Err(LmError::WrongLm {
                got: lm,
                want: self.topology.lm,
            })
        }
    }

    /// A launch batch or preemption of an older life of its GM than one seen is
    /// refused (see [`BatchAnswers::admit`]).
    fn check_life(&mut self, gm: GmId, life: u64) -> Result<(), LmError> {
        self.answers
            .admit(gm, life)
            .map_err(|older| LmError::OlderGmLife {
                gm,
                life,
                newest: older.newest,
            })
    }

    /// Lost runs (and absorbed ends of lost runs) forgotten because their memory
    /// was full ([`LOST_MEMORY`]).
    pub fn lost_runs_forgotten(&self) -> u64 {
        self.lost.forgotten() + self.lost_ended.forgotten()
    }

    /// Void preemption requests forgotten because their memory was full
    /// ([`crate::preempt_holds::VOID_MEMORY`]).
    pub fn void_preempts_forgotten(&self) -> u64 {
        self.preempt_holds.void_forgotten()
    }

    /// Launch batches and preemptions refused because their GM life was older than
    /// one seen (a replaced GM, fenced).
    pub fn older_gm_life_refused(&self) -> u64 {
        self.answers.refused_older_life()
    }

    /// Whether launch batch `seq` of `gm` is in this LM's record (it was applied,
    /// so a copy sent again is answered from the record).
    pub fn has_batch(&self, gm: GmId, seq: u64) -> bool {
        self.answers.cached(gm, seq).is_some()
    }

    /// The version of the LM's state ([`LmSnapshot::version`]): it goes up with
    /// every change a snapshot shows.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// True when no node has anything allocated (every resource returned).
    pub fn is_idle(&self) -> bool {
        self.running.is_empty()
            && self.pending_kills.is_empty()
            && self.queued.is_empty()
            && self.free == self.topology.capacity
    }
}

/// The `free_changed` of a snapshot whose `free` is `free`, at `version`: per
/// block of [`FREE_BLOCK`] nodes, then per sub-block of [`FREE_SUB_BLOCK`], the
/// previous snapshot's, with `version` where it differs from it (everywhere when
/// there is none, or of another size).
fn free_changed(
    previous: Option<(&[Resources], &[u64])>,
    free: &[Resources],
    version: u64,
) -> Vec<u64> {
    let blocks = free.len().div_ceil(FREE_BLOCK);
    let len = free_changed_len(free.len());
    match previous {
        Some((old, changed)) if old.len() == free.len() && changed.len() == len => {
            let (block_changed, sub_changed) = changed.split_at(blocks);
            let mark = |size: usize, changed: &[u64]| -> Vec<u64> {
                old.chunks(size)
                    .zip(free.chunks(size))
                    .zip(changed)
                    .map(|((a, b), v)| if a == b { *v } else { version })
                    .collect()
            };
            let mut all = mark(FREE_BLOCK, block_changed);
            all.extend(mark(FREE_SUB_BLOCK, sub_changed));
            all
        }
        _ => vec![version; len],
    }
}

#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod tests;
