//! The GM's eventually consistent view of the data center.
//!
//! For each LM and each of its partitions: the partition's nodes, their free
//! resources as last reported (minus what this GM has since sent), one bit-vector per
//! machine constraint (bit `i` = node `i` of the partition has it) and one "has any
//! free resources" bit-vector. Bit-vectors are built once per topology; a snapshot
//! only rewrites free resources and the availability bits.
//!
//! For QUEUEABLE work each LM view also keeps every node's queuing-delay estimate in
//! a sorted index, updated only where a snapshot or a dispatch changes an estimate,
//! so that the top-k least-loaded nodes are found without scanning every node.

use bitvec::prelude::*;
use common::messages::{LmSnapshot, LmTopology};
use common::quota::JobContainers;
use common::{ConstraintSet, NodeId, Resources};
use common::{JobId, Micros};
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Arc;

pub type Bits = BitVec<u64, Lsb0>;

#[derive(Debug)]
pub struct PartitionView {
    /// LM node id of each slot.
    pub nodes: Vec<NodeId>,
    pub free: Vec<Resources>,
    pub capacity: Vec<Resources>,
    /// `constraint_bits[j]`: slots whose node has constraint `j`.
    pub constraint_bits: Vec<Bits>,
    /// Slots with something free in every dimension.
    pub available: Bits,
    /// Per slot: resources of `free` held by running QUEUEABLE work (reclaimable by
    /// killing it); all zero unless the LM reports QUEUEABLE work.
    pub q_held: Vec<Resources>,
    /// Times a slot gained resources (in some dimension) since the view was built:
    /// between two gains the partition only shrinks, so a shape it had no room for
    /// still finds none ([`crate::placement::megha`] remembers such misses).
    pub gains: u64,
}

impl PartitionView {
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Sets the free resources of a slot, keeping the availability bit in step.
    /// Returns true when the slot gained resources in some dimension.
    #[inline]
    pub fn set_free(&mut self, slot: usize, free: Resources) -> bool {
        let old = self.free[slot];
        self.free[slot] = free;
        // The word itself (`BitSlice::set` costs several times more).
        let word = &mut self.available.as_raw_mut_slice()[slot / 64];
        let bit = 1u64 << (slot % 64);
        *word = (*word & !bit) | (u64::from(!free.any_zero()) * bit);
        let gained = free.cpu_millis > old.cpu_millis || free.memory_mb > old.memory_mb;
        self.gains += u64::from(gained);
        gained
    }
}

/// Snapshots of a lower-numbered LM life, in a row, after which a view follows that
/// life: the life it held is silent (dead), and the new one was numbered from a clock
/// that is behind. Two live LMs with one id make the view flip (counted).
pub const TAKEOVER_AFTER: u32 = 3;

/// Nodes per block of a snapshot apply ([`LmView::apply`]): one word of `touched`,
/// one entry of [`LmSnapshot::free_changed`].
const BLOCK: usize = common::messages::FREE_BLOCK;

/// Nodes per sub-block ([`common::messages::FREE_SUB_BLOCK`]): one byte of a word of
/// `touched`, the unit [`LmView::overwrite`] compares.
const SUB: usize = common::messages::FREE_SUB_BLOCK;
const SUBS_PER_BLOCK: usize = BLOCK / SUB;
const _: () = assert!(SUBS_PER_BLOCK * SUB == BLOCK && SUBS_PER_BLOCK <= 8);

/// LM nodes `node..node + len`, at slots `slot..slot + len` of one partition.
#[derive(Clone, Copy, Debug)]
struct SlotRun {
    node: u32,
    partition: u16,
    slot: u32,
    len: u32,
}

/// The runs of `slot_of` (see [`LmView::runs`]) and, per sub-block, its first run.
fn slot_runs(slot_of: &[(u16, u32)]) -> (Vec<SlotRun>, Vec<u32>) {
    let mut runs: Vec<SlotRun> = Vec::new();
    let mut sub_runs = Vec::with_capacity(slot_of.len().div_ceil(SUB));
    for (n, &(partition, slot)) in slot_of.iter().enumerate() {
        let extends = runs.last().is_some_and(|run| {
            run.partition == partition && run.slot + run.len == slot && n % SUB != 0
        });
        match runs.last_mut() {
            Some(run) if extends => run.len += 1,
            _ => runs.push(SlotRun {
                node: n as u32,
                partition,
                slot,
                len: 1,
            }),
        }
        if n % SUB == 0 {
            sub_runs.push((runs.len() - 1) as u32);
        }
    }
    (runs, sub_runs)
}

