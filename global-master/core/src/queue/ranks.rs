//! The keys of the tasks in a queue's class lines, counted below a key (the known
//! misses counted in bulk, see [`crate::queue::class`]).

/// Keys kept in one chunk before it splits in two (a few in tests: many chunks).
#[cfg(not(test))]
const CHUNK: usize = 512;
#[cfg(test)]
const CHUNK: usize = 4;

/// A sorted set of keys that answers how many are below a key: sorted chunks of
/// at most `2 * CHUNK` keys, so that an insertion or a removal moves at most one
/// chunk and a count sums the chunks' lengths before one binary search.
#[derive(Debug, Default)]
pub(crate) struct KeyRanks {
    /// Non-empty, sorted, each chunk's keys below the next chunk's.
    chunks: Vec<Vec<u64>>,
    len: usize,
}

impl KeyRanks {
    pub fn len(&self) -> usize {
        self.len
    }

    /// The chunk holding `key`, or where it would go.
    fn chunk_of(&self, key: u64) -> usize {
        let at = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|&l| l < key));
        at.min(self.chunks.len().saturating_sub(1))
    }

    pub fn insert(&mut self, key: u64) {
        self.len += 1;
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(2 * CHUNK + 1));
        }
        let i = self.chunk_of(key);
        let chunk = &mut self.chunks[i];
        match chunk.last() {
            Some(&last) if last < key => chunk.push(key),
            _ => {
                let at = chunk.partition_point(|&k| k < key);
                chunk.insert(at, key);
            }
        }
        if chunk.len() > 2 * CHUNK {
            let mut tail = Vec::with_capacity(2 * CHUNK + 1);
            tail.extend(chunk.drain(CHUNK..));
            self.chunks.insert(i + 1, tail);
        }
    }

    /// Takes `key` out; false if it was not there.
    pub fn remove(&mut self, key: u64) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let i = self.chunk_of(key);
        let chunk = &mut self.chunks[i];
        let at = chunk.partition_point(|&k| k < key);
        if chunk.get(at) != Some(&key) {
            return false;
        }
        chunk.remove(at);
        self.len -= 1;
        // A chunk that shrank much merges with the next one if both fit in one.
        let left = chunk.len();
        if left == 0 {
            self.chunks.remove(i);
        } else if left < CHUNK / 2
            && self
                .chunks
                .get(i + 1)
                .is_some_and(|n| n.len() + left <= CHUNK)
        {
            let next = self.chunks.remove(i + 1);
            self.chunks[i].extend(next);
        }
        true
    }

    /// How many keys are below `key`.
    pub fn count_below(&self, key: u64) -> usize {
        let i = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|&l| l < key));
        let before: usize = self.chunks[..i].iter().map(Vec::len).sum();
        let within = self
            .chunks
            .get(i)
            .map_or(0, |c| c.partition_point(|&k| k < key));
        before + within
    }
}

#[cfg(test)]
mod tests {
    use super::KeyRanks;
    use std::collections::BTreeSet;

    proptest::proptest! {
        /// Insertions, removals and counts answer as a B-tree set of the same keys,
        /// across chunk splits and merges.
        #[test]
        fn counts_as_a_btree_set(ops in proptest::collection::vec((0u8..3, 0u64..3000), 1..3000)) {
            let mut ranks = KeyRanks::default();
            let mut set = BTreeSet::new();
            for (op, key) in ops {
                match op {
                    0 if set.insert(key) => ranks.insert(key),
                    1 => proptest::prop_assert_eq!(ranks.remove(key), set.remove(&key)),
                    _ => {}
                }
                proptest::prop_assert_eq!(ranks.len(), set.len());
                proptest::prop_assert_eq!(ranks.count_below(key), set.range(..key).count());
            }
        }
    }
}
