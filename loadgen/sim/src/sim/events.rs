//! The event queue of the discrete-event simulator: virtual time, ties broken by
//! insertion order, so that a run is a pure function of its inputs and seed.
//!
//! A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan): the simulator never schedules an
//! event before the last one it took (`push` clamps to now), so the keys taken are
//! monotone. An event waits in the bucket of the highest bit in which its time
//! differs from the last time taken (bucket 0: the same time). Taking from an empty
//! bucket 0 finds the lowest non-empty bucket, makes its earliest time the last one
//! and spreads its entries over the lower buckets; an entry moves at most 64 times in
//! all, and in practice once or twice, against a binary heap's log n moves per pop.
//!
//! Ties keep insertion order: entries of equal time always share a bucket (a time's
//! bucket depends only on the time and the last time taken, and stays the same as
//! long as the entry is not spread), every bucket keeps its entries in the order they
//! came, spreading keeps that order, and bucket 0 is read front to back.

use common::Micros;

/// Buckets: 0 for the last time taken, `b` in 1..=64 for times whose highest bit
/// differing from it is `b - 1`.
const BUCKETS: usize = 65;

pub struct EventQueue<E> {
    /// Per bucket: (time, slot) in insertion order.
    buckets: Vec<Vec<(u64, u32)>>,
    /// Bit `b` set: bucket `b` holds an entry (bucket 0 counted from `head`).
    occupied: u128,
    /// Entries of bucket 0 before `head` were taken.
    head: usize,
    /// The time of the last event taken (the buckets' reference).
    last: u64,
    len: usize,
    /// The events by slot. Events stay put while the buckets move 16-byte entries.
    slots: Slots<E>,
}

/// Values by slot, for values that wait while small handles to them move: a slot is
/// reused once its value is taken, so a steady flow allocates nothing.
#[derive(Debug)]
pub struct Slots<T> {
    /// `None`: free (listed in `free`).
    values: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            values: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    /// Stores `value`; returns its slot.
    pub fn put(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.values[slot as usize] = Some(value);
                slot
            }
            None => {
                self.values.push(Some(value));
                u32::try_from(self.values.len() - 1).expect("fewer than 2^32 values waiting")
            }
        }
    }

    /// Takes the value at `slot` (which becomes free).
    pub fn take(&mut self, slot: u32) -> T {
        let value = self.values[slot as usize]
            .take()
            .expect("a taken slot holds its value");
        self.free.push(slot);
        value
    }

    /// The value at `slot`.
    pub fn get(&self, slot: u32) -> &T {
        self.values[slot as usize]
            .as_ref()
            .expect("a read slot holds its value")
    }
}

impl<E> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("pending", &self.len)
            .field("now", &self.now())
            .finish()
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: 0,
            head: 0,
            last: 0,
            len: 0,
            slots: Slots::default(),
        }
    }
}

/// The bucket of `time` relative to the last time taken.
fn bucket(time: u64, last: u64) -> usize {
    (u64::BITS - (time ^ last).leading_zeros()) as usize
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at` (never earlier than now).
    pub fn push(&mut self, at: Micros, event: E) {
        let slot = self.slots.put(event);
        let time = at.0.max(self.last);
        let b = bucket(time, self.last);
        self.buckets[b].push((time, slot));
        self.occupied |= 1 << b;
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<(Micros, E)> {
        if self.head == self.buckets[0].len() {
            self.refill()?;
        }
        let (time, slot) = self.buckets[0][self.head];
        self.head += 1;
        if self.head == self.buckets[0].len() {
            self.occupied &= !1;
        }
        self.len -= 1;
        let event = self.slots.take(slot);
        Some((Micros(time), event))
    }

    /// Bucket 0 is used up: makes the earliest time of the lowest non-empty bucket
    /// the last time and spreads that bucket over the lower ones. `None` if empty.
    fn refill(&mut self) -> Option<()> {
        self.buckets[0].clear();
        self.head = 0;
        self.occupied &= !1;
        if self.occupied == 0 {
            return None;
        }
        let b = self.occupied.trailing_zeros() as usize;
        let mut entries = std::mem::take(&mut self.buckets[b]);
        self.occupied &= !(1 << b);
        self.last = entries.iter().map(|&(t, _)| t).min().unwrap_or(self.last);
        for &(time, slot) in &entries {
            let to = bucket(time, self.last);
            debug_assert!(to < b, "spreading moves every entry down");
            self.buckets[to].push((time, slot));
            self.occupied |= 1 << to;
        }
        // Give the emptied bucket its allocation back (cleared), for its next entries.
        entries.clear();
        self.buckets[b] = entries;
        Some(())
    }

    pub fn now(&self) -> Micros {
        Micros(self.last)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Micros(5), "b");
        q.push(Micros(1), "a");
        q.push(Micros(5), "c");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, vec!["a", "b", "c"]);
    }

    #[test]
    fn reused_slots_keep_time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Micros(3), 1);
        q.push(Micros(9), 2);
        assert_eq!(q.pop(), Some((Micros(3), 1)));
        // Slot 0 is reused by a later event at an equal time: it still pops after
        // the earlier-inserted one.
        q.push(Micros(9), 3);
        q.push(Micros(1), 4); // never before now: runs at 3
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(Micros(3), 4), (Micros(9), 2), (Micros(9), 3)]);
        assert!(q.is_empty());
    }

    /// One step of a random schedule: push an event `delay` after now, or pop.
    #[derive(Debug, Clone)]
    enum Op {
        Push(u64),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Small delays make ties; large ones cross many buckets.
            3 => (0u64..4).prop_map(Op::Push),
            3 => (0u64..5_000).prop_map(Op::Push),
            1 => (0u64..u64::MAX / 4).prop_map(Op::Push),
            4 => Just(Op::Pop),
        ]
    }

    proptest! {
        /// The radix heap pops exactly what a binary heap ordered by (time, insertion)
        /// pops, for any schedule that never goes back in time.
        #[test]
        fn pops_what_a_heap_of_time_and_insertion_pops(ops in prop::collection::vec(op(), 1..400)) {
            let mut q = EventQueue::default();
            let mut reference = BinaryHeap::new();
            let mut now = 0u64;
            for (seq, op) in ops.iter().enumerate() {
                match op {
                    Op::Push(delay) => {
                        let at = now.saturating_add(*delay);
                        q.push(Micros(at), seq);
                        reference.push(std::cmp::Reverse((at, seq)));
                    }
                    Op::Pop => {
                        let want = reference.pop().map(|std::cmp::Reverse((at, seq))| (Micros(at), seq));
                        let got = q.pop();
                        prop_assert_eq!(got, want);
                        if let Some((at, _)) = got {
                            now = at.0;
                        }
                    }
                }
                prop_assert_eq!(q.len(), reference.len());
            }
            while let Some(std::cmp::Reverse((at, seq))) = reference.pop() {
                prop_assert_eq!(q.pop(), Some((Micros(at), seq)));
            }
            prop_assert!(q.pop().is_none());
        }
    }
}