/// Bit `i` set when `view[i]` differs from `now[i]` (slices of one length, at most
/// 32 long): branch-free, and unrolled for a whole sub-block (the usual case).
#[inline]
fn differing(view: &[Resources], now: &[Resources]) -> u32 {
    fn mask<'a>(pairs: impl Iterator<Item = (&'a Resources, &'a Resources)>) -> u32 {
        let mut differ = 0u32;
        for (i, (view, now)) in pairs.enumerate() {
            let differs = (view.cpu_millis ^ now.cpu_millis) | (view.memory_mb ^ now.memory_mb);
            differ |= u32::from(differs != 0) << i;
        }
        differ
    }
    match (
        <&[Resources; SUB]>::try_from(view),
        <&[Resources; SUB]>::try_from(now),
    ) {
        (Ok(view), Ok(now)) => mask(view.iter().zip(now)),
        _ => mask(view.iter().zip(now)),
    }
}

/// Bit `i` set when byte `i` of `word` is not zero (sub-block `i` of a block's
/// word of `touched`).
#[inline]
fn nonzero_bytes(word: u64) -> u8 {
    let mut mask = 0u8;
    for (i, byte) in word.to_le_bytes().into_iter().enumerate() {
        mask |= u8::from(byte != 0) << i;
    }
    mask
}

/// Bit `i` set when `changed[i] > since` (the sub-blocks of a block the LM changed
/// since the version applied).
#[inline]
fn newer(changed: &[u64], since: u64) -> u8 {
    let mut mask = 0u8;
    for (i, &v) in changed.iter().enumerate() {
        mask |= u8::from(v > since) << i;
    }
    mask
}

/// What [`LmView::apply_free`] knows of the last snapshot applied.
#[derive(Debug)]
struct Applied {
    life: u64,
    version: u64,
    /// Its length.
    nodes: usize,
    /// Its free resources, kept only when it came without
    /// [`LmSnapshot::free_changed`] (the next one is then compared by value).
    free: Option<Arc<Vec<Resources>>>,
}

#[derive(Debug)]
pub struct LmView {
    /// The LM life the view follows (see [`LmSnapshot::incarnation`]).
    pub incarnation: u64,
    /// Snapshots of another, lower-numbered life seen in a row since the last one of
    /// this life: at [`TAKEOVER_AFTER`] the view follows that life instead.
    pub other_life_streak: u32,
    pub version: u64,
    pub topology: Arc<LmTopology>,
    /// Indexed by GM id.
    pub partitions: Vec<PartitionView>,
    /// Per LM node: (partition, slot).
    pub slot_of: Vec<(u16, u32)>,
    /// The LM's nodes as runs of consecutive nodes in consecutive slots of one
    /// partition (none crossing a sub-block), in node order; `sub_runs[s]`: the
    /// first run with a node in sub-block `s` (see [`LmView::overwrite`]).
    runs: Vec<SlotRun>,
    sub_runs: Vec<u32>,
    /// The sum of the LM's node capacities.
    pub total_capacity: Resources,
    /// Resources in use per queue in this LM, as last reported.
    pub usage: Vec<(common::QueueId, Resources)>,
    /// Per LM node: the estimated queuing delay for QUEUEABLE work as last reported,
    /// plus what this GM has sent there since. Empty while every estimate is zero
    /// (views of LMs without QUEUEABLE work cost nothing).
    queue_delay: Vec<Micros>,
    /// (estimate, node) of every node, sorted: the top-k index (empty with
    /// `queue_delay`).
    delay_index: BTreeSet<(Micros, u32)>,
    /// Per job: its containers on this LM as last reported (for quotas).
    pub jobs: Arc<Vec<(JobId, JobContainers)>>,
    /// The last snapshot reported QUEUEABLE holdings.
    has_q_held: bool,
    /// LM nodes whose free resources grew since [`LmView::take_raised`] (each once;
    /// `raised_mark` tells which are listed).
    raised: Vec<u32>,
    raised_mark: Bits,
    /// The last snapshot applied (`None` before the first). Every node outside
    /// `touched` holds exactly its free resources in the view.
    applied_free: Option<Applied>,
    /// LM nodes this GM changed (deducted, credited) since the last snapshot applied.
    touched: Bits,
    /// Until when placement passes this LM by: it answered that it takes no new
    /// work for now (see `GmInput::Busy`). `None` for an LM that takes work.
    pub busy_until: Option<Micros>,
}

