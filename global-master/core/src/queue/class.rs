//! The blocked tasks of one shape in one queue (see [`crate::queue`]), and the
//! known misses counted in bulk.
//!
//! Under the full retry ([`crate::backlog::WakePolicy::All`]) every blocked task is
//! tried again after every gain, and once a shape found no node in a pass, each
//! later task of that shape in the same pass fails the same way (the view only
//! shrinks during a pass). A driver that asks for it ([`crate::GmConfig`]'s
//! `count_known_misses_in_bulk`) gets those failures counted per run of the class's
//! line instead of one task at a time: the tasks stay where they are, each owes one
//! more attempt (`owed`), and the debt is paid into the task (`attempts`, `reason`)
//! when it leaves the line, and reported so that the driver books it too.

use common::reasons::PendingReason;
use common::TaskId;
use std::collections::VecDeque;

use crate::queue::pending::Pending;

/// A blocked task in its class's line.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub key: u64,
    /// Known misses counted in bulk, not yet in `pending.attempts`.
    pub owed: u32,
    pub pending: Box<Pending>,
}

/// The blocked tasks of one shape in one queue.
#[derive(Debug, Default)]
pub(crate) struct Class {
    /// By key.
    pub line: VecDeque<Waiting>,
    /// Tried and failed while awake (one at a time), by key.
    pub parked: VecDeque<(u64, Box<Pending>)>,
    pub awake: bool,
    /// Tasks at the front of `line` that missed in bulk in this pass: the next task
    /// to try is `line[tried]`.
    pub tried: usize,
    /// Why the last bulk miss failed (the reason each owing task gets).
    pub reason: Option<PendingReason>,
}

impl Class {
    pub fn len(&self) -> usize {
        self.line.len() + self.parked.len()
    }

    /// The key of the next task to try.
    pub fn head(&self) -> Option<u64> {
        self.line.get(self.tried).map(|w| w.key)
    }

    /// Tasks of the line not tried yet in this pass.
    pub fn untried(&self) -> usize {
        self.line.len() - self.tried
    }

    /// Back to sleep: the parked tasks go back into the line, by key.
    pub fn sleep(&mut self) {
        self.awake = false;
        if std::mem::take(&mut self.tried) == 0 {
            // Every parked key is below the line's (taken from its front, or tried
            // before its head): costs the parked tasks, not the line.
            while let Some((key, pending)) = self.parked.pop_back() {
                self.line.push_front(Waiting {
                    key,
                    owed: 0,
                    pending,
                });
            }
            return;
        }
        while let Some((key, pending)) = self.parked.pop_back() {
            self.insert(key, pending);
        }
    }

    /// A blocked task, at its place by key.
    pub fn insert(&mut self, key: u64, pending: Box<Pending>) {
        let waiting = Waiting {
            key,
            owed: 0,
            pending,
        };
        match (self.line.front(), self.line.back()) {
            (None, _) => self.line.push_back(waiting),
            (_, Some(last)) if last.key < key => self.line.push_back(waiting),
            (Some(first), _) if key < first.key => self.line.push_front(waiting),
            _ => {
                let at = self.line.partition_point(|w| w.key < key);
                self.line.insert(at, waiting);
            }
        }
    }

    /// Takes the next task to try out of the line, its debt paid (and noted in
    /// `settled`).
    pub fn pop_head(&mut self, settled: &mut Vec<(TaskId, u32)>) -> Option<(u64, Box<Pending>)> {
        let waiting = match self.tried {
            0 => self.line.pop_front()?,
            at => self.line.remove(at)?,
        };
        Some(self.settle(waiting, settled))
    }

    /// Pays a task's debt of bulk misses: as if each had been tried one by one.
    pub fn settle(
        &self,
        waiting: Waiting,
        settled: &mut Vec<(TaskId, u32)>,
    ) -> (u64, Box<Pending>) {
        let Waiting {
            key,
            owed,
            mut pending,
        } = waiting;
        if owed > 0 {
            pending.attempts += owed;
            if self.reason.is_some() {
                pending.reason.clone_from(&self.reason);
            }
            settled.push((pending.task.id, owed));
        }
        (key, pending)
    }

    /// Pays every debt in the line (the end of a run).
    pub fn settle_all(&mut self, settled: &mut Vec<(TaskId, u32)>) {
        for w in self.line.iter_mut() {
            if w.owed > 0 {
                w.pending.attempts += w.owed;
                if self.reason.is_some() {
                    w.pending.reason.clone_from(&self.reason);
                }
                settled.push((w.pending.task.id, w.owed));
                w.owed = 0;
            }
        }
    }

    /// The untried tasks with a key below `bound` (all of them without one) miss
    /// once more, counted in bulk; returns how many.
    pub fn miss_until(&mut self, bound: Option<u64>) -> usize {
        let end = match bound {
            Some(b) => self.line.partition_point(|w| w.key < b),
            None => self.line.len(),
        }
        .max(self.tried);
        for w in self.line.range_mut(self.tried..end) {
            w.owed += 1;
        }
        let count = end - self.tried;
        self.tried = end;
        count
    }
}
