//! Sorted vectors of classes by key (see [`Keyed`]).

/// Classes by the key of their first task, the smallest last: a class's line
/// usually moves to the next smallest key, which goes back at the end. Few classes
/// wait in one queue (one per shape), so a sorted vector beats a tree.
#[derive(Debug)]
pub(super) struct Keyed<V>(Vec<(u64, V)>);

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed(Vec::new())
    }
}

impl<V: Copy> Keyed<V> {
    /// The entries given, in any order (keys distinct).
    pub(super) fn from_unsorted(mut entries: Vec<(u64, V)>) -> Self {
        entries.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        Keyed(entries)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    /// The entry with the smallest key.
    pub(super) fn first(&self) -> Option<(u64, V)> {
        self.0.last().copied()
    }

    /// The entry with the smallest key at or above `from`.
    pub(super) fn first_from(&self, from: u64) -> Option<(u64, V)> {
        let at = self.0.partition_point(|(k, _)| *k >= from);
        at.checked_sub(1).map(|i| self.0[i])
    }

    pub(super) fn insert(&mut self, key: u64, value: V) {
        let at = self.0.partition_point(|(k, _)| *k > key);
        match self.0.get_mut(at) {
            Some(entry) if entry.0 == key => entry.1 = value,
            _ => self.0.insert(at, (key, value)),
        }
    }

    pub(super) fn remove(&mut self, key: &u64) {
        if self.0.last().is_some_and(|(k, _)| k == key) {
            self.0.pop();
            return;
        }
        let at = self.0.partition_point(|(k, _)| k > key);
        if self.0.get(at).is_some_and(|(k, _)| k == key) {
            self.0.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Keyed;
    use common::{ConstraintSet, Resources};
    use std::collections::BTreeMap;

    fn shape(n: u64) -> (ConstraintSet, Resources) {
        (ConstraintSet(n), Resources::cores(1, n))
    }

    proptest::proptest! {
        /// Inserts, removals and lookups answer as a B-tree map of the same entries.
        #[test]
        fn answers_as_a_btree_map(ops in proptest::collection::vec((0u8..3, 0u64..40, 0u64..4), 1..200)) {
            let mut keyed = Keyed::default();
            let mut tree = BTreeMap::new();
            for (op, key, value) in ops {
                match op {
                    0 => {
                        keyed.insert(key, shape(value));
                        tree.insert(key, shape(value));
                    }
                    1 => {
                        keyed.remove(&key);
                        tree.remove(&key);
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(keyed.first(), tree.first_key_value().map(|(k, s)| (*k, *s)));
                proptest::prop_assert_eq!(keyed.first_from(key), tree.range(key..).next().map(|(k, s)| (*k, *s)));
            }
        }
    }
}
