//! The block-skipping snapshot apply ([`LmView::apply`]) leaves the view exactly as
//! the walk over every node did: same free resources and availability bits, same
//! "gained" answers, same raised nodes in the same order, over random sequences of
//! snapshots (new, shared with the last one, a few nodes changed; some never reach
//! this GM; without the LM's `free_changed`, with its blocks alone or with its
//! blocks and sub-blocks, of one life or a new one) mixed with this GM's deductions
//! and credits, on LMs of up to five blocks.

use super::{LmView, PartitionView};
use common::messages::{LmSnapshot, LmTopology};
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, Resources};
use proptest::prelude::*;
use std::sync::Arc;

/// What a snapshot's `free_changed` holds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Word {
    None,
    Blocks,
    Subs,
}

/// What happens to the view next.
#[derive(Clone, Debug)]
enum Op {
    /// A snapshot with every node drawn anew (delivered to this GM or not).
    Fresh(Vec<(u64, u64)>, bool),
    /// The very same snapshot vector again (an LM whose state did not change).
    Same,
    /// The last snapshot with a few nodes changed (delivered or not).
    Edit(Vec<(prop::sample::Index, (u64, u64))>, bool),
    /// The LM restarts: a new life, its blocks' versions start anew.
    NewLife,
    /// The next snapshots come without `free_changed` (an older LM), with its
    /// blocks alone (an LM before sub-blocks), or with blocks and sub-blocks.
    Word(Word),
    /// A snapshot one node shorter than the LM (a malformed one).
    Short,
    Deduct(prop::sample::Index, (u64, u64)),
    Credit(prop::sample::Index, (u64, u64)),
    TakeRaised,
}

fn res((cpu, mem): (u64, u64)) -> Resources {
    Resources::new(cpu * 500, mem * 256)
}

fn op(nodes: usize) -> impl Strategy<Value = Op> {
    let amount = (0u64..4, 0u64..3);
    prop_oneof![
        (
            prop::collection::vec(amount.clone(), nodes),
            prop::bool::weighted(0.8)
        )
            .prop_map(|(all, sent)| Op::Fresh(all, sent)),
        Just(Op::Same),
        (
            prop::collection::vec((any::<prop::sample::Index>(), amount.clone()), 0..4),
            prop::bool::weighted(0.8)
        )
            .prop_map(|(edits, sent)| Op::Edit(edits, sent)),
        Just(Op::NewLife),
        prop_oneof![Just(Word::None), Just(Word::Blocks), Just(Word::Subs)].prop_map(Op::Word),
        Just(Op::Short),
        (any::<prop::sample::Index>(), amount.clone()).prop_map(|(n, a)| Op::Deduct(n, a)),
        (any::<prop::sample::Index>(), amount).prop_map(|(n, a)| Op::Credit(n, a)),
        Just(Op::TakeRaised),
    ]
}

/// The walk over every node, as `apply` did it before blocks were skipped.
#[derive(Clone)]
struct Reference {
    free: Vec<Resources>,
    capacity: Vec<Resources>,
    raised: Vec<u32>,
}

impl Reference {
    fn set(&mut self, n: usize, free: Resources) -> bool {
        let old = std::mem::replace(&mut self.free[n], free);
        let gained = free.cpu_millis > old.cpu_millis || free.memory_mb > old.memory_mb;
        if gained && !self.raised.contains(&(n as u32)) {
            self.raised.push(n as u32);
        }
        gained
    }

    fn apply(&mut self, snapshot: &[Resources]) -> bool {
        let mut gained = false;
        for (n, f) in snapshot.iter().enumerate().take(self.free.len()) {
            if self.free[n] != *f && self.set(n, *f) {
                gained = true;
            }
        }
        gained
    }
}

/// What the LM built last: its life, version, free resources and per block (64
/// nodes) and per sub-block (8 nodes) the version that last changed it (computed
/// here independently of the LM's code).
struct Built {
    life: u64,
    version: u64,
    free: Arc<Vec<Resources>>,
    changed: Vec<u64>,
    subs: Vec<u64>,
}

/// Per chunk of `size` nodes: `version` where `free` differs from `old`.
fn mark(changed: &mut Vec<u64>, size: usize, old: &[Resources], free: &[Resources], version: u64) {
    if free.len() != old.len() {
        *changed = vec![version; free.len().div_ceil(size)];
        return;
    }
    for (b, v) in changed.iter_mut().enumerate() {
        let r = b * size..((b + 1) * size).min(free.len());
        if free[r.clone()] != old[r] {
            *v = version;
        }
    }
}

impl Built {
    fn new(life: u64) -> Built {
        Built {
            life,
            version: 0,
            free: Arc::new(Vec::new()),
            changed: Vec::new(),
            subs: Vec::new(),
        }
    }

    fn next(&mut self, free: Arc<Vec<Resources>>) {
        self.version += 1;
        mark(&mut self.changed, 64, &self.free, &free, self.version);
        mark(&mut self.subs, 8, &self.free, &free, self.version);
        self.free = free;
    }

    fn snapshot(&self, topology: &Arc<LmTopology>, word: Word) -> LmSnapshot {
        LmSnapshot {
            incarnation: self.life,
            version: self.version,
            free_changed: Arc::new(match word {
                Word::None => Vec::new(),
                Word::Blocks => self.changed.clone(),
                Word::Subs => self.changed.iter().chain(&self.subs).copied().collect(),
            }),
            ..snapshot(topology, self.version, self.free.clone())
        }
    }
}

