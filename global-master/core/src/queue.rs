//! User queues of a GM, served round-robin one task at a time.
//!
//! Every task in a queue has a place in its queue's line, a key given when it enters
//! the queue (new, or back after an LM's refusal): smaller keys go first. A task
//! tried against the current view and failed is *blocked*: it keeps its key and waits
//! in its *class* (its shape: constraints and request) until the view gains
//! resources. A pass serves each queue in key order from two sources: the ready
//! tasks (not yet tried against the current view) and the classes that are *awake*;
//! sleeping classes are not walked at all. That is the paper's "requeue at the back"
//! order: a retried task keeps its place relative to the other blocked tasks, and
//! blocked tasks come before the ready ones (they were queued before those arrived).
//!
//! Which classes wake when the view gains resources is the backlog's choice
//! ([`crate::backlog`]): all of them at the start of the pass (the full retry of the
//! paper's simulator), or, in a selective pass, each sleeping class when the line
//! reaches its first task and a [`Probe`] says it may fit.

use common::reasons::PendingReason;
use common::{JobId, QueueId, TaskId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

mod class;
mod keyed;
mod pending;
mod ranks;
mod user;

use pending::Next;
pub use pending::{Pending, Popped, Probe, Queued, Shape};
use user::UserQueue;

/// The user queues, with the blocked tasks of each indexed by shape.
#[derive(Debug, Default)]
pub struct Queues {
    queues: Vec<UserQueue>,
    ids: Vec<QueueId>,
    index: FxHashMap<QueueId, usize>,
    next: usize,
    /// The next key.
    seq: u64,
    /// Submissions one point of priority class is worth (see
    /// [`common::priority::queue_key`]; 0: strict priority).
    aging: u64,
    /// Tasks a pass would try now: ready ones and those in awake classes' lines.
    ready: usize,
    /// Tasks in the classes.
    blocked: usize,
    /// Every shape with blocked tasks, and the queues holding them.
    shapes: FxHashMap<Shape, Vec<usize>>,
    /// Classes woken since the last [`Queues::sleep_all`] (queue, shape).
    awake: Vec<(usize, Shape)>,
    /// A selective pass: sleeping classes are asked in key order as the pass goes
    /// ([`Queues::pop_ready_with`]).
    walking: bool,
    /// Tasks in the classes woken so far.
    woken: u64,
    /// Tasks whose bulk misses were paid since [`Queues::take_settled`], and how
    /// many each.
    settled: Vec<(TaskId, u32)>,
    /// Known misses are counted in bulk ([`Queues::doom`]).
    bulk: bool,
}

impl Queues {
    fn queue_index(&mut self, id: QueueId) -> usize {
        match self.index.get(&id) {
            Some(&i) => i,
            None => {
                self.queues.push(UserQueue {
                    ranks: self.bulk.then(ranks::KeyRanks::default),
                    ..UserQueue::default()
                });
                self.ids.push(id);
                self.index.insert(id, self.queues.len() - 1);
                self.queues.len() - 1
            }
        }
    }

    pub fn set_aging(&mut self, aging: u64) {
        self.aging = aging;
    }

    /// Counts known misses in bulk ([`Queues::doom`]); set before the first task.
    pub fn set_bulk(&mut self, on: bool) {
        self.bulk = on;
    }

    /// A new or retried task, at the back of its queue's tasks of its priority
    /// class (aged: see [`common::priority::queue_key`]; with one class, the back).
    pub fn push_ready(&mut self, pending: Box<Pending>) {
        let key = common::priority::queue_key(self.seq, pending.task.priority, self.aging);
        self.seq += 1;
        self.ready += 1;
        let i = self.queue_index(pending.task.queue);
        let ready = &mut self.queues[i].ready;
        if ready.back().is_none_or(|(k, _)| *k < key) {
            ready.push_back((key, pending));
        } else {
            let at = ready.partition_point(|(k, _)| *k < key);
            ready.insert(at, (key, pending));
        }
    }

    /// A task that failed against the current view: it waits in its class, at its
    /// place in the line. A class awake in this pass keeps it aside (parked) so that
    /// the pass does not try it twice.
    pub fn push_blocked(&mut self, queued: Queued) {
        let Queued { key, pending, .. } = queued;
        let shape = pending.shape();
        let i = self.queue_index(pending.task.queue);
        let q = &mut self.queues[i];
        let class = q.classes.entry(shape).or_default();
        if class.len() == 0 {
            self.shapes.entry(shape).or_default().push(i);
        }
        if class.awake {
            class.parked.push_back((key, pending));
        } else {
            q.insert_blocked(shape, key, pending);
        }
        q.blocked += 1;
        self.blocked += 1;
    }

    /// Queues holding blocked tasks.
    pub fn blocked_queues(&self) -> Vec<QueueId> {
        self.ids
            .iter()
            .zip(&self.queues)
            .filter(|(_, q)| q.blocked > 0)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Every shape with blocked tasks (each once).
    pub fn blocked_shapes(&self) -> impl Iterator<Item = &Shape> + '_ {
        self.shapes.keys()
    }

    /// Wakes the class of `shape` in every queue: its tasks are ready for this pass.
    pub fn wake(&mut self, shape: Shape) {
        let Queues {
            shapes,
            queues,
            awake,
            ready,
            woken,
            ..
        } = self;
        let Some(holders) = shapes.get(&shape) else {
            return;
        };
        for &i in holders {
            let count = queues[i].wake(shape);
            *ready += count;
            *woken += count as u64;
            if queues[i].classes.get(&shape).is_some_and(|c| c.awake) {
                awake.push((i, shape));
            }
        }
    }

    /// Wakes every class of one queue.
    pub fn wake_queue(&mut self, queue: QueueId) {
        let Some(&i) = self.index.get(&queue) else {
            return;
        };
        let shapes: Vec<Shape> = self.queues[i].classes.keys().copied().collect();
        for shape in shapes {
            let woke = self.queues[i].wake(shape);
            self.ready += woke;
            self.woken += woke as u64;
            self.awake.push((i, shape));
        }
    }

    /// Wakes every class of every queue (the full retry).
    pub fn wake_all(&mut self) {
        let mut woke = Vec::new();
        for (i, q) in self.queues.iter_mut().enumerate() {
            let count = q.wake_every_class(&mut woke);
            self.ready += count;
            self.woken += count as u64;
            self.awake.extend(woke.drain(..).map(|shape| (i, shape)));
        }
    }

    /// Puts the class of `shape` back to sleep in every queue but `keep_awake` ones.
    pub fn sleep(&mut self, shape: Shape, keep_awake: &dyn Fn(QueueId) -> bool) {
        let Queues {
            shapes,
            queues,
            ids,
            ready,
            ..
        } = self;
        let Some(holders) = shapes.get_mut(&shape) else {
            return;
        };
        holders.retain(|&i| {
            if !keep_awake(ids[i]) {
                *ready -= queues[i].sleep(shape);
            }
            queues[i].classes.contains_key(&shape)
        });
        if holders.is_empty() {
            shapes.remove(&shape);
        }
    }

    /// The end of a pass: every class sleeps until the view gains resources.
    pub fn sleep_all(&mut self) {
        self.walking = false;
        let awake = std::mem::take(&mut self.awake);
        // A queue whose classes are mostly awake (a full retry) sleeps them all at
        // once; the others class by class.
        let mut at_once = vec![0usize; self.queues.len()];
        awake.iter().for_each(|(i, _)| at_once[*i] += 1);
        let at_once: Vec<bool> = (at_once.iter().zip(&self.queues))
            .map(|(n, q)| *n > 0 && 2 * n >= q.classes.len())
            .collect();
        let mut emptied = Vec::new();
        for i in (0..self.queues.len()).filter(|i| at_once[*i]) {
            self.ready -= self.queues[i].sleep_every_class(&mut emptied);
            for shape in emptied.drain(..) {
                self.forget_holders(shape, &[i]);
            }
        }
        for (i, shape) in awake.into_iter().filter(|(i, _)| !at_once[*i]) {
            self.ready -= self.queues[i].sleep(shape);
            if !self.queues[i].classes.contains_key(&shape) {
                self.forget_holders(shape, &[i]);
            }
        }
        self.queues.iter_mut().for_each(UserQueue::end_pass);
    }

    /// The shape found no node in this pass, for `reason`: with bulk misses and a
    /// single queue, its class (if awake) leaves the pass, and each task of it the
    /// pass would have tried misses in bulk as the pass reaches it
    /// ([`Popped::Missed`], the line order kept). Across queues each turn takes
    /// one task, so a run would change the order: nothing changes there.
    pub fn doom(&mut self, shape: &Shape, reason: &PendingReason) {
        if let [queue] = &mut self.queues[..] {
            queue.doom(shape, reason);
        }
    }

    fn forget_holders(&mut self, shape: Shape, emptied: &[usize]) {
        if emptied.is_empty() {
            return;
        }
        if let Some(holders) = self.shapes.get_mut(&shape) {
            holders.retain(|i| !emptied.contains(i));
            if holders.is_empty() {
                self.shapes.remove(&shape);
            }
        }
    }

    /// The next ready task, taking queues in turn.
    pub fn pop_ready(&mut self) -> Option<Queued> {
        self.pop_ready_with(&mut |_| Probe::Never)
    }

    /// The next ready task, taking queues in turn; in a selective pass
    /// ([`Queues::start_walk`]) the sleeping classes `probe` says fit wake first if
    /// their turn has come.
    pub fn pop_ready_with(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe) -> Option<Queued> {
        loop {
            match self.pop_ready_bulk(probe)? {
                Popped::Task(queued) => return Some(queued),
                Popped::Missed { .. } => {}
            }
        }
    }

    /// As [`Queues::pop_ready_with`]; once a class was doomed in this pass
    /// ([`Queues::doom`]), the tasks of doomed classes in line before the next
    /// task to try come first, counted in bulk ([`Popped::Missed`]): they stay in
    /// their line and owe the attempt, paid when they leave it
    /// ([`Queues::take_settled`]). Every other task comes out as before, in the
    /// same order.
    pub fn pop_ready_bulk(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe) -> Option<Popped> {
        if self.ready == 0 && !self.walking {
            return None;
        }
        let n = self.queues.len();
        let mut woke = Vec::new();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.walking {
                let count = self.queues[i].walk(probe, &mut woke);
                self.ready += count;
                self.woken += count as u64;
                self.awake.extend(woke.drain(..).map(|shape| (i, shape)));
            }
            match self.queues[i].pop_next(&mut self.settled) {
                Some(Next::Task(queued, from_class)) => {
                    self.next = (i + 1) % n;
                    self.ready -= 1;
                    if from_class {
                        self.blocked -= 1;
                    }
                    return Some(Popped::Task(queued));
                }
                Some(Next::Missed(count)) => {
                    self.next = (i + 1) % n;
                    self.ready -= count;
                    return Some(Popped::Missed { count });
                }
                None => {}
            }
        }
        None
    }

    /// The start of a selective pass: sleeping classes are asked as their turn comes.
    pub fn start_walk(&mut self) {
        self.walking = true;
        for q in &mut self.queues {
            q.cursor = 0;
        }
    }

    /// Tasks in the classes woken so far.
    pub fn woken(&self) -> u64 {
        self.woken
    }

    /// The tasks whose bulk misses were paid into them since the last call (they
    /// left their line), and how many each.
    pub fn take_settled(&mut self) -> Vec<(TaskId, u32)> {
        std::mem::take(&mut self.settled)
    }

    /// Pays every bulk miss still owed (the end of a run), as [`Queues::take_settled`].
    pub fn settle_all(&mut self) -> Vec<(TaskId, u32)> {
        for q in &mut self.queues {
            for class in q.classes.values_mut() {
                class.settle_all(&mut self.settled);
            }
        }
        self.take_settled()
    }

    /// Takes every waiting task of `job` out of the queues (a cancelled job). Costs
    /// every waiting task: cancelling is rare.
    pub fn remove_job(&mut self, job: JobId) -> Vec<Box<Pending>> {
        self.remove_if(&|t| t.job == job)
    }

    /// Takes every waiting task `gone` names out of the queues (see
    /// [`Queues::remove_job`]).
    pub fn remove_if(&mut self, gone: &dyn Fn(&TaskId) -> bool) -> Vec<Box<Pending>> {
        let of_job = |p: &(u64, Box<Pending>)| gone(&p.1.task.id);
        let mut removed = Vec::new();
        for (i, q) in self.queues.iter_mut().enumerate() {
            if q.ready.iter().any(of_job) {
                let (gone, kept): (VecDeque<_>, VecDeque<_>) =
                    std::mem::take(&mut q.ready).into_iter().partition(of_job);
                self.ready -= gone.len();
                q.ready = kept;
                removed.extend(gone.into_iter().map(|(_, p)| p));
            }
            let of_line = |w: &class::Waiting| gone(&w.pending.task.id);
            let shapes: Vec<Shape> = q
                .classes
                .iter()
                .filter(|(_, c)| c.line.iter().any(of_line) || c.parked.iter().any(of_job))
                .map(|(s, _)| *s)
                .collect();
            for shape in shapes {
                let Some(class) = q.classes.get_mut(&shape) else {
                    continue;
                };
                let old_head = class.head();
                let (gone_line, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut class.line)
                    .into_iter()
                    .partition(of_line);
                class.line = kept;
                if let Some(ranks) = &mut q.ranks {
                    for w in &gone_line {
                        ranks.remove(w.key);
                    }
                }
                let in_line = match class.awake && !class.doomed {
                    true => gone_line.len(),
                    false => 0,
                };
                let (out, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut class.parked)
                    .into_iter()
                    .partition(of_job);
                class.parked = kept;
                let count = gone_line.len() + out.len();
                q.blocked -= count;
                self.blocked -= count;
                self.ready -= in_line;
                for w in gone_line {
                    removed.push(class.settle(w, &mut self.settled).1);
                }
                removed.extend(out.into_iter().map(|(_, p)| p));
                let new_head = class.head();
                let map = if class.awake {
                    &mut q.heads
                } else {
                    &mut q.sleeping
                };
                if old_head != new_head {
                    if let Some(h) = old_head {
                        map.remove(&h);
                    }
                    if let Some(h) = new_head {
                        map.insert(h, shape);
                    }
                }
                if class.len() == 0 && !class.awake {
                    q.classes.remove(&shape);
                    if let Some(holders) = self.shapes.get_mut(&shape) {
                        holders.retain(|&h| h != i);
                        if holders.is_empty() {
                            self.shapes.remove(&shape);
                        }
                    }
                }
            }
        }
        removed
    }

    pub fn len(&self) -> usize {
        self.ready_only() + self.blocked
    }

    /// Tasks in the ready lines (not in a class).
    fn ready_only(&self) -> usize {
        self.queues.iter().map(|q| q.ready.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tasks a pass would try now.
    pub fn ready_len(&self) -> usize {
        self.ready
    }

    /// Tasks waiting for the view to gain resources.
    pub fn blocked_len(&self) -> usize {
        self.blocked
    }

    /// Queue lengths by queue id.
    pub fn lengths(&self) -> impl Iterator<Item = (QueueId, usize)> + '_ {
        self.ids
            .iter()
            .zip(&self.queues)
            .map(|(id, q)| (*id, q.ready.len() + q.blocked))
    }

    /// Every waiting task (blocked ones first within a queue).
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.queues.iter().flat_map(|q| {
            q.classes
                .values()
                .flat_map(|c| {
                    let parked = c.parked.iter().map(|(_, p)| &**p);
                    parked.chain(c.line.iter().map(|w| &*w.pending))
                })
                .chain(q.ready.iter().map(|(_, p)| &**p))
        })
    }
}

#[cfg(test)]
mod tests;
