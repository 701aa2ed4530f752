//! Which start orders a worker may run: [`OrderFilter`]. The worker service keeps one
//! per process (`worker/src/service/http.rs`, `StartedRuns`, which counts and logs what
//! it refuses) and the fault simulator one per simulated worker, so both refuse the
//! same orders.

use common::messages::Dispatch;
use std::collections::{HashSet, VecDeque};

/// How many dispatches a worker remembers (the newest; about 2 MB).
pub const RUNS_KEPT: usize = 100_000;

/// LM lives remembered as retired.
const LIVES_KEPT: usize = 64;

/// The start orders (their [`Dispatch`]) a worker took in this life, the newest
/// [`RUNS_KEPT`]: each dispatch runs once. A start order of a dispatch already taken
/// (resent by its LM after a lost answer, or replayed by someone who captured it),
/// of an LM life since replaced by another (lives are told apart by number, not
/// ordered by it: a clock may go back), older than every dispatch remembered of the
/// current life, or sent before this worker's current registration
/// ([`OrderFilter::floor`]) may not run. A preempted task started again (with the
/// same attempt) is a new dispatch and runs.
#[derive(Debug, Default)]
pub struct OrderFilter {
    set: HashSet<Dispatch>,
    order: VecDeque<Dispatch>,
    /// The LM life whose orders run: the last one seen that was not retired.
    life: u64,
    /// The highest sequence number forgotten (or floored) of that life.
    forgotten: u64,
    /// LM lives replaced by a later one (the most recent [`LIVES_KEPT`]): their
    /// orders are refused. A life is known by its number, not ordered by it: an LM
    /// restarted with its clock behind numbers its new life below the old one
    /// (issue 33: wall-clock lives), and its orders must run.
    retired: VecDeque<u64>,
}

impl OrderFilter {
    /// Enters LM life `life`; false when it is a retired one. A life not seen
    /// before means the LM restarted: the current one is retired.
    fn enter(&mut self, life: u64) -> bool {
        if life == self.life {
            return true;
        }
        if self.retired.contains(&life) {
            return false;
        }
        let old = self.life;
        if old != 0 {
            if self.retired.len() == LIVES_KEPT {
                self.retired.pop_front();
            }
            self.retired.push_back(old);
        }
        self.life = life;
        self.forgotten = 0;
        true
    }

    /// This worker registered (again) with LM life `life`, whose start orders for
    /// this registration are numbered from `from` (0: no floor): those numbered below
    /// were sent for an earlier registration (a stream the LM abandoned when it
    /// declared this worker lost, delivered after a network cut) and must not run:
    /// the LM reported their runs lost and gave their nodes to other work.
    pub fn floor(&mut self, life: u64, from: u64) {
        if life == 0 || from == 0 {
            return;
        }
        if self.enter(life) {
            self.forgotten = self.forgotten.max(from - 1);
        }
    }

    /// True when `dispatch` may run (it is remembered from now on), false when it may
    /// not. The default dispatch (no LM's: tests, benches) always may.
    pub fn first(&mut self, dispatch: Dispatch) -> bool {
        if dispatch == Dispatch::default() {
            return true;
        }
        if !self.enter(dispatch.lm_life) {
            return false;
        }
        if dispatch.seq <= self.forgotten {
            return false;
        }
        if !self.set.insert(dispatch) {
            return false;
        }
        self.order.push_back(dispatch);
        if self.order.len() > RUNS_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
                if old.lm_life == self.life {
                    self.forgotten = self.forgotten.max(old.seq);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(lm_life: u64, seq: u64) -> Dispatch {
        Dispatch { lm_life, seq }
    }

    #[test]
    fn a_dispatch_runs_once_and_the_memory_is_bounded() {
        let mut runs = OrderFilter::default();
        assert!(runs.first(d(5, 1)));
        assert!(!runs.first(d(5, 1)), "a resent or replayed order");
        assert!(
            runs.first(d(5, 2)),
            "another dispatch (a preempted task's restart)"
        );
        assert!(
            runs.first(Dispatch::default()),
            "no dispatch: orders of tests"
        );
        assert!(runs.first(Dispatch::default()));
        for seq in 3..RUNS_KEPT as u64 + 10 {
            assert!(runs.first(d(5, seq)));
        }
        assert!(
            !runs.first(d(5, 1)),
            "a dispatch forgotten past RUNS_KEPT is still refused (below the watermark)"
        );
        assert!(runs.first(d(9, 1)), "a new LM life");
        assert!(!runs.first(d(5, RUNS_KEPT as u64 + 20)), "an older LM life");
        // An LM restarted with its clock behind: its life is numbered below the
        // current one, never seen, so its orders run; the lives it replaced do not.
        assert!(runs.first(d(7, 1)), "a new life numbered lower");
        assert!(runs.first(d(7, 2)));
        assert!(!runs.first(d(9, 2)), "the life it replaced");
        assert!(!runs.first(d(5, RUNS_KEPT as u64 + 30)), "an earlier one");
        assert!(!runs.first(d(7, 1)), "a replay within the life");
    }

    #[test]
    fn orders_sent_before_a_registration_are_refused_after_it() {
        let mut runs = OrderFilter::default();
        assert!(runs.first(d(5, 1)));
        assert!(runs.first(d(5, 2)));
        // Declared lost, registered again: the new registration's orders start
        // at 4; 3 was on the abandoned stream.
        runs.floor(5, 4);
        assert!(!runs.first(d(5, 3)), "an order of the abandoned stream");
        assert!(runs.first(d(5, 4)), "the new registration's first order");
        assert!(runs.first(d(5, 6)));
        assert!(!runs.first(d(5, 5 - 2)), "still below the floor");
        // A floor never goes down; 0 means none.
        runs.floor(5, 2);
        runs.floor(5, 0);
        assert!(!runs.first(d(5, 3)));
        assert!(runs.first(d(5, 5)));
        // A restarted LM: its first registration sets the floor of its life.
        runs.floor(9, 1);
        assert!(runs.first(d(9, 1)));
        assert!(!runs.first(d(5, 7)), "the replaced life");
    }
}
