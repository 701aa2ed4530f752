//! A set ([`Bounded`]) and a map of largest values ([`BoundedMax`]) that remember at
//! most a fixed number of entries, forgetting the oldest first: the LM's memories of runs (finished, reported lost) and the GM's of tasks
//! ended for good stay bounded however long they run. A leaf.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
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

/// A map that keeps, per key, the largest value it was given ([`BoundedMax::raise`])
/// for at most `limit` keys, forgetting the oldest key first (and counting it): the
/// LM's memories of the latest finished run per task and of void preemption
/// requests per GM life and task.
#[derive(Debug)]
pub struct BoundedMax<K, V> {
    map: HashMap<K, V>,
    /// Keys in the order they came; may still name removed ones (skipped when
    /// forgetting, dropped when the queue is compacted).
    order: VecDeque<K>,
    limit: usize,
    forgotten: u64,
}

impl<K: Copy + Eq + Hash, V: Copy + Ord> BoundedMax<K, V> {
    pub fn new(limit: usize) -> Self {
        BoundedMax {
            map: HashMap::default(),
            order: VecDeque::new(),
            limit: limit.max(1),
            forgotten: 0,
        }
    }

    /// `key`'s value becomes the larger of `value` and what it had. Over the limit,
    /// the oldest key is forgotten (and counted).
    pub fn raise(&mut self, key: K, value: V) {
        match self.map.get_mut(&key) {
            Some(held) => *held = (*held).max(value),
            None => {
                self.map.insert(key, value);
                self.order.push_back(key);
            }
        }
        while self.map.len() > self.limit {
            match self.order.pop_front() {
                Some(old) => {
                    if self.map.remove(&old).is_some() {
                        self.forgotten += 1;
                    }
                }
                None => break,
            }
        }
        if self.order.len() > 2 * self.limit {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.map.get(key).copied()
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.map.remove(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys forgotten because the limit was reached.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::{Bounded, BoundedMax};

    #[test]
    fn a_bounded_max_keeps_the_largest_value_and_forgets_the_oldest_key() {
        let mut m = BoundedMax::new(2);
        m.raise('a', 3);
        m.raise('a', 1);
        assert_eq!(m.get(&'a'), Some(3), "never lowered");
        m.raise('b', 1);
        assert_eq!(m.remove(&'b'), Some(1));
        m.raise('b', 2);
        assert_eq!((m.len(), m.forgotten()), (2, 0));
        m.raise('c', 5);
        assert_eq!(m.get(&'a'), None, "the oldest key is forgotten");
        assert_eq!(
            (m.get(&'b'), m.get(&'c'), m.forgotten()),
            (Some(2), Some(5), 1)
        );
        for k in 0..1000u32 {
            let mut n = BoundedMax::new(4);
            n.raise(k, k);
            n.remove(&k);
            assert!(n.is_empty());
        }
    }

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