impl LmView {
    pub fn build(topology: Arc<LmTopology>) -> LmView {
        let width = topology
            .constraints
            .iter()
            .map(|c| c.width())
            .max()
            .unwrap_or(0);
        // Each partition's vectors are allocated once, at their size.
        let mut sizes = vec![0usize; topology.gms as usize];
        for home in &topology.home {
            sizes[home.index()] += 1;
        }
        let mut partitions: Vec<PartitionView> = sizes
            .iter()
            .map(|&n| PartitionView {
                nodes: Vec::with_capacity(n),
                free: Vec::with_capacity(n),
                capacity: Vec::with_capacity(n),
                constraint_bits: Vec::new(),
                available: Bits::new(),
                q_held: Vec::with_capacity(n),
                gains: 0,
            })
            .collect();
        let mut slot_of = Vec::with_capacity(topology.node_count());
        for (i, home) in topology.home.iter().enumerate() {
            let p = &mut partitions[home.index()];
            slot_of.push((home.0, p.nodes.len() as u32));
            p.nodes.push(NodeId(i as u32));
            p.free.push(topology.capacity[i]);
            p.capacity.push(topology.capacity[i]);
            p.q_held.push(Resources::ZERO);
        }
        for p in &mut partitions {
            // Word by word (`BitSlice::set` per bit was most of a build).
            let n = p.nodes.len();
            let words = n.div_ceil(64);
            let mut constraint_words = vec![vec![0u64; words]; width];
            let mut available = vec![0u64; words];
            for (slot, (node, free)) in p.nodes.iter().zip(&p.free).enumerate() {
                let (w, bit) = (slot / 64, 1u64 << (slot % 64));
                for j in topology.constraints[node.index()].iter() {
                    constraint_words[j][w] |= bit;
                }
                available[w] |= u64::from(!free.any_zero()) * bit;
            }
            let bits = |words: Vec<u64>| {
                let mut bits = Bits::from_vec(words);
                bits.truncate(n);
                bits
            };
            p.constraint_bits = constraint_words.into_iter().map(bits).collect();
            p.available = bits(available);
        }
        let total_capacity = topology.capacity.iter().sum::<Resources>();
        let node_count = topology.node_count();
        let (runs, sub_runs) = slot_runs(&slot_of);
        LmView {
            incarnation: 0,
            other_life_streak: 0,
            version: 0,
            topology,
            partitions,
            slot_of,
            runs,
            sub_runs,
            total_capacity,
            usage: Vec::new(),
            queue_delay: Vec::new(),
            delay_index: BTreeSet::new(),
            jobs: Arc::new(Vec::new()),
            has_q_held: false,
            raised: Vec::new(),
            raised_mark: bitvec![u64, Lsb0; 0; node_count],
            applied_free: None,
            touched: bitvec![u64, Lsb0; 0; node_count],
            busy_until: None,
        }
    }

    /// Overwrites free resources from a snapshot. Returns true when any node gained
    /// resources compared with the view (so queued tasks deserve another try).
    pub fn apply(&mut self, snapshot: &LmSnapshot) -> bool {
        let gained = self.apply_free(snapshot);
        self.incarnation = snapshot.incarnation;
        self.other_life_streak = 0;
        self.version = snapshot.version;
        self.usage.clone_from(&snapshot.usage);
        self.jobs = snapshot.jobs.clone();
        // Nothing to do when the LM reports no estimates and every node is at zero.
        let all_zero = self
            .delay_index
            .last()
            .is_none_or(|(d, _)| *d == Micros::ZERO);
        if !(snapshot.queue_delay.is_empty() && all_zero) {
            for n in 0..self.topology.node_count() {
                let reported = snapshot.queue_delay.get(n).copied().unwrap_or(Micros::ZERO);
                self.set_delay(n, reported);
            }
        }
        if !snapshot.queueable_held.is_empty() || self.has_q_held {
            self.has_q_held = !snapshot.queueable_held.is_empty();
            for (i, &(p, slot)) in self.slot_of.iter().enumerate() {
                let held = snapshot
                    .queueable_held
                    .get(i)
                    .copied()
                    .unwrap_or(Resources::ZERO);
                self.partitions[p as usize].q_held[slot as usize] = held;
            }
        }
        gained
    }

