//! What an LM holds for gangs (see `common::gang`): per gang (GM, job), the one
//! generation whose part it holds, until its commit, release or expiry; and per gang
//! the newest generation seen and whether one was committed, so that a late reserve
//! or commit of an abandoned generation is refused. A leaf: the LM's core takes and
//! gives back the held room (`core/gang.rs`).

use common::messages::LaunchRequest;
use common::{GmId, JobId, Micros};
use std::collections::{BTreeMap, VecDeque};

/// Gangs whose newest generation an LM remembers (the oldest are forgotten first):
/// far more than run at once. A reserve of a gang forgotten so is taken as new.
pub const GANG_MEMORY: usize = 1 << 16;

/// One part held for a gang.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    pub generation: u32,
    pub requests: Vec<LaunchRequest>,
    /// The LM's time at which the hold lapses (arrival + the reserve's `hold_for`).
    pub expires: Micros,
}

/// What the LM remembers of a gang it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The newest generation a request of it named.
    pub newest: u32,
    /// The generation this LM launched, if any.
    pub committed: Option<u32>,
    /// The GM life that committed it.
    pub committed_life: Option<u64>,
}

/// Counters of the gang transaction at one LM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangCounters {
    pub held: u64,
    pub refused: u64,
    /// Reserves or commits of a generation older than one seen: ignored.
    pub stale: u64,
    pub committed: u64,
    /// Commits of a generation not held (expired or released first).
    pub not_held: u64,
    pub released: u64,
    pub expired: u64,
    /// Members stopped because their gang was restarted whole.
    pub stopped: u64,
}

#[derive(Debug, Default)]
pub struct GangHolds {
    holds: BTreeMap<(GmId, JobId), Hold>,
    seen: BTreeMap<(GmId, JobId), Seen>,
    /// `seen`'s keys in the order they came, to forget the oldest.
    order: VecDeque<(GmId, JobId)>,
    /// Members of gangs restarted whole: their runs before this one are void (a
    /// finish a worker lists is not remembered). At most [`GANG_MEMORY`], the
    /// oldest forgotten first.
    void: BTreeMap<common::TaskId, u32>,
    void_order: VecDeque<common::TaskId>,
    pub counters: GangCounters,
}

impl GangHolds {
    /// What this LM remembers of gang (`gm`, `job`).
    pub fn seen(&self, gm: GmId, job: JobId) -> Seen {
        self.seen.get(&(gm, job)).copied().unwrap_or_default()
    }

    /// Records that a request of `generation` of the gang arrived.
    pub fn saw(&mut self, gm: GmId, job: JobId, generation: u32) {
        let key = (gm, job);
        match self.seen.get_mut(&key) {
            Some(s) => s.newest = s.newest.max(generation),
            None => {
                self.seen.insert(
                    key,
                    Seen {
                        newest: generation,
                        ..Seen::default()
                    },
                );
                self.order.push_back(key);
                while self.order.len() > GANG_MEMORY {
                    if let Some(old) = self.order.pop_front() {
                        if !self.holds.contains_key(&old) {
                            self.seen.remove(&old);
                        } else {
                            self.order.push_back(old);
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Runs of `task` before `next` are void (its gang was restarted whole).
    pub fn void_before(&mut self, task: common::TaskId, next: u32) {
        if self.void.insert(task, next).is_none() {
            self.void_order.push_back(task);
            while self.void_order.len() > GANG_MEMORY {
                if let Some(old) = self.void_order.pop_front() {
                    self.void.remove(&old);
                }
            }
        }
    }

    /// Whether run `attempt` of `task` is void (see [`GangHolds::void_before`]).
    pub fn is_void(&self, task: common::TaskId, attempt: u32) -> bool {
        self.void.get(&task).is_some_and(|next| attempt < *next)
    }

    /// Records the generation launched here, with the GM life that committed it
    /// (`None`: the gang was stopped to be restarted whole, so a newer generation
    /// may be reserved).
    pub fn mark_committed(&mut self, gm: GmId, job: JobId, generation: Option<(u32, u64)>) {
        if let Some(s) = self.seen.get_mut(&(gm, job)) {
            s.committed = generation.map(|g| g.0);
            s.committed_life = generation.map(|g| g.1);
        }
    }

    pub fn get(&self, gm: GmId, job: JobId) -> Option<&Hold> {
        self.holds.get(&(gm, job))
    }

    pub fn insert(&mut self, gm: GmId, job: JobId, hold: Hold) {
        self.holds.insert((gm, job), hold);
    }

    pub fn take(&mut self, gm: GmId, job: JobId) -> Option<Hold> {
        self.holds.remove(&(gm, job))
    }

    /// Takes out every hold expired at `now`.
    pub fn take_expired(&mut self, now: Micros) -> Vec<((GmId, JobId), Hold)> {
        let keys: Vec<_> = (self.holds.iter())
            .filter(|(_, h)| h.expires <= now)
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| self.holds.remove(&k).map(|h| (k, h)))
            .collect()
    }

    /// When the first hold lapses.
    pub fn next_expiry(&self) -> Option<Micros> {
        self.holds.values().map(|h| h.expires).min()
    }

    /// Whether a task is in a held part (a reserve naming it again is a duplicate).
    pub fn holds_task(&self, task: common::TaskId) -> bool {
        (self.holds.values()).any(|h| h.requests.iter().any(|r| r.task.id == task))
    }

    /// What the held parts take on node `n`.
    pub fn held_on(&self, n: common::NodeId) -> common::Resources {
        (self.holds.values())
            .flat_map(|h| h.requests.iter())
            .filter(|r| r.node == n)
            .map(|r| r.task.resources)
            .sum()
    }

    pub fn len(&self) -> usize {
        self.holds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.holds.is_empty()
    }
}
