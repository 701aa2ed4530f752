//! LRA placement on tiny clusters whose optimum is known by hand: each constraint
//! kind, DNF, all-or-nothing, the ILP fallback, and quality metrics.

#![allow(clippy::unwrap_used)]

use common::{NodeId, Resources};
use global_master::lra::model::DeployedContainer;
use global_master::lra::*;

const ALL: [Placer; 4] = [
    Placer::Ilp(IlpConfig {
        time_limit_ms: 2000,
        max_candidate_nodes: 48,
        mip_rel_gap: 0.0,
    }),
    Placer::NodeCandidates,
    Placer::TagPopularity,
    Placer::Kube,
];

fn tags(t: &[&str]) -> TagSet {
    TagSet::new(t.iter().copied())
}

/// A node of `cores` / `cores` GiB in `rack`, running containers with these tags.
fn node(cores: u64, rack: u32, running: &[&[&str]]) -> NodeState {
    let mut n = NodeState::empty(Resources::cores(cores, cores * 1024), rack);
    for t in running {
        let r = Resources::cores(1, 1024);
        n.free = n.free.saturating_sub(&r);
        let mut tags: Vec<Tag> = t.iter().map(|s| Tag::from(*s)).collect();
        tags.sort();
        n.containers.push(DeployedContainer {
            lra: None,
            resources: r,
            tags,
        });
    }
    n
}

fn lra(id: u64, containers: &[&[&str]], constraints: Vec<PlacementConstraint>) -> LraRequest {
    LraRequest {
        id: LraId(id),
        containers: containers
            .iter()
            .map(|t| ContainerRequest::new(Resources::cores(1, 1024), t.iter().copied()))
            .collect(),
        constraints,
    }
}

fn placed(s: &Solution, i: usize) -> Vec<u32> {
    match &s.outcomes[i].1 {
        LraOutcome::Placed(nodes) => nodes.iter().map(|n| n.0).collect(),
        LraOutcome::NotPlaced(why) => {
            panic!("{} did not place {}: {why}", s.placer, s.outcomes[i].0)
        }
    }
}

fn solve_all(
    cluster: &ClusterState,
    lras: &[LraRequest],
    manager: &ConstraintManager,
) -> Vec<Solution> {
    let problem = Problem::new(cluster, lras, manager).expect("valid problem");
    ALL.iter()
        .map(|p| {
            let s = p.solve(&problem);
            s.check(&problem).expect("capacity respected");
            s
        })
        .collect()
}

#[test]
fn node_affinity_puts_the_container_next_to_its_target() {
    let cluster = ClusterState::new(
        vec![node(4, 0, &[]), node(4, 1, &[&["db"]]), node(4, 1, &[])],
        &[],
    )
    .unwrap();
    let c = PlacementConstraint::affinity(tags(&["web"]), tags(&["db"]), "node");
    let lras = [lra(1, &[&["web"]], vec![c])];
    for s in solve_all(&cluster, &lras, &ConstraintManager::new()) {
        assert_eq!(placed(&s, 0), vec![1], "{}", s.placer);
    }
}

#[test]
fn rack_anti_affinity_avoids_the_whole_rack() {
    // db runs on node 0 (rack 0); node 1 is also rack 0 and emptiest: only node 2 is right.
    let cluster = ClusterState::new(
        vec![node(2, 0, &[&["db"]]), node(8, 0, &[]), node(4, 1, &[])],
        &[],
    )
    .unwrap();
    let c = PlacementConstraint::anti_affinity(tags(&["web"]), tags(&["db"]), "rack");
    let lras = [lra(1, &[&["web"]], vec![c])];
    for s in solve_all(&cluster, &lras, &ConstraintManager::new()) {
        assert_eq!(placed(&s, 0), vec![2], "{}", s.placer);
    }
}

