//! User queues of a GM, served round-robin one task at a time.
//!
//! Each queue keeps two FIFOs: `ready` (not yet tried against the current view) and
//! `blocked` (tried against the current view and failed). Trying a blocked task again
//! before the view gains resources cannot succeed, so a scheduling pass only walks
//! `ready`; when the view gains resources, `blocked` moves back in front of `ready`
//! (those tasks were requeued before anything now in `ready` arrived), which is the
//! paper's "requeue at the back" order without rescanning a backlog on every message.

use common::reasons::PendingReason;
use common::{JobId, LmId, Micros, QueueId, TaskSpec};
use std::collections::{HashMap, VecDeque};

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
}

/// Tasks move between queues on every attempt; boxing keeps each move a pointer copy.
#[derive(Debug, Default)]
struct UserQueue {
    ready: VecDeque<Box<Pending>>,
    blocked: VecDeque<Box<Pending>>,
}

#[derive(Debug, Default)]
pub struct Queues {
    queues: Vec<UserQueue>,
    ids: Vec<QueueId>,
    index: HashMap<QueueId, usize>,
    next: usize,
    ready: usize,
    blocked: usize,
}

impl Queues {
    fn queue_mut(&mut self, id: QueueId) -> &mut UserQueue {
        let i = match self.index.get(&id) {
            Some(&i) => i,
            None => {
                self.queues.push(UserQueue::default());
                self.ids.push(id);
                self.index.insert(id, self.queues.len() - 1);
                self.queues.len() - 1
            }
        };
        &mut self.queues[i]
    }

    /// A new or retried task, at the back of its queue.
    pub fn push_ready(&mut self, pending: Box<Pending>) {
        self.ready += 1;
        self.queue_mut(pending.task.queue).ready.push_back(pending);
    }

    /// A task that failed against the current view.
    pub fn push_blocked(&mut self, pending: Box<Pending>) {
        self.blocked += 1;
        self.queue_mut(pending.task.queue)
            .blocked
            .push_back(pending);
    }

    /// The view gained resources: every blocked task is worth another try.
    pub fn unblock_all(&mut self) {
        if self.blocked == 0 {
            return;
        }
        for q in &mut self.queues {
            if q.blocked.is_empty() {
                continue;
            }
            let mut merged = std::mem::take(&mut q.blocked);
            merged.append(&mut q.ready);
            q.ready = merged;
        }
        self.ready += self.blocked;
        self.blocked = 0;
    }

    /// The next ready task, taking queues in turn.
    pub fn pop_ready(&mut self) -> Option<Box<Pending>> {
        if self.ready == 0 {
            return None;
        }
        let n = self.queues.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(p) = self.queues[i].ready.pop_front() {
                self.next = (i + 1) % n;
                self.ready -= 1;
                return Some(p);
            }
        }
        None
    }

    /// Takes every waiting task of `job` out of the queues (a cancelled job).
    pub fn remove_job(&mut self, job: JobId) -> Vec<Box<Pending>> {
        let mut removed = Vec::new();
        for q in &mut self.queues {
            for (list, count) in [
                (&mut q.ready, &mut self.ready),
                (&mut q.blocked, &mut self.blocked),
            ] {
                if !list.iter().any(|p| p.task.id.job == job) {
                    continue;
                }
                let (gone, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(list)
                    .into_iter()
                    .partition(|p| p.task.id.job == job);
                *count -= gone.len();
                *list = kept;
                removed.extend(gone);
            }
        }
        removed
    }

    pub fn len(&self) -> usize {
        self.ready + self.blocked
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ready_len(&self) -> usize {
        self.ready
    }

    /// Queue lengths by queue id.
    pub fn lengths(&self) -> impl Iterator<Item = (QueueId, usize)> + '_ {
        self.ids
            .iter()
            .zip(&self.queues)
            .map(|(id, q)| (*id, q.ready.len() + q.blocked.len()))
    }

    /// Every waiting task (blocked ones first within a queue).
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.queues
            .iter()
            .flat_map(|q| q.blocked.iter().chain(q.ready.iter()))
            .map(|p| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Resources, TaskId};

    fn pending(job: u64, queue: u16) -> Box<Pending> {
        Box::new(Pending {
            task: TaskSpec::short(TaskId::new(job, 0), Resources::cores(1, 1), Micros(1))
                .with_queue(QueueId(queue)),
            submitted_at: Micros(0),
            attempts: 0,
            reason: None,
            preempting: None,
        })
    }

    fn drain(q: &mut Queues) -> Vec<u64> {
        std::iter::from_fn(|| q.pop_ready())
            .map(|p| p.task.id.job.0)
            .collect()
    }

    #[test]
    fn queues_are_served_round_robin() {
        let mut q = Queues::default();
        for (job, queue) in [(1, 0), (2, 0), (3, 0), (10, 1), (11, 1)] {
            q.push_ready(pending(job, queue));
        }
        assert_eq!(drain(&mut q), vec![1, 10, 2, 11, 3]);
    }

    #[test]
    fn blocked_tasks_wait_for_new_resources_then_go_first() {
        let mut q = Queues::default();
        q.push_blocked(pending(1, 0));
        q.push_ready(pending(2, 0));
        assert_eq!(drain(&mut q), vec![2]);
        q.push_blocked(pending(2, 0));
        q.push_ready(pending(3, 0));
        q.unblock_all();
        assert_eq!(q.len(), 3);
        assert_eq!(drain(&mut q), vec![1, 2, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_cancelled_job_leaves_both_fifos_and_the_counts() {
        let mut q = Queues::default();
        q.push_blocked(pending(1, 0));
        q.push_blocked(pending(2, 0));
        q.push_ready(pending(1, 1));
        q.push_ready(pending(3, 1));
        let gone = q.remove_job(JobId(1));
        assert_eq!(gone.len(), 2);
        assert_eq!((q.len(), q.ready_len()), (2, 1));
        q.unblock_all();
        assert_eq!(drain(&mut q), vec![2, 3]);
        assert!(q.remove_job(JobId(1)).is_empty());
    }
}
