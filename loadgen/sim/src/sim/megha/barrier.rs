//! Start barriers ([`SimConfig::start_barrier`](crate::sim::SimConfig)): the jobs
//! whose tasks, placed one by one as ordinary tasks, behave as the members of a
//! real gang (MPI ranks, distributed training workers) do. A member that starts
//! before the others waits at its start barrier, holding its node and doing no
//! work; when the last member starts, at `t`, every member runs its duration from
//! there and ends at `t + duration` (its node is occupied until then).
//!
//! How: a member that starts before its barrier is released runs under an
//! executor the worker core does not time ([`Executor::Burn`]: the core orders its
//! launch, which the simulator ignores, and learns of its end from
//! [`WorkerInput::Exited`](worker_core::WorkerInput)). When the last member
//! starts, the simulator queues each member's exit at `t + duration`. Neither the
//! GM nor the LM sees the executor: the order is changed on its way into the
//! worker, as soft constraints' run times are (`workers.rs`).
//!
//! What else touches a member's run: a member killed while it waits (a fairness
//! preemption, if the run preempts) leaves the barrier and its retry waits there
//! again; after the release, a member's exit that finds another run of it (it was
//! killed and retried) is ignored by the worker (`NotHere`), and a retry started
//! after the release runs its own duration from its own start, as a member
//! retried alone does. Retries, LM rejections and repartitions touch only whether
//! and where a member starts, not how long it runs. Without barrier jobs nothing
//! here is consulted beyond one map lookup per start order, and no event is added:
//! the default runs are unchanged.

use common::{Executor, Micros, TaskId};
use rustc_hash::FxHashMap;

/// A member waiting at its barrier: where it runs, as which run, for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Waiting {
    pub(super) worker: usize,
    pub(super) attempt: u32,
    pub(super) duration: Micros,
}

/// An exit the simulator owes a member once its barrier is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Exit {
    pub(super) at: Micros,
    pub(super) worker: usize,
    pub(super) task: TaskId,
    pub(super) attempt: u32,
}

/// The barrier jobs of a run and their members' state.
#[derive(Debug, Default)]
pub(super) struct Barriers {
    /// Per barrier job not yet released: how many members it has.
    size: FxHashMap<u64, usize>,
    /// Per barrier job not yet released: its members started and waiting.
    waiting: FxHashMap<u64, FxHashMap<TaskId, Waiting>>,
    /// Durations of the members ordered to start while their barrier was held
    /// (kept until the worker reports the start, or forgotten at a refusal's
    /// next order).
    ordered: FxHashMap<TaskId, Micros>,
    /// Members waiting, over every job.
    waiting_total: u64,
}

impl Barriers {
    /// `jobs`: each barrier job's id and member count. A job of one member or
    /// none has nothing to wait for and is left out.
    pub(super) fn new(jobs: impl IntoIterator<Item = (u64, usize)>) -> Self {
        let size: FxHashMap<u64, usize> = jobs.into_iter().filter(|(_, n)| *n > 1).collect();
        Barriers {
            size,
            ..Barriers::default()
        }
    }

    /// Whether `job`'s barrier still holds (its members start and wait).
    pub(super) fn holds(&self, job: u64) -> bool {
        !self.size.is_empty() && self.size.contains_key(&job)
    }

    /// A start order of a member whose barrier holds: its run is timed by the
    /// barrier, not by the worker core.
    pub(super) fn order(&mut self, task: &mut common::TaskSpec) {
        self.ordered.insert(task.id, task.duration);
        task.executor = Some(Executor::Burn);
    }