#[test]
fn cardinality_caps_containers_per_node() {
    // At most 2 workers per node (at most 1 *other*): 4 workers on 3 nodes of 4 cores.
    let cluster =
        ClusterState::new(vec![node(4, 0, &[]), node(4, 0, &[]), node(4, 0, &[])], &[]).unwrap();
    let c = PlacementConstraint::cardinality(tags(&["w"]), tags(&["w"]), 0, 1, "node");
    let lras = [lra(1, &[&["w"], &["w"], &["w"], &["w"]], vec![c])];
    let solutions = solve_all(&cluster, &lras, &ConstraintManager::new());
    for s in &solutions[..3] {
        let nodes = placed(s, 0);
        for n in 0..3 {
            assert!(
                nodes.iter().filter(|&&x| x == n).count() <= 2,
                "{}: {nodes:?}",
                s.placer
            );
        }
    }
}

#[test]
fn intra_application_rack_affinity_keeps_workers_together() {
    // Two racks of two 2-core nodes; 4 workers fit exactly in one rack.
    let cluster = ClusterState::new(
        vec![
            node(2, 0, &[]),
            node(2, 0, &[]),
            node(2, 1, &[]),
            node(2, 1, &[]),
        ],
        &[],
    )
    .unwrap();
    let mine = TagSet::new([app_tag(LraId(1)), Tag::from("w")]);
    let c = PlacementConstraint::cardinality(mine.clone(), mine, 3, 3, "rack");
    let lras = [lra(1, &[&["w"], &["w"], &["w"], &["w"]], vec![c])];
    for s in &solve_all(&cluster, &lras, &ConstraintManager::new())[..3] {
        let nodes = placed(s, 0);
        let racks: Vec<u32> = nodes.iter().map(|&n| n / 2).collect();
        assert!(
            racks.iter().all(|&r| r == racks[0]),
            "{}: {nodes:?}",
            s.placer
        );
    }
}

#[test]
fn dnf_takes_the_clause_that_can_be_met() {
    // web wants db OR cache on its node; db's node is full, cache's node has room.
    let cluster = ClusterState::new(
        vec![
            node(1, 0, &[&["db"]]),
            node(4, 0, &[&["cache"]]),
            node(8, 0, &[]),
        ],
        &[],
    )
    .unwrap();
    let c = PlacementConstraint::affinity(tags(&["web"]), tags(&["db"]), "node").or(
        PlacementConstraint::affinity(tags(&["web"]), tags(&["cache"]), "node"),
    );
    let lras = [lra(1, &[&["web"]], vec![c])];
    let solutions = solve_all(&cluster, &lras, &ConstraintManager::new());
    for s in &solutions[..3] {
        assert_eq!(placed(s, 0), vec![1], "{}", s.placer);
    }
}

#[test]
fn operator_groups_are_node_sets() {
    // Upgrade domains {0, 1} and {2}; hb already in domain 0: the new hb goes to node 2.
    let groups = [NodeGroupSpec {
        name: "upgrade_domain".into(),
        sets: vec![vec![0, 1], vec![2]],
    }];
    let cluster = ClusterState::new(
        vec![node(4, 0, &[&["hb"]]), node(8, 1, &[]), node(4, 2, &[])],
        &groups,
    )
    .unwrap();
    let c = PlacementConstraint::anti_affinity(tags(&["hb"]), tags(&["hb"]), "upgrade_domain");
    let lras = [lra(1, &[&["hb"]], vec![c])];
    for s in &solve_all(&cluster, &lras, &ConstraintManager::new())[..3] {
        assert_eq!(placed(s, 0), vec![2], "{}", s.placer);
    }
}

