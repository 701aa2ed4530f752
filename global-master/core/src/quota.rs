//! Per-job quotas on QUEUEABLE containers (Mercury 4.1), the GM's half.
//!
//! A job's QUEUEABLE tasks are all placed by the GM it was submitted to, so that GM
//! is authoritative for the job's quota across LMs. It counts a job's outstanding
//! QUEUEABLE containers as the sum of what every LM last reported (queued at a worker
//! or running there) plus what it has sent in batches no snapshot includes yet: never
//! less than the truth, so it never over-sends. A relative quota uses the job's
//! GUARANTEED containers as the LMs report them. A task over its job's quota waits
//! here (pending, with its reason) and goes back to its queue when the job's count
//! drops. Each LM enforces its share as a guard (see the LM's `queueable::quota`).

use super::queue::Pending;
use common::quota::{JobContainers, QueueableQuota};
use common::JobId;
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Default)]
pub struct QuotaBook {
    quota: QueueableQuota,
    /// Per job: the sum over LMs of their last reported counts.
    reported: HashMap<JobId, JobContainers>,
    /// Per job: QUEUEABLE tasks sent in batches that no snapshot includes yet.
    in_flight: HashMap<JobId, u32>,
    /// Tasks held back, per job, oldest first.
    waiting: BTreeMap<JobId, VecDeque<Box<Pending>>>,
    /// Jobs with waiting tasks whose count changed since the last release.
    changed: BTreeSet<JobId>,
    held: usize,
}

impl QuotaBook {
    pub fn new(quota: QueueableQuota) -> Self {
        QuotaBook {
            quota,
            ..QuotaBook::default()
        }
    }

    /// The job's outstanding QUEUEABLE containers as far as this GM knows (an upper
    /// bound of the truth).
    pub fn outstanding(&self, job: JobId) -> u32 {
        let reported = self.reported.get(&job).map_or(0, |c| c.queueable);
        reported + self.in_flight.get(&job).copied().unwrap_or(0)
    }

    /// The job's quota now, if any.
    pub fn limit(&self, job: JobId) -> Option<u32> {
        let guaranteed = self.reported.get(&job).map_or(0, |c| c.guaranteed);
        self.quota.limit(guaranteed)
    }

    /// `Some(limit)` when one more QUEUEABLE container would exceed the job's quota.
    pub fn over(&self, job: JobId) -> Option<u32> {
        self.limit(job).filter(|l| self.outstanding(job) >= *l)
    }

    /// Holds a task back until its job's count drops.
    pub fn hold(&mut self, pending: Box<Pending>) {
        self.held += 1;
        self.waiting
            .entry(pending.task.id.job)
            .or_default()
            .push_back(pending);
    }

    /// A QUEUEABLE task of `job` left in a launch batch.
    pub fn sent(&mut self, job: JobId) {
        if self.quota.is_limited() {
            *self.in_flight.entry(job).or_default() += 1;
        }
    }

    /// A batch carrying a QUEUEABLE task of `job` is now included in a snapshot (or
    /// was abandoned): the LM's count covers it from now on.
    pub fn landed(&mut self, job: JobId) {
        if let Some(n) = self.in_flight.get_mut(&job) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(&job);
            }
            self.touch(job);
        }
    }

    /// An LM's counts went from `old` to `new`.
    pub fn report(&mut self, old: &[(JobId, JobContainers)], new: &[(JobId, JobContainers)]) {
        if !self.quota.is_limited() || old == new {
            return;
        }
        for (job, c) in old {
            let e = self.reported.entry(*job).or_default();
            e.queueable = e.queueable.saturating_sub(c.queueable);
            e.guaranteed = e.guaranteed.saturating_sub(c.guaranteed);
            if *e == JobContainers::default() {
                self.reported.remove(job);
            }
            self.touch(*job);
        }
        for (job, c) in new {
            let e = self.reported.entry(*job).or_default();
            e.queueable += c.queueable;
            e.guaranteed += c.guaranteed;
            self.touch(*job);
        }
    }

    fn touch(&mut self, job: JobId) {
        if self.waiting.contains_key(&job) {
            self.changed.insert(job);
        }
    }

    /// Waiting tasks whose job now has room, as many as the room (oldest first).
    pub fn release(&mut self) -> Vec<Box<Pending>> {
        let mut out = Vec::new();
        for job in std::mem::take(&mut self.changed) {
            let room = match self.limit(job) {
                Some(l) => l.saturating_sub(self.outstanding(job)) as usize,
                None => usize::MAX,
            };
            let Some(tasks) = self.waiting.get_mut(&job) else {
                continue;
            };
            let n = room.min(tasks.len());
            out.extend(tasks.drain(..n));
            if tasks.is_empty() {
                self.waiting.remove(&job);
            }
        }
        self.held -= out.len();
        out
    }

    /// Takes the tasks of `job` held back out (a cancelled job).
    pub fn remove_job(&mut self, job: JobId) -> Vec<Box<Pending>> {
        self.changed.remove(&job);
        let gone: Vec<_> = self.waiting.remove(&job).into_iter().flatten().collect();
        self.held -= gone.len();
        gone
    }

    /// Takes `task` out if it is held back.
    pub fn remove_task(&mut self, task: common::TaskId) -> Option<Box<Pending>> {
        let waiting = self.waiting.get_mut(&task.job)?;
        let i = waiting.iter().position(|p| p.task.id == task)?;
        let gone = waiting.remove(i);
        if waiting.is_empty() {
            self.waiting.remove(&task.job);
        }
        self.held -= 1;
        gone
    }

    /// Tasks held back by quotas.
    pub fn held(&self) -> usize {
        self.held
    }

    pub fn waiting(&self) -> impl Iterator<Item = &Pending> {
        self.waiting.values().flatten().map(|p| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Micros, Resources, TaskId, TaskKind, TaskSpec};

    fn pending(job: u64, i: u32) -> Box<Pending> {
        Box::new(Pending {
            task: TaskSpec::short(TaskId::new(job, i), Resources::cores(1, 1), Micros(1))
                .with_kind(TaskKind::Queueable),
            submitted_at: Micros(0),
            attempts: 0,
            reason: None,
            preempting: None,
            contended_since: None,
        })
    }

    fn counts(job: u64, q: u32, g: u32) -> (JobId, JobContainers) {
        (
            JobId(job),
            JobContainers {
                queueable: q,
                guaranteed: g,
            },
        )
    }

    #[test]
    fn counts_reports_and_in_flight_and_releases_only_the_room() {
        let mut book = QuotaBook::new("ratio:1".parse().unwrap());
        let job = JobId(7);
        // No GUARANTEED container: one QUEUEABLE container at most.
        book.sent(job);
        assert_eq!(book.over(job), Some(1));
        for i in 0..3 {
            book.hold(pending(7, i));
        }
        assert!(book.release().is_empty());
        // The batch landed; the LM reports it with three GUARANTEED containers.
        book.report(&[], &[counts(7, 1, 3)]);
        book.landed(job);
        assert_eq!(book.outstanding(job), 1);
        assert_eq!(book.limit(job), Some(3));
        let released = book.release();
        assert_eq!(released.len(), 2, "room for two more");
        assert_eq!(released[0].task.id, TaskId::new(7, 0));
        assert_eq!(book.held(), 1);
        // Two LMs add up; a report replaces only that LM's share.
        book.report(&[], &[counts(7, 2, 0)]);
        assert_eq!(book.outstanding(job), 3);
        book.report(&[counts(7, 2, 0)], &[]);
        assert_eq!(book.outstanding(job), 1);
    }
}
