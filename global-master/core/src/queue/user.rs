//! One user queue: its ready tasks and its classes of blocked tasks (see
//! [`crate::queue`]).

use common::TaskId;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

use crate::queue::class::Class;
use crate::queue::keyed::Keyed;
use crate::queue::pending::{Next, Pending, Probe, Queued, Shape};
use crate::queue::ranks::KeyRanks;
use common::reasons::PendingReason;

#[derive(Debug, Default)]
pub(crate) struct UserQueue {
    /// Not yet tried against the current view, by key.
    pub ready: VecDeque<(u64, Box<Pending>)>,
    pub classes: FxHashMap<Shape, Class>,
    /// The awake classes with a task in their line, by the key of that first task.
    pub heads: Keyed<Shape>,
    /// The sleeping classes with a task in their line, by the key of that task.
    pub sleeping: Keyed<Shape>,
    /// In a selective pass: sleeping classes with a first key below this were asked.
    pub cursor: u64,
    /// Tasks in the classes (lines and parked).
    pub blocked: usize,
    /// With bulk misses: the keys of every task in the classes' lines.
    pub ranks: Option<KeyRanks>,
    /// In this pass: the key of the last task taken out ...
    pub position: u64,
    /// ... the keys in `ranks` below it that are no known miss to count (tasks
    /// blocked in this pass) or were counted already ...
    pub counted: usize,
    /// ... and a class was doomed: the keys in `ranks` the pass passes are misses.
    pub counting: bool,
}

