//! Small hand-built views for the stage tests.

use crate::view::{LmView, PartitionView};
use common::messages::LmTopology;
use common::{ConstraintSet, GmId, LmId, Resources};
use std::sync::Arc;

/// An LM of `n` nodes, all in GM 0's partition unless `homes` says otherwise; node i
/// has constraint 0 when i is odd, constraint 1 when i % 3 == 0; all have 2 cores.
pub fn view_with_homes(homes: Vec<GmId>, gms: u16) -> LmView {
    let n = homes.len();
    let topo = LmTopology {
        lm: LmId(0),
        gms,
        home: homes,
        constraints: (0..n)
            .map(|i| {
                let mut c = ConstraintSet::EMPTY;
                if i % 2 == 1 {
                    c.insert(0);
                }
                if i % 3 == 0 {
                    c.insert(1);
                }
                c
            })
            .collect(),
        capacity: vec![Resources::cores(2, 100); n],
    };
    LmView::build(Arc::new(topo))
}

/// [`view_with_homes`] with one GM.
pub fn view(n: usize) -> LmView {
    view_with_homes(vec![GmId(0); n], 1)
}

/// The one partition of [`view`].
pub fn partition(n: usize) -> PartitionView {
    view(n).partitions.remove(0)
}

/// A task shape: constraint ids and cores (1 MB of memory).
pub fn shape(ids: &[u64], cores: u64) -> (ConstraintSet, Resources) {
    (
        ConstraintSet::from_ids(ids.iter().copied()).unwrap(),
        Resources::cores(cores, 1),
    )
}
