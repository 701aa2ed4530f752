//! The blocked tasks of one shape in one queue (see [`crate::queue`]), and the
//! known misses counted in bulk.
//!
//! Under the full retry ([`crate::backlog::WakePolicy::All`]) every blocked task is
//! tried again after every gain, and once a shape found no node in a pass, each
//! later task of that shape in the same pass fails the same way (the view only
//! shrinks during a pass). A driver that asks for it ([`crate::GmConfig`]'s
//! `count_known_misses_in_bulk`) gets those failures counted per run of the class's
//! line instead of one task at a time: once its shape failed in a pass, a class
//! leaves the pass (it is *doomed*) and its tasks stay where they are; each owes
//! one more attempt, and the debt is paid into the task (`attempts`, `reason`) when
//! it leaves the line, and reported so that the driver books it too. A doom costs
//! one count, not one write per task: the class counts its dooms (`misses`) and a
//! task in its line owes those since it entered the line (`base`).

use common::reasons::PendingReason;
use common::TaskId;
use std::collections::VecDeque;

use crate::queue::pending::Pending;

/// A blocked task in its class's line.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub key: u64,
    /// The class's `misses` when the task entered the line: it owes the misses
    /// counted in bulk since, not yet in `pending.attempts`.
    pub base: u32,
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
    /// Its shape failed in this pass: every task in `line` misses (counted in
    /// bulk), none is taken out.
    pub doomed: bool,
    /// Dooms so far: each task in `line` owes `misses - base` attempts.
    pub misses: u32,
    /// Why the last doom failed (the reason each owing task gets).
    pub reason: Option<PendingReason>,
}

impl Class {
    pub fn len(&self) -> usize {
        self.line.len() + self.parked.len()
    }

    /// The key of the next task to try.
    pub fn head(&self) -> Option<u64> {
        self.line.front().map(|w| w.key)
    }

    /// Tasks of the line a pass would still take out (none once doomed).
    pub fn untried(&self) -> usize {
        match self.doomed {
            true => 0,
            false => self.line.len(),
        }
    }

    /// Its shape failed in this pass: every task left in its line owes one more
    /// attempt (one count for all). False if it was not awake or already doomed.
    pub fn doom(&mut self, reason: &PendingReason) -> bool {
        if !self.awake || self.doomed {
            return false;
        }
        self.doomed = true;
        self.misses += 1;
        if self.reason.as_ref() != Some(reason) {
            self.reason = Some(reason.clone());
        }
        true
    }

    /// Back to sleep: the parked tasks go back into the line, by key, owing nothing.
    pub fn sleep(&mut self) {
        self.awake = false;
        self.doomed = false;
        let below = match (self.parked.back(), self.line.front()) {
            (Some((last, _)), Some(first)) => *last < first.key,
            _ => true,
        };
        if below {
            // Every parked key is below the line's (taken from its front, or tried
            // before its head): costs the parked tasks, not the line.
            while let Some((key, pending)) = self.parked.pop_back() {
                let base = self.misses;
                self.line.push_front(Waiting { key, base, pending });
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
            base: self.misses,
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
        let waiting = self.line.pop_front()?;
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
            base,
            mut pending,
        } = waiting;
        let owed = self.misses - base;
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
            let owed = self.misses - w.base;
            if owed > 0 {
                w.pending.attempts += owed;
                if self.reason.is_some() {
                    w.pending.reason.clone_from(&self.reason);
                }
                settled.push((w.pending.task.id, owed));
                w.base = self.misses;
            }
        }
    }
}
