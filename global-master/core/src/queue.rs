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
use common::{ConstraintSet, JobId, LmId, Micros, QueueId, Resources, TaskId, TaskSpec};
use keyed::Keyed;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

mod keyed;

/// A task's shape: its constraints and its request.
pub type Shape = (ConstraintSet, Resources);

/// A task waiting in a GM.
#[derive(Debug, Clone)]
pub struct Pending {
    pub task: TaskSpec,
    /// When the GM accepted it.
    pub submitted_at: Micros,
    /// Placement attempts so far.
    pub attempts: u32,
    /// Why the last attempt failed.
    pub reason: Option<PendingReason>,
    /// The preemption request in flight for this task, if any.
    pub preempting: Option<(LmId, QueueId)>,
    /// When the task first found no room while a victim existed (the preemption
    /// grace runs from there; see [`common::preemption::PreemptionRules::grace`]).
    pub contended_since: Option<Micros>,
}

impl Pending {
    pub fn shape(&self) -> Shape {
        (self.task.constraints, self.task.resources)
    }
}

/// A task taken from its queue for a try, with its place in the line (given back
/// with it if it must wait: [`Queues::push_blocked`]).
#[derive(Debug)]
pub struct Queued {
    pub key: u64,
    pub pending: Box<Pending>,
    /// It waited in a class (it failed against an earlier view), as opposed to a
    /// new or refused task.
    pub was_blocked: bool,
}

/// Whether a sleeping class could find room now (asked during a selective pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Fits,
    No,
    /// No class can find room any more in this pass: stop asking.
    Never,
}

/// The blocked tasks of one shape in one queue.
#[derive(Debug, Default)]
struct Class {
    /// By key.
    line: VecDeque<(u64, Box<Pending>)>,
    /// Tried and failed while awake, by key; every key below those left in `line`.
    parked: VecDeque<(u64, Box<Pending>)>,
    awake: bool,
}

impl Class {
    fn len(&self) -> usize {
        self.line.len() + self.parked.len()
    }

    /// Back to sleep: the parked tasks go back in front of the line.
    fn sleep(&mut self) {
        self.awake = false;
        // Costs the parked tasks, not the line.
        while let Some(task) = self.parked.pop_back() {
            self.line.push_front(task);
        }
    }

    /// A blocked task, at its place by key.
    fn insert(&mut self, key: u64, pending: Box<Pending>) {
        match (self.line.front(), self.line.back()) {
            (None, _) => self.line.push_back((key, pending)),
            (_, Some((last, _))) if *last < key => self.line.push_back((key, pending)),
            (Some((first, _)), _) if key < *first => self.line.push_front((key, pending)),
            _ => {
                let at = self.line.partition_point(|(k, _)| *k < key);
                self.line.insert(at, (key, pending));
            }
        }
    }
}

#[derive(Debug, Default)]
struct UserQueue {
    /// Not yet tried against the current view, by key.
    ready: VecDeque<(u64, Box<Pending>)>,
    classes: FxHashMap<Shape, Class>,
    /// The awake classes with a task in their line, by the key of that first task.
    heads: Keyed<Shape>,
    /// The sleeping classes with a task in their line, by the key of that task.
    sleeping: Keyed<Shape>,
    /// In a selective pass: sleeping classes with a first key below this were asked.
    cursor: u64,
    /// Tasks in the classes (lines and parked).
    blocked: usize,
}

impl UserQueue {
    /// In a selective pass, before taking a task: asks the sleeping classes whose
    /// first task comes before the next candidate, in key order, and wakes those
    /// `probe` says fit. Returns the tasks woken (their shapes in `woke`).
    fn walk(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe, woke: &mut Vec<Shape>) -> usize {
        let mut count = 0;
        loop {
            let bound = match (self.ready.front(), self.heads.first()) {
                (Some((r, _)), Some((h, _))) => Some((*r).min(h)),
                (Some((r, _)), None) => Some(*r),
                (None, Some((h, _))) => Some(h),
                (None, None) => None,
            };
            let Some((key, shape)) = self.sleeping.first_from(self.cursor) else {
                return count;
            };
            if bound.is_some_and(|b| key > b) {
                return count;
            }
            match probe(&shape) {
                Probe::Never => {
                    self.cursor = u64::MAX;
                    return count;
                }
                Probe::No => self.cursor = key + 1,
                Probe::Fits => {
                    self.cursor = key + 1;
                    count += self.wake(shape);
                    woke.push(shape);
                }
            }
        }
    }