#[test]
fn an_lra_that_cannot_fit_places_nothing_and_says_why() {
    let cluster = ClusterState::new(vec![node(2, 0, &[]), node(2, 0, &[])], &[]).unwrap();
    let big = LraRequest {
        id: LraId(1),
        containers: vec![
            ContainerRequest::new(Resources::cores(2, 1024), ["a"]),
            ContainerRequest::new(Resources::cores(2, 1024), ["a"]),
            ContainerRequest::new(Resources::cores(2, 1024), ["a"]),
        ],
        constraints: vec![],
    };
    let huge = LraRequest {
        id: LraId(2),
        containers: vec![ContainerRequest::new(Resources::cores(3, 1024), ["b"])],
        constraints: vec![],
    };
    let lras = [big, huge];
    for s in solve_all(&cluster, &lras, &ConstraintManager::new()) {
        assert!(
            matches!(
                s.outcomes[0].1,
                LraOutcome::NotPlaced(NotPlaced::NoRoomLeft { .. })
            ),
            "{}: {:?}",
            s.placer,
            s.outcomes[0]
        );
        assert!(
            matches!(
                s.outcomes[1].1,
                LraOutcome::NotPlaced(NotPlaced::NoNodeFits { container: 0, .. })
            ),
            "{}: {:?}",
            s.placer,
            s.outcomes[1]
        );
    }
}

#[test]
fn all_or_nothing_keeps_the_room_for_the_lra_that_fits() {
    // 4 cores in all: a 5-container LRA cannot fit, a 3-container one can.
    let cluster = ClusterState::new(vec![node(2, 0, &[]), node(2, 1, &[])], &[]).unwrap();
    let lras = [
        lra(1, &[&["a"] as &[&str]; 5], vec![]),
        lra(2, &[&["b"] as &[&str]; 3], vec![]),
    ];
    for s in solve_all(&cluster, &lras, &ConstraintManager::new()) {
        assert!(
            matches!(s.outcomes[0].1, LraOutcome::NotPlaced(_)),
            "{}",
            s.placer
        );
        assert_eq!(placed(&s, 1).len(), 3, "{}", s.placer);
    }
}

#[test]
fn zero_time_cap_returns_the_heuristic_answer_marked_as_fallback() {
    let cluster = ClusterState::uniform(2, 3, Resources::cores(4, 4096));
    let c = PlacementConstraint::cardinality(tags(&["w"]), tags(&["w"]), 0, 1, "node");
    let lras = [lra(1, &[&["w"] as &[&str]; 4], vec![c])];
    let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).unwrap();
    let ilp = IlpPlacer::new(IlpConfig {
        time_limit_ms: 0,
        ..IlpConfig::default()
    })
    .solve(&problem);
    assert_eq!(ilp.fallback.as_deref(), Some("solver time cap is zero"));
    let nc = NodeCandidatesPlacer.solve(&problem);
    let tp = TagPopularityPlacer.solve(&problem);
    assert!(ilp.outcomes == nc.outcomes || ilp.outcomes == tp.outcomes);
    ilp.check(&problem).unwrap();
}

#[test]
fn a_tiny_time_cap_still_answers_within_capacity() {
    let cluster = ClusterState::uniform(4, 10, Resources::cores(8, 16384));
    let w = TagSet::new([app_tag(LraId(1)), Tag::from("w")]);
    let cs = vec![
        PlacementConstraint::affinity(w.clone(), w.clone(), "rack"),
        PlacementConstraint::cardinality(tags(&["w"]), tags(&["w"]), 0, 1, "node"),
    ];
    let lras = [lra(1, &[&["w"] as &[&str]; 10], cs)];
    let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).unwrap();
    let s = IlpPlacer::new(IlpConfig {
        time_limit_ms: 1,
        ..IlpConfig::default()
    })
    .solve(&problem);
    s.check(&problem).unwrap();
    assert_eq!(s.placed_lras(), 1);
}

#[test]
fn ilp_beats_one_at_a_time_on_inter_application_constraints() {
    // Two LRAs in one interval; b's containers must avoid a's node, and a prefers
    // nothing. Node 0 is the emptiest, so one-at-a-time puts a there and then b
    // has nowhere good only if... here both fit apart: the ILP must find it.
    let cluster = ClusterState::new(vec![node(2, 0, &[]), node(1, 0, &[])], &[]).unwrap();
    let anti = PlacementConstraint::anti_affinity(tags(&["b"]), tags(&["a"]), "node").hard();
    let lras = [
        lra(1, &[&["a"]], vec![]),
        lra(2, &[&["b"], &["b"]], vec![anti]),
    ];
    let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).unwrap();
    let s = ALL[0].solve(&problem);
    assert_eq!(placed(&s, 0), vec![1]);
    assert_eq!(placed(&s, 1), vec![0, 0]);
}