    /// Overwrites the view's free resources with a snapshot's, in node order, and
    /// lists the nodes that gained. Visits only the sub-blocks of [`SUB`] nodes where
    /// the snapshot differs from the last one applied or this GM changed a node since
    /// (`touched`): every other node already holds the snapshot's value, so the full
    /// walk would change nothing there. A sub-block differs when the LM says it
    /// changed since that snapshot ([`LmSnapshot::free_changes`], same life: its
    /// block, then its sub-block if the LM sends them, else every sub-block of a
    /// changed block) or, without that word, when its block's values differ (the
    /// view keeps the values of a snapshot that came without it). A snapshot of
    /// another size, the first one, or one without that word after one with it, is
    /// walked in full.
    fn apply_free(&mut self, snapshot: &LmSnapshot) -> bool {
        let free = &snapshot.free;
        let nodes = self.slot_of.len().min(free.len());
        let changes = snapshot.free_changes();
        let previous = self.applied_free.take();
        let previous = previous.as_ref().filter(|a| a.nodes == free.len());
        let same = previous.is_some_and(|a| a.free.as_ref().is_some_and(|p| Arc::ptr_eq(p, free)));
        // The LM's word for the blocks changed since the snapshot applied.
        let since = previous
            .filter(|a| a.life == snapshot.incarnation)
            .and(changes)
            .zip(previous.map(|a| a.version));
        let all = u8::MAX >> (8 - SUBS_PER_BLOCK);
        let mut gained = false;
        // Out of `self` while `overwrite` runs (read a word at a time).
        let mut touched_bits = std::mem::take(&mut self.touched);
        let touched_words = touched_bits.as_raw_slice();
        for block in 0..nodes.div_ceil(BLOCK) {
            let (start, end) = (block * BLOCK, ((block + 1) * BLOCK).min(nodes));
            let touched = touched_words.get(block).copied().unwrap_or(0);
            if let Some(((blocks, _), version)) = since {
                // The common case: neither the LM nor this GM changed the block.
                if blocks[block] <= version && touched == 0 {
                    continue;
                }
            }
            let differs = match (previous, since) {
                _ if same => 0,
                (_, Some(((blocks, _), version))) if blocks[block] <= version => 0,
                (_, Some(((_, Some(subs)), version))) => {
                    let first = block * SUBS_PER_BLOCK;
                    newer(
                        &subs[first..(first + SUBS_PER_BLOCK).min(subs.len())],
                        version,
                    )
                }
                (_, Some(((_, None), _))) => all,
                (Some(Applied { free: Some(p), .. }), None) => {
                    if p[start..end] != free[start..end] {
                        all
                    } else {
                        0
                    }
                }
                (_, None) => all,
            };
            let mut visit = differs
                | if touched != 0 {
                    nonzero_bytes(touched)
                } else {
                    0
                };
            while visit != 0 {
                let sub = block * SUBS_PER_BLOCK + visit.trailing_zeros() as usize;
                visit &= visit - 1;
                let range = sub * SUB..((sub + 1) * SUB).min(end);
                if !range.is_empty() {
                    gained |= self.overwrite(sub, range, free);
                }
            }
        }
        // A word at a time (`BitSlice::fill` went bit by bit: most of an apply).
        touched_bits.as_raw_mut_slice().fill(0);
        self.touched = touched_bits;
        debug_assert!(
            self.slot_of
                .iter()
                .zip(free.iter())
                .all(|(&(p, slot), f)| self.partitions[p as usize].free[slot as usize] == *f),
            "a skipped block of LM {:?} differs from its snapshot",
            self.topology.lm
        );
        self.applied_free = Some(Applied {
            life: snapshot.incarnation,
            version: snapshot.version,
            nodes: free.len(),
            // With the LM's word for changed blocks, the next snapshot of this life
            // needs no values to compare with: keeping none lets the LM build its
            // next snapshot in place of this one.
            free: changes.is_none().then(|| free.clone()),
        });
        gained
    }

    /// Overwrites the view's free resources of LM nodes `range` (in sub-block `sub`)
    /// with the snapshot's `free`, in node order, listing the nodes that gained.
    /// Returns whether one did. Each run of nodes that sit side by side in one
    /// partition is compared in one pass (most nodes are unchanged), then only the
    /// nodes that differ are written.
    fn overwrite(&mut self, sub: usize, range: Range<usize>, free: &[Resources]) -> bool {
        let mut gained = false;
        let mut r = self.sub_runs[sub] as usize;
        while let Some(run) = self
            .runs
            .get(r)
            .copied()
            .filter(|run| (run.node as usize) < range.end)
        {
            let (first, len) = (run.node as usize, run.len as usize);
            let (lo, hi) = (range.start.max(first), range.end.min(first + len));
            let slot = run.slot as usize + (lo - first);
            let part = &mut self.partitions[run.partition as usize];
            // One bit per node that differs (a run is at most one sub-block long).
            let mut differ = differing(&part.free[slot..slot + (hi - lo)], &free[lo..hi]);
            while differ != 0 {
                let i = differ.trailing_zeros() as usize;
                differ &= differ - 1;
                if part.set_free(slot + i, free[lo + i]) {
                    gained = true;
                    mark_raised(&mut self.raised, &mut self.raised_mark, lo + i);
                }
            }
            r += 1;
        }
        gained
    }

