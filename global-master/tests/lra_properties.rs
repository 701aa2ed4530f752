//! Property: on random small problems every placer answers every LRA, places all or
//! none of each LRA's containers, and never overcommits a node in any dimension.

#![allow(clippy::unwrap_used)]

use common::Resources;
use global_master::lra::*;
use proptest::prelude::*;

const TAGS: [&str; 3] = ["a", "b", "c"];
const GROUPS: [&str; 2] = ["node", "rack"];

fn cluster() -> impl Strategy<Value = ClusterState> {
    prop::collection::vec((1u64..6, 1u64..6, 0u32..3), 1..7).prop_map(|nodes| {
        let nodes = nodes
            .into_iter()
            .map(|(cpu, mem, rack)| NodeState::empty(Resources::cores(cpu, mem * 1024), rack))
            .collect();
        ClusterState::new(nodes, &[]).expect("generated cluster is valid")
    })
}

fn constraint() -> impl Strategy<Value = PlacementConstraint> {
    (
        0usize..3,
        0usize..3,
        0u32..3,
        prop::option::of(0u32..3),
        0usize..2,
        any::<bool>(),
    )
        .prop_map(|(s, t, min, extra, g, compound)| {
            let max = extra.map(|e| min + e);
            let c = PlacementConstraint::new(
                TagSet::one(TAGS[s]),
                TagSet::one(TAGS[t]),
                min,
                max,
                GROUPS[g],
            );
            if compound {
                c.or(PlacementConstraint::anti_affinity(
                    TagSet::one(TAGS[s]),
                    TagSet::one(TAGS[(t + 1) % 3]),
                    "node",
                ))
            } else {
                c
            }
        })
}

fn lras() -> impl Strategy<Value = Vec<LraRequest>> {
    let container = (1u64..4, 1u64..4, 0usize..3).prop_map(|(cpu, mem, t)| {
        ContainerRequest::new(Resources::cores(cpu, mem * 1024), [TAGS[t]])
    });
    prop::collection::vec(
        (
            prop::collection::vec(container, 1..4),
            prop::collection::vec(constraint(), 0..3),
        ),
        1..4,
    )
    .prop_map(|apps| {
        apps.into_iter()
            .enumerate()
            .map(|(i, (containers, constraints))| LraRequest {
                id: LraId(i as u64),
                containers,
                constraints,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn placements_respect_capacity_and_are_all_or_nothing(cluster in cluster(), lras in lras()) {
        let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).expect("valid problem");
        let placers = [
            Placer::Ilp(IlpConfig { time_limit_ms: 500, ..IlpConfig::default() }),
            Placer::NodeCandidates,
            Placer::TagPopularity,
            Placer::Kube,
        ];
        for placer in placers {
            let s = placer.solve(&problem);
            prop_assert!(s.check(&problem).is_ok(), "{}: {:?}", placer.name(), s.check(&problem));
            for ((_, outcome), lra) in s.outcomes.iter().zip(&lras) {
                if let LraOutcome::Placed(nodes) = outcome {
                    prop_assert_eq!(nodes.len(), lra.containers.len());
                }
            }
        }
    }

    /// Without constraints nothing can outweigh placing an application (w1 / k is at
    /// least 1/3 here, fragmentation at most w3 = 0.25), so the ILP places at least as
    /// many as the heuristic it started from.
    #[test]
    fn unconstrained_the_ilp_places_at_least_as_many_as_its_heuristics(cluster in cluster(), mut lras in lras()) {
        for l in &mut lras {
            l.constraints.clear();
        }
        let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).expect("valid problem");
        let ilp = IlpPlacer::new(IlpConfig { time_limit_ms: 500, ..IlpConfig::default() }).solve(&problem);
        let nc = NodeCandidatesPlacer.solve(&problem);
        let tp = TagPopularityPlacer.solve(&problem);
        prop_assert!(ilp.placed_lras() >= nc.placed_lras().max(tp.placed_lras()));
    }
}
