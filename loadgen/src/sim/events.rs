//! The event queue of the discrete-event simulator: virtual time, ties broken by
//! insertion order, so that a run is a pure function of its inputs and seed.

use common::Micros;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A heap entry: when, the insertion order, and where the event waits. Events stay
/// put in [`EventQueue::slots`] while the heap moves these 24-byte keys (a message
/// event can be hundreds of bytes, and a sift moves an entry log(n) times).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    at: Micros,
    seq: u64,
    slot: u32,
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so the earliest (then first-inserted) pops first.
        // `seq` is unique, so `slot` never decides.
        other.at.cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Key>,
    /// The events by slot; `None` once popped (the slot is then in `free`).
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
    now: Micros,
}

impl<E> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("pending", &self.heap.len())
            .field("now", &self.now)
            .finish()
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            now: Micros::ZERO,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at` (never earlier than now).
    pub fn push(&mut self, at: Micros, event: E) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slots.push(Some(event));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 pending events")
            }
        };
        self.heap.push(Key {
            at: at.max(self.now),
            seq: self.seq,
            slot,
        });
    }

    pub fn pop(&mut self) -> Option<(Micros, E)> {
        let key = self.heap.pop()?;
        self.now = key.at;
        let event = self.slots[key.slot as usize]
            .take()
            .expect("a queued key's slot holds its event");
        self.free.push(key.slot);
        Some((key.at, event))
    }

    pub fn now(&self) -> Micros {
        self.now
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