    /// The estimated queuing delay of a node (zero for an unknown node).
    pub fn delay(&self, node: usize) -> Micros {
        self.queue_delay.get(node).copied().unwrap_or(Micros::ZERO)
    }

    /// Sets a node's estimate, keeping the index in step.
    pub fn set_delay(&mut self, node: usize, delay: Micros) {
        if self.queue_delay.is_empty() {
            if delay == Micros::ZERO {
                return;
            }
            let nodes = self.topology.node_count();
            self.queue_delay = vec![Micros::ZERO; nodes];
            self.delay_index = (0..nodes as u32).map(|n| (Micros::ZERO, n)).collect();
        }
        let Some(old) = self.queue_delay.get_mut(node) else {
            return;
        };
        if *old == delay {
            return;
        }
        self.delay_index.remove(&(*old, node as u32));
        self.delay_index.insert((delay, node as u32));
        *old = delay;
    }

    /// Nodes in increasing order of estimate (ties by node id).
    pub fn by_delay(&self) -> impl Iterator<Item = (Micros, NodeId)> + '_ {
        // Before any estimate: every node at zero, in node order.
        let unbuilt = match self.queue_delay.is_empty() {
            true => self.topology.node_count() as u32,
            false => 0,
        };
        (0..unbuilt)
            .map(|n| (Micros::ZERO, NodeId(n)))
            .chain(self.delay_index.iter().map(|&(d, n)| (d, NodeId(n))))
    }

    /// Deducts resources from a node of the view (a launch this GM has sent).
    pub fn deduct(&mut self, node: NodeId, resources: &Resources) {
        if let Some(&(p, slot)) = self.slot_of.get(node.index()) {
            let part = &mut self.partitions[p as usize];
            let free = part.free[slot as usize].saturating_sub(resources);
            part.set_free(slot as usize, free);
            self.touched.set(node.index(), true);
        }
    }

    /// Gives back resources deducted for a launch that never reached the LM (capped
    /// at the node's capacity).
    pub fn credit(&mut self, node: NodeId, resources: &Resources) {
        if let Some(&(p, slot)) = self.slot_of.get(node.index()) {
            let part = &mut self.partitions[p as usize];
            let (slot, cap) = (slot as usize, part.capacity[slot as usize]);
            let free = part.free[slot].add(resources);
            let free = Resources::new(
                free.cpu_millis.min(cap.cpu_millis),
                free.memory_mb.min(cap.memory_mb),
            );
            self.touched.set(node.index(), true);
            if part.set_free(slot, free) {
                mark_raised(&mut self.raised, &mut self.raised_mark, node.index());
            }
        }
    }

    /// Every node counts as grown (placement passed the LM by while it was busy:
    /// tasks blocked meanwhile may fit on any of its nodes).
    pub fn raise_all(&mut self) {
        for n in 0..self.slot_of.len() {
            mark_raised(&mut self.raised, &mut self.raised_mark, n);
        }
    }

    /// Whether placement passes this LM by (see [`LmView::busy_until`]).
    pub fn is_busy(&self) -> bool {
        self.busy_until.is_some()
    }

    /// The nodes whose free resources grew since the last call, leaving out those
    /// with nothing free in some dimension (no task can use them: the constraint
    /// filter drops them too).
    pub fn take_raised(&mut self, lm: u16, into: &mut Vec<(u16, u32)>) {
        into.reserve(self.raised.len());
        for n in self.raised.drain(..) {
            self.raised_mark.set(n as usize, false);
            let (p, slot) = self.slot_of[n as usize];
            if !self.partitions[p as usize].free[slot as usize].any_zero() {
                into.push((lm, n));
            }
        }
    }

    /// The constraints and free resources of an LM node now.
    pub fn node_now(&self, n: u32) -> Option<(ConstraintSet, Resources)> {
        let &(p, slot) = self.slot_of.get(n as usize)?;
        let free = self.partitions[p as usize].free[slot as usize];
        Some((*self.topology.constraints.get(n as usize)?, free))
    }
}

/// Lists node `n` among the raised ones, once.
fn mark_raised(raised: &mut Vec<u32>, mark: &mut Bits, n: usize) {
    if let Some(false) = mark.get(n).map(|b| *b) {
        mark.set(n, true);
        raised.push(n as u32);
    }
}

#[cfg(test)]
#[path = "view_apply_tests.rs"]
mod apply_tests;
