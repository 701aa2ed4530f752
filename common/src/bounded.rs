//! A set that remembers at most a fixed number of entries, forgetting the oldest
//! first: the LM's memories of runs (finished, reported lost) and the GM's of tasks
//! ended for good stay bounded however long they run. A leaf.

use rustc_hash::FxHashSet as HashSet;
use std::collections::VecDeque;
use std::hash::Hash;

#[derive(Debug)]
pub struct Bounded<T> {
    set: HashSet<T>,
    /// Entries in the order they were inserted; may still name removed ones
    /// (skipped when forgetting, dropped when the queue is compacted).
    order: VecDeque<T>,
    limit: usize,
    forgotten: u64,
}

impl<T: Copy + Eq + Hash> Bounded<T> {
    pub fn new(limit: usize) -> Self {
        Bounded {
            set: HashSet::default(),
            order: VecDeque::new(),
            limit: limit.max(1),
            forgotten: 0,
        }
    }

    /// Inserts `entry`; true when it was new. Over the limit, the oldest entry is
    /// forgotten (and counted).
    pub fn insert(&mut self, entry: T) -> bool {
        if !self.set.insert(entry) {
            return false;
        }
        self.order.push_back(entry);
        while self.set.len() > self.limit {
            match self.order.pop_front() {
                Some(old) => {
                    if self.set.remove(&old) {
                        self.forgotten += 1;
                    }
                }
                None => break,
            }
        }
        if self.order.len() > 2 * self.limit {
            let set = &self.set;
            self.order.retain(|e| set.contains(e));
        }
        true
    }

    pub fn contains(&self, entry: &T) -> bool {
        self.set.contains(entry)
    }

    pub fn remove(&mut self, entry: &T) -> bool {
        self.set.remove(entry)
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Entries forgotten because the limit was reached.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::Bounded;

    #[test]
    fn the_oldest_is_forgotten_first_and_removed_entries_do_not_count() {
        let mut m = Bounded::new(3);
        for k in 0..3 {
            assert!(m.insert(k));
        }
        assert!(!m.insert(1), "already there");
        assert!(m.remove(&0));
        assert!(m.insert(3), "room after the removal: nothing forgotten");
        assert_eq!((m.len(), m.forgotten()), (3, 0));
        assert!(m.insert(4));
        assert!(!m.contains(&1), "the oldest still there is forgotten");
        assert!(m.contains(&2) && m.contains(&3) && m.contains(&4));
        assert_eq!(m.forgotten(), 1);
    }

    #[test]
    fn the_order_queue_stays_bounded_under_insert_remove_churn() {
        let mut m = Bounded::new(4);
        for k in 0..10_000u32 {
            m.insert(k);
            m.remove(&k);
        }
        assert!(m.is_empty());
        assert!(m.order.len() <= 8, "{}", m.order.len());
        assert_eq!(m.forgotten(), 0);
    }
}