fn snapshot(topology: &Arc<LmTopology>, version: u64, free: Arc<Vec<Resources>>) -> LmSnapshot {
    LmSnapshot {
        lm: LmId(0),
        incarnation: 1,
        version,
        taken_at: Micros(version),
        topology: topology.clone(),
        free,
        free_changed: Arc::default(),
        applied_batches: vec![0; topology.gms as usize],
        usage: Vec::new(),
        queue_delay: Arc::default(),
        queueable_held: Arc::default(),
        jobs: Arc::default(),
    }
}

fn available_ok(p: &PartitionView) -> bool {
    (0..p.len()).all(|s| p.available[s] != p.free[s].any_zero())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn skipping_blocks_changes_nothing(
        (homes, ops) in (1usize..330).prop_flat_map(|nodes| (
            prop::collection::vec(0u16..3, nodes),
            prop::collection::vec(op(nodes), 1..40),
        )),
    ) {
        let nodes = homes.len();
        let capacity = vec![res((3, 2)); nodes];
        let topology = Arc::new(LmTopology {
            lm: LmId(0),
            gms: 3,
            home: homes.iter().map(|h| GmId(*h)).collect(),
            constraints: vec![ConstraintSet::EMPTY; nodes],
            capacity: capacity.clone(),
        });
        let mut view = LmView::build(topology.clone());
        let mut reference = Reference { free: capacity.clone(), capacity, raised: Vec::new() };
        let mut built = Built::new(1);
        built.next(Arc::new(reference.free.clone()));
        let mut word = Word::Subs;
        for op in ops {
            let last = built.free.clone();
            let sent = match op {
                Op::Fresh(all, sent) => {
                    built.next(Arc::new(all.into_iter().map(res).collect()));
                    sent.then(|| built.free.clone())
                }
                Op::Same => Some(last.clone()),
                Op::Edit(edits, sent) => {
                    let mut free = (*last).clone();
                    for (n, a) in edits {
                        free[n.index(nodes)] = res(a);
                    }
                    built.next(Arc::new(free));
                    sent.then(|| built.free.clone())
                }
                Op::NewLife => {
                    built = Built::new(built.life + 1);
                    built.next(last.clone());
                    Some(built.free.clone())
                }
                Op::Word(on) => {
                    word = on;
                    None
                }
                Op::Short => {
                    built.next(Arc::new(last[..nodes - 1].to_vec()));
                    let short = built.free.clone();
                    // The LM goes back to its full size at once.
                    built.next(last.clone());
                    Some(short)
                }
                Op::Deduct(n, a) => {
                    let n = n.index(nodes);
                    view.deduct(NodeId(n as u32), &res(a));
                    let free = reference.free[n].saturating_sub(&res(a));
                    reference.set(n, free);
                    None
                }
                Op::Credit(n, a) => {
                    let n = n.index(nodes);
                    view.credit(NodeId(n as u32), &res(a));
                    let cap = reference.capacity[n];
                    let free = reference.free[n].add(&res(a));
                    let free = Resources::new(free.cpu_millis.min(cap.cpu_millis), free.memory_mb.min(cap.memory_mb));
                    reference.set(n, free);
                    None
                }
                Op::TakeRaised => {
                    let mut got = Vec::new();
                    view.take_raised(0, &mut got);
                    let want: Vec<(u16, u32)> = std::mem::take(&mut reference.raised)
                        .into_iter()
                        .filter(|&n| !reference.free[n as usize].any_zero())
                        .map(|n| (0, n))
                        .collect();
                    prop_assert_eq!(got, want);
                    None
                }
            };
            if let Some(free) = sent {
                let mut snapshot = built.snapshot(&topology, word);
                if !Arc::ptr_eq(&free, &built.free) {
                    // The short one, sent after the LM built its next.
                    snapshot = LmSnapshot { version: built.version - 1, free_changed: Arc::default(), ..snapshot };
                    snapshot.free = free.clone();
                }
                let gained = view.apply(&snapshot);
                prop_assert_eq!(gained, reference.apply(&free));
            }
            for n in 0..nodes {
                prop_assert_eq!(view.node_now(n as u32).map(|(_, f)| f), Some(reference.free[n]), "node {}", n);
            }
            prop_assert!(view.partitions.iter().all(available_ok));
            prop_assert_eq!(&view.raised, &reference.raised);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    /// A view built word by word holds, per partition slot, the bits of its node's
    /// constraints and of its free resources (as setting them bit by bit did).
    #[test]
    fn a_built_view_has_the_bits_of_its_nodes(
        nodes in prop::collection::vec((0u16..3, any::<u64>(), (0u64..3, 0u64..3)), 0..200),
    ) {
        let topology = Arc::new(LmTopology {
            lm: LmId(0),
            gms: 3,
            home: nodes.iter().map(|n| GmId(n.0)).collect(),
            constraints: nodes.iter().map(|n| ConstraintSet(n.1 & (n.1 >> 7))).collect(),
            capacity: nodes.iter().map(|n| res(n.2)).collect(),
        });
        let view = LmView::build(topology.clone());
        let width = topology.constraints.iter().map(|c| c.width()).max().unwrap_or(0);
        for p in &view.partitions {
            prop_assert_eq!(p.available.len(), p.len());
            prop_assert_eq!(p.gains, 0);
            prop_assert_eq!(p.constraint_bits.len(), width);
            for (slot, node) in p.nodes.iter().enumerate() {
                prop_assert_eq!(p.available[slot], !topology.capacity[node.index()].any_zero());
                for (j, bits) in p.constraint_bits.iter().enumerate() {
                    prop_assert_eq!(bits.len(), p.len());
                    prop_assert_eq!(bits[slot], topology.constraints[node.index()].0 >> j & 1 == 1);
                }
            }
        }
    }
}