impl UserQueue {
    /// In a selective pass, before taking a task: asks the sleeping classes whose
    /// first task comes before the next candidate, in key order, and wakes those
    /// `probe` says fit. Returns the tasks woken (their shapes in `woke`).
    pub fn walk(&mut self, probe: &mut dyn FnMut(&Shape) -> Probe, woke: &mut Vec<Shape>) -> usize {
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

    /// The task with the smallest key among the ready ones and the awake classes
    /// not doomed; before it, once a class was doomed in this pass, the tasks of
    /// doomed classes in line before it (each misses once more, counted in bulk):
    /// every key in a line below the next task's is a doomed class's, since a
    /// class not doomed would give its head first.
    pub fn pop_next(&mut self, settled: &mut Vec<(TaskId, u32)>) -> Option<Next> {
        let ready_key = self.ready.front().map(|(k, _)| *k);
        let class_head = self.heads.first();
        if self.counting {
            if let Some(ranks) = &self.ranks {
                let next = match (ready_key, class_head) {
                    (Some(r), Some((c, _))) => Some(r.min(c)),
                    (r, c) => r.or(c.map(|(c, _)| c)),
                };
                let below = next.map_or(ranks.len(), |k| ranks.count_below(k));
                if below > self.counted {
                    let missed = below - self.counted;
                    self.counted = below;
                    return Some(Next::Missed(missed));
                }
            }
        }
        match (ready_key, class_head) {
            (Some(r), Some((c, _))) if r < c => self.pop_ready(),
            (_, Some((key, shape))) => {
                self.heads.remove(&key);
                let class = self.classes.get_mut(&shape)?;
                let (key, pending) = class.pop_head(settled)?;
                if let Some(next) = class.head() {
                    self.heads.insert(next, shape);
                }
                if let Some(ranks) = &mut self.ranks {
                    ranks.remove(key);
                }
                self.position = key;
                // An emptied class stays until it sleeps: its failures park there.
                self.blocked -= 1;
                let queued = Queued {
                    key,
                    pending,
                    was_blocked: true,
                };
                Some(Next::Task(queued, true))
            }
            (Some(_), None) => self.pop_ready(),
            (None, None) => None,
        }
    }

    pub fn pop_ready(&mut self) -> Option<Next> {
        let (key, pending) = self.ready.pop_front()?;
        self.position = key;
        let queued = Queued {
            key,
            pending,
            was_blocked: false,
        };
        Some(Next::Task(queued, false))
    }

    /// Wakes one class; returns how many tasks became ready.
    pub fn wake(&mut self, shape: Shape) -> usize {
        let Some(class) = self.classes.get_mut(&shape) else {
            return 0;
        };
        if class.awake {
            return 0;
        }
        class.awake = true;
        if let Some(key) = class.head() {
            self.sleeping.remove(&key);
            self.heads.insert(key, shape);
        }
        class.untried()
    }

    /// Wakes every class (the full retry); returns how many tasks became ready, the
    /// shapes woken in `woke`. With no class awake yet, the sleeping classes' index
    /// becomes the awake one at once.
    pub fn wake_every_class(&mut self, woke: &mut Vec<Shape>) -> usize {
        let whole = self.heads.is_empty();
        if whole {
            std::mem::swap(&mut self.heads, &mut self.sleeping);
        }
        let mut count = 0;
        let mut one_by_one = Vec::new();
        for (shape, class) in self.classes.iter_mut().filter(|(_, c)| !c.awake) {
            woke.push(*shape);
            match whole {
                true => {
                    class.awake = true;
                    count += class.untried();
                }
                false => one_by_one.push(*shape),
            }
        }
        for shape in one_by_one {
            count += self.wake(shape);
        }
        count
    }

    /// Puts every awake class back to sleep (the end of a full retry's pass) and
    /// builds the sleeping classes' index anew, sorted once; returns how many of
    /// their tasks were still ready, the shapes of the classes forgotten (no task
    /// left) in `emptied`.
    pub fn sleep_every_class(&mut self, emptied: &mut Vec<Shape>) -> usize {
        let mut left = 0;
        let mut heads = Vec::with_capacity(self.classes.len());
        let ranks = &mut self.ranks;
        self.classes.retain(|shape, class| {
            if class.awake {
                left += class.untried();
                if let Some(ranks) = ranks.as_mut() {
                    class.parked.iter().for_each(|(key, _)| ranks.insert(*key));
                }
                class.sleep();
            }
            match class.head() {
                Some(key) => heads.push((key, *shape)),
                None => emptied.push(*shape),
            }
            class.head().is_some()
        });
        self.heads.clear();
        self.sleeping = Keyed::from_unsorted(heads);
        left
    }

    /// Puts one class back to sleep; returns how many of its tasks were still ready.
    /// Forgets the class if it holds no task.
    pub fn sleep(&mut self, shape: Shape) -> usize {
        let Some(class) = self.classes.get_mut(&shape) else {
            return 0;
        };
        if !class.awake {
            return 0;
        }
        let left = class.untried();
        if let Some(key) = class.head() {
            self.heads.remove(&key);
        }
        if let Some(ranks) = &mut self.ranks {
            class.parked.iter().for_each(|(key, _)| ranks.insert(*key));
        }
        class.sleep();
        match class.head() {
            Some(key) => {
                self.sleeping.insert(key, shape);
            }
            None => {
                self.classes.remove(&shape);
            }
        }
        left
    }

    /// A blocked task into a sleeping class's line (a class awake in this pass
    /// parks it instead: [`crate::queue::Queues::push_blocked`]).
    pub fn insert_blocked(&mut self, shape: Shape, key: u64, pending: Box<Pending>) {
        let Some(class) = self.classes.get_mut(&shape) else {
            return;
        };
        let old_head = class.head();
        class.insert(key, pending);
        if old_head.is_none_or(|h| key < h) {
            if let Some(h) = old_head {
                self.sleeping.remove(&h);
            }
            self.sleeping.insert(key, shape);
        }
        if let Some(ranks) = &mut self.ranks {
            ranks.insert(key);
            // Tried in this pass: no known miss to count.
            if key <= self.position {
                self.counted += 1;
            }
        }
    }

    /// Its shape failed in this pass (bulk misses): the class leaves the pass and
    /// the tasks in its line miss as the pass passes them ([`UserQueue::pop_next`]).
    pub fn doom(&mut self, shape: &Shape, reason: &PendingReason) {
        if self.ranks.is_none() {
            return;
        }
        let Some(class) = self.classes.get_mut(shape) else {
            return;
        };
        let head = class.head();
        if class.doom(reason) {
            if let Some(h) = head {
                self.heads.remove(&h);
            }
            self.counting = true;
        }
    }

    /// The end of a pass.
    pub fn end_pass(&mut self) {
        self.position = 0;
        self.counted = 0;
        self.counting = false;
    }
}