    /// A member started on `worker` at `now`. When it is the last one, the barrier
    /// is released: returns every member's exit, at `now` plus its duration.
    pub(super) fn started(
        &mut self,
        now: Micros,
        worker: usize,
        task: TaskId,
        attempt: u32,
    ) -> Vec<Exit> {
        let job = task.job.0;
        let Some(&size) = self.size.get(&job) else {
            return Vec::new();
        };
        // Started under the barrier's executor only if ordered while it held.
        let Some(duration) = self.ordered.remove(&task) else {
            return Vec::new();
        };
        let members = self.waiting.entry(job).or_default();
        let member = Waiting {
            worker,
            attempt,
            duration,
        };
        if members.insert(task, member).is_none() {
            self.waiting_total += 1;
        }
        if members.len() < size {
            return Vec::new();
        }
        let members = self.waiting.remove(&job).unwrap_or_default();
        self.size.remove(&job);
        self.waiting_total -= members.len() as u64;
        let mut exits: Vec<Exit> = (members.into_iter())
            .map(|(task, m)| Exit {
                at: now + m.duration,
                worker: m.worker,
                task,
                attempt: m.attempt,
            })
            .collect();
        // Queued in a fixed order: the map's iteration order is not one.
        exits.sort_by_key(|e| (e.at, e.task));
        exits
    }

    /// A member's run ended before its barrier was released (killed): it no
    /// longer waits; a retry waits again.
    pub(super) fn ended(&mut self, task: TaskId, attempt: u32) {
        let Some(members) = self.waiting.get_mut(&task.job.0) else {
            return;
        };
        if members.get(&task).is_some_and(|m| m.attempt == attempt) {
            members.remove(&task);
            self.waiting_total -= 1;
        }
    }

    /// Members started and waiting at their barrier, over every job.
    pub(super) fn waiting(&self) -> u64 {
        self.waiting_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Resources, TaskSpec};

    fn spec(job: u64, index: u32, secs: u64) -> TaskSpec {
        TaskSpec::short(
            TaskId::new(job, index),
            Resources::cores(1, 10),
            Micros::from_secs(secs),
        )
    }

    #[test]
    fn the_last_member_to_start_releases_every_member_at_its_start_plus_the_duration() {
        let mut b = Barriers::new([(7, 3), (8, 1)]);
        assert!(b.holds(7) && !b.holds(8) && !b.holds(9));
        let mut members: Vec<TaskSpec> = (0..3).map(|i| spec(7, i, 5)).collect();
        for m in &mut members {
            b.order(m);
            assert_eq!(m.executor, Some(Executor::Burn));
        }
        assert!(b
            .started(Micros::from_secs(1), 0, members[0].id, 1)
            .is_empty());
        assert!(b
            .started(Micros::from_secs(2), 1, members[1].id, 1)
            .is_empty());
        assert_eq!(b.waiting(), 2);
        let exits = b.started(Micros::from_secs(4), 2, members[2].id, 1);
        let at = Micros::from_secs(9);
        let want: Vec<Exit> = (0..3)
            .map(|i| Exit {
                at,
                worker: i,
                task: members[i].id,
                attempt: 1,
            })
            .collect();
        assert_eq!(exits, want);
        assert_eq!(b.waiting(), 0);
        assert!(!b.holds(7));
    }

    #[test]
    fn a_member_killed_while_waiting_leaves_and_its_retry_waits_again() {
        let mut b = Barriers::new([(7, 2)]);
        let mut m0 = spec(7, 0, 5);
        let mut m1 = spec(7, 1, 5);
        b.order(&mut m0);
        assert!(b.started(Micros::from_secs(1), 0, m0.id, 1).is_empty());
        // Killed (another run's end changes nothing).
        b.ended(m0.id, 2);
        assert_eq!(b.waiting(), 1);
        b.ended(m0.id, 1);
        assert_eq!(b.waiting(), 0);
        b.order(&mut m1);
        assert!(b.started(Micros::from_secs(2), 1, m1.id, 1).is_empty());
        b.order(&mut m0);
        let exits = b.started(Micros::from_secs(3), 0, m0.id, 2);
        assert_eq!(exits.len(), 2);
        assert!(exits.iter().all(|e| e.at == Micros::from_secs(8)));
        assert!(exits.iter().any(|e| e.task == m0.id && e.attempt == 2));
    }
}