#[test]
fn quality_counts_violations_fragmentation_and_imbalance() {
    // Two workers on node 0 (max 1 other allowed: fine), three on node 1 (violating).
    let w: &[&str] = &["w"];
    let cluster =
        ClusterState::new(vec![node(8, 0, &[w, w]), node(3, 0, &[w, w, w])], &[]).unwrap();
    let c = PlacementConstraint::cardinality(tags(&["w"]), tags(&["w"]), 0, 1, "node");
    let q = quality(&cluster, &[c], &FRAGMENT_THRESHOLD);
    assert_eq!(q.containers, 5);
    assert_eq!(q.violating_containers, 3);
    assert!((q.violation_pct - 60.0).abs() < 1e-9);
    // node 1 is full (0 free): not fragmented; node 0 has 6 cores / 6 GiB free.
    assert_eq!(q.fragmented_nodes, 0);
    // utilisation 0.25 and 1.0: mean 0.625, sd 0.375.
    assert!(
        (q.memory_utilisation_cv - 0.6).abs() < 1e-9,
        "{}",
        q.memory_utilisation_cv
    );
}

#[test]
fn deploying_a_solution_updates_free_resources_and_tags() {
    let mut cluster = ClusterState::uniform(1, 2, Resources::cores(2, 2048));
    let lras = [lra(7, &[&["x"], &["x"]], vec![])];
    let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).unwrap();
    let s = Placer::NodeCandidates.solve(&problem);
    let nodes = placed(&s, 0);
    for (j, n) in nodes.iter().enumerate() {
        lras[0].deploy(&mut cluster, j, NodeId(*n)).unwrap();
    }
    let total: u32 = cluster
        .nodes()
        .iter()
        .map(|n| n.tag_cardinality(&TagSet::new([app_tag(LraId(7))])))
        .sum();
    assert_eq!(total, 2);
    assert_eq!(cluster.set_cardinality(1, 0, &tags(&["x"])), 2);
    assert!(lras[0].deploy(&mut cluster, 0, NodeId(9)).is_err());
}

#[test]
fn the_ilp_places_what_the_greedy_heuristics_lose_to_a_rolled_back_neighbour() {
    // Only node 0 can hold a 2-core container. The `c` containers violate their
    // (unsatisfiable) constraint everywhere, so the heuristics place them first:
    // lra0's `c` takes node 0, lra1's `c` finds no room and fails, then lra0's `b`
    // fails and lra0 is rolled back: nothing placed. The ILP places lra1.
    let cluster = ClusterState::new(vec![node(3, 0, &[]), node(1, 0, &[])], &[]).unwrap();
    let two = |t: &str| ContainerRequest::new(Resources::cores(2, 1024), [t]);
    let lost = PlacementConstraint::affinity(tags(&["c"]), tags(&["a"]), "rack");
    let lras = [
        LraRequest {
            id: LraId(0),
            containers: vec![two("b"), two("c")],
            constraints: vec![lost],
        },
        LraRequest {
            id: LraId(1),
            containers: vec![two("c")],
            constraints: vec![],
        },
    ];
    let problem = Problem::new(&cluster, &lras, &ConstraintManager::new()).unwrap();
    for greedy in [Placer::NodeCandidates, Placer::TagPopularity] {
        assert_eq!(greedy.solve(&problem).placed_lras(), 0, "{}", greedy.name());
    }
    let ilp = ALL[0].solve(&problem);
    assert_eq!(ilp.fallback, None);
    assert!(matches!(ilp.outcomes[0].1, LraOutcome::NotPlaced(_)));
    assert_eq!(placed(&ilp, 1), vec![0]);
    ilp.check(&problem).unwrap();
}
