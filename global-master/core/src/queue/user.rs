//! One user queue: its ready tasks and its classes of blocked tasks (see
//! [`crate::queue`]).

use common::TaskId;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

use crate::queue::class::Class;
use crate::queue::keyed::Keyed;
use crate::queue::pending::{Doomed, Next, Pending, Probe, Queued, Shape};

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

    /// The task with the smallest key among the ready ones and the awake classes;
    /// if it is in a class `doomed` names, the run of that class's tasks before any
    /// other task of the queue instead (each misses once more, counted in bulk).
    pub fn pop_next(
        &mut self,
        doomed: &Doomed<'_>,
        settled: &mut Vec<(TaskId, u32)>,
    ) -> Option<Next> {
        let ready_key = self.ready.front().map(|(k, _)| *k);
        // Runs of doomed classes, one after the other, up to the next task that
        // is not doomed.
        let mut missed = 0;
        while let Some((key, shape)) = self.heads.first() {
            if ready_key.is_some_and(|r| r < key) {
                break;
            }
            let class = self.classes.get_mut(&shape)?;
            if !doomed(&shape, &mut class.reason) {
                break;
            }
            self.heads.remove(&key);
            let bound = match (ready_key, self.heads.first()) {
                (Some(r), Some((h, _))) => Some(r.min(h)),
                (r, h) => r.or(h.map(|(h, _)| h)),
            };
            missed += class.miss_until(bound);
            if let Some(next) = class.head() {
                self.heads.insert(next, shape);
            }
        }
        if missed > 0 {
            return Some(Next::Missed(missed));
        }
        let class_head = self.heads.first();
        match (ready_key, class_head) {
            (Some(r), Some((c, _))) if r < c => self.pop_ready(),
            (_, Some((key, shape))) => {
                self.heads.remove(&key);
                let class = self.classes.get_mut(&shape)?;
                let (key, pending) = class.pop_head(settled)?;
                if let Some(next) = class.head() {
                    self.heads.insert(next, shape);
                }
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
}