    /// The task with the smallest key among the ready ones and the awake classes.
    fn pop_next(&mut self) -> Option<(Queued, bool)> {
        let ready_key = self.ready.front().map(|(k, _)| *k);
        let class_head = self.heads.first();
        match (ready_key, class_head) {
            (Some(r), Some((c, _))) if r < c => self.pop_ready(),
            (_, Some((key, shape))) => {
                self.heads.remove(&key);
                let class = self.classes.get_mut(&shape)?;
                let (key, pending) = class.line.pop_front()?;
                if let Some((next, _)) = class.line.front() {
                    self.heads.insert(*next, shape);
                }
                // An emptied class stays until it sleeps: its failures park there.
                self.blocked -= 1;
                let queued = Queued {
                    key,
                    pending,
                    was_blocked: true,
                };
                Some((queued, true))
            }
            (Some(_), None) => self.pop_ready(),
            (None, None) => None,
        }
    }

    fn pop_ready(&mut self) -> Option<(Queued, bool)> {
        let (key, pending) = self.ready.pop_front()?;
        let queued = Queued {
            key,
            pending,
            was_blocked: false,
        };
        Some((queued, false))
    }

    /// Wakes one class; returns how many tasks became ready.
    fn wake(&mut self, shape: Shape) -> usize {
        let Some(class) = self.classes.get_mut(&shape) else {
            return 0;
        };
        if class.awake {
            return 0;
        }
        class.awake = true;
        if let Some((key, _)) = class.line.front() {
            self.sleeping.remove(key);
            self.heads.insert(*key, shape);
        }
        class.line.len()
    }

    /// Puts one class back to sleep; returns how many of its tasks were still ready.
    /// Forgets the class if it holds no task.
    fn sleep(&mut self, shape: Shape) -> usize {
        let Some(class) = self.classes.get_mut(&shape) else {
            return 0;
        };
        if !class.awake {
            return 0;
        }
        let left = class.line.len();
        if let Some((key, _)) = class.line.front() {
            self.heads.remove(key);
        }
        class.sleep();
        match class.line.front() {
            Some((key, _)) => {
                self.sleeping.insert(*key, shape);
            }
            None => {
                self.classes.remove(&shape);
            }
        }
        left
    }
}

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
}

impl Queues {
    fn queue_index(&mut self, id: QueueId) -> usize {
        match self.index.get(&id) {
            Some(&i) => i,
            None => {
                self.queues.push(UserQueue::default());
                self.ids.push(id);
                self.index.insert(id, self.queues.len() - 1);
                self.queues.len() - 1
            }
        }
    }

    pub fn set_aging(&mut self, aging: u64) {
        self.aging = aging;
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
            let old_head = class.line.front().map(|(k, _)| *k);
            class.insert(key, pending);
            if old_head.is_none_or(|h| key < h) {
                if let Some(h) = old_head {
                    q.sleeping.remove(&h);
                }
                q.sleeping.insert(key, shape);
            }
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
        let shapes: Vec<Shape> = self.shapes.keys().copied().collect();
        for shape in shapes {
            self.wake(shape);
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
        for (i, shape) in std::mem::take(&mut self.awake) {
            self.ready -= self.queues[i].sleep(shape);
            if !self.queues[i].classes.contains_key(&shape) {
                self.forget_holders(shape, &[i]);
            }
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
            if let Some((queued, from_class)) = self.queues[i].pop_next() {
                self.next = (i + 1) % n;
                self.ready -= 1;
                if from_class {
                    self.blocked -= 1;
                }
                return Some(queued);
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
            let shapes: Vec<Shape> = q
                .classes
                .iter()
                .filter(|(_, c)| c.line.iter().chain(c.parked.iter()).any(of_job))
                .map(|(s, _)| *s)
                .collect();
            for shape in shapes {
                let Some(class) = q.classes.get_mut(&shape) else {
                    continue;
                };
                let old_head = class.line.front().map(|(k, _)| *k);
                let in_line = class.line.iter().filter(|p| of_job(p)).count();
                let mut gone = Vec::new();
                for list in [&mut class.line, &mut class.parked] {
                    let (out, kept): (VecDeque<_>, VecDeque<_>) =
                        std::mem::take(list).into_iter().partition(of_job);
                    *list = kept;
                    gone.extend(out);
                }
                q.blocked -= gone.len();
                self.blocked -= gone.len();
                if class.awake {
                    self.ready -= in_line;
                }
                removed.extend(gone.into_iter().map(|(_, p)| p));
                let new_head = class.line.front().map(|(k, _)| *k);
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
                .flat_map(|c| c.parked.iter().chain(c.line.iter()))
                .chain(q.ready.iter())
                .map(|(_, p)| &**p)
        })
    }
}

#[cfg(test)]
mod tests;
