//! Spare `free` / `free_changed` buffers of earlier snapshots, so that building a
//! snapshot while an earlier one is still held (by messages on their way to the
//! GMs) updates a buffer no one holds any more instead of copying the held one.
//!
//! A spare remembers, one bit per block of [`FREE_BLOCK`] nodes, where it may
//! differ from the last snapshot built (the blocks dirtied since it was built):
//! bringing it up to date copies those blocks only.

use common::messages::{FREE_BLOCK, FREE_SUB_BLOCK};
use common::Resources;
use std::sync::Arc;

/// Spares kept, the newest: an LM that answers batches faster than they reach the
/// GMs has a few snapshots in flight, and the oldest is the first let go.
const KEPT: usize = 8;

/// A snapshot's `free` and `free_changed`.
pub(super) type FreeVecs = (Arc<Vec<Resources>>, Arc<Vec<u64>>);

/// An earlier snapshot's `free` and `free_changed`.
#[derive(Debug)]
struct Spare {
    free: Arc<Vec<Resources>>,
    changed: Arc<Vec<u64>>,
    /// One bit per block: the block may differ from the last snapshot built.
    stale: Vec<u64>,
}

#[derive(Debug, Default)]
pub(super) struct Spares(Vec<Spare>);

impl Spares {
    /// A snapshot is being built with the blocks `dirty` changed since the last
    /// one: every spare may differ from it there too.
    pub(super) fn age(&mut self, dirty: &[u64]) {
        for spare in &mut self.0 {
            for (stale, &d) in spare.stale.iter_mut().zip(dirty) {
                *stale |= d;
            }
        }
    }

    /// Forgets every spare.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    /// Keeps the last snapshot's `free` and `changed` (still held elsewhere), which
    /// differ from the snapshot being built in the blocks `dirty` at most.
    pub(super) fn keep(
        &mut self,
        free: Arc<Vec<Resources>>,
        changed: Arc<Vec<u64>>,
        dirty: &[u64],
    ) {
        if self.0.len() == KEPT {
            self.0.remove(0);
        }
        self.0.push(Spare {
            free,
            changed,
            stale: dirty.to_vec(),
        });
    }

    /// A spare no one else holds, made equal to the last snapshot's `free` and
    /// `changed` (its stale blocks copied from them); `None` if every spare is held.
    /// Call [`Spares::age`] first.
    pub(super) fn take_equal_to(
        &mut self,
        free: &[Resources],
        changed: &[u64],
    ) -> Option<FreeVecs> {
        let i = self.0.iter_mut().position(|s| {
            s.free.len() == free.len()
                && s.changed.len() == changed.len()
                && Arc::get_mut(&mut s.free).is_some()
                && Arc::get_mut(&mut s.changed).is_some()
        })?;
        let Spare {
            free: mut spare_free,
            changed: mut spare_changed,
            stale,
        } = self.0.remove(i);
        let (to_free, to_changed) = (
            Arc::get_mut(&mut spare_free)?,
            Arc::get_mut(&mut spare_changed)?,
        );
        let nodes = free.len();
        let blocks = nodes.div_ceil(FREE_BLOCK);
        for (w, &word) in stale.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let block = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let range = block * FREE_BLOCK..((block + 1) * FREE_BLOCK).min(nodes);
                let subs = blocks + range.start / FREE_SUB_BLOCK
                    ..blocks + range.end.div_ceil(FREE_SUB_BLOCK);
                to_free[range.clone()].copy_from_slice(&free[range]);
                to_changed[block] = changed[block];
                to_changed[subs.clone()].copy_from_slice(&changed[subs]);
            }
        }
        Some((spare_free, spare_changed))
    }
}
