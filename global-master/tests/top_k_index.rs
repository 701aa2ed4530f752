//! The top-k index returns exactly the nodes the full scan returns, over random
//! views (several LMs, constraints, capacities, estimates with ties), random tasks,
//! caps and k, and after estimates change in place (snapshots, dispatches).

use common::messages::LmTopology;
use common::{ConstraintSet, GmId, LmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::opportunistic::{top_k, top_k_scan};
use global_master::core::view::LmView;
use proptest::prelude::*;
use std::sync::Arc;

fn view(lm: u16, nodes: &[(u8, u8, u16)]) -> LmView {
    let topo = LmTopology {
        lm: LmId(lm),
        gms: 1,
        home: vec![GmId(0); nodes.len()],
        constraints: nodes
            .iter()
            .map(|(c, _, _)| {
                ConstraintSet::from_ids((0..3).filter(|b| c & (1 << b) != 0))
                    .expect("constraint ids")
            })
            .collect(),
        capacity: nodes
            .iter()
            .map(|(_, cores, _)| Resources::cores(u64::from(*cores % 4 + 1), 1024))
            .collect(),
    };
    let mut v = LmView::build(Arc::new(topo));
    for (n, (_, _, delay)) in nodes.iter().enumerate() {
        // Coarse estimates, so that ties are common.
        v.set_delay(n, Micros(u64::from(*delay % 8) * 1000));
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn the_index_agrees_with_the_scan(
        lms in prop::collection::vec(prop::collection::vec((0u8..8, 0u8..4, any::<u16>()), 0..40), 1..5),
        missing in 0usize..6,
        wants in (0u8..8, 1u64..5),
        cap in prop::sample::select(vec![0.5, 0.75, 1.0]),
        k in 1usize..8,
        bumps in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u64..5000), 0..20),
    ) {
        let mut views: Vec<Option<LmView>> = lms
            .iter()
            .enumerate()
            .map(|(l, nodes)| (l != missing).then(|| view(l as u16, nodes)))
            .collect();
        let (c, cores) = wants;
        let task = TaskSpec::short(TaskId::new(1, 0), Resources::cores(cores, 1), Micros(1))
            .with_constraints(ConstraintSet::from_ids((0..3).filter(|b| c & (1 << b) != 0)).expect("constraint ids"));
        prop_assert_eq!(top_k(&views, &task, cap, k), top_k_scan(&views, &task, cap, k));
        for (l, n, add) in bumps {
            let l = l.index(views.len());
            if let Some(v) = views[l].as_mut() {
                let nodes = v.topology.node_count();
                if nodes > 0 {
                    let n = n.index(nodes);
                    let d = v.delay(n) + Micros(add);
                    v.set_delay(n, d);
                }
            }
            prop_assert_eq!(top_k(&views, &task, cap, k), top_k_scan(&views, &task, cap, k));
        }
    }
}
