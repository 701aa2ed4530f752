//! The designated GM's LRA path against a fake LM that validates launches like the
//! real one (free resources per node) and can lose resources to "another GM".

use super::{container_task, LraPassOutput, LraPathConfig, LraRefused, LraSubmission};
use crate::{GlobalMaster, GmConfig};
use common::messages::{LaunchBatch, LaunchOutcome, LaunchResponse, LmSnapshot, LmTopology};
use common::reasons::RejectReason;
use common::{ConstraintSet, GmId, LmId, Micros, NodeId, QueueId, Resources, TaskId};
use lra_placer::{
    ContainerRequest, LraId, LraRequest, NodeGroupSpec, PlacementConstraint, Placer, TagSet,
};
use std::collections::HashMap;
use std::sync::Arc;

/// One LM of `nodes` identical nodes, all in GM 0's partition.
struct FakeLm {
    topology: Arc<LmTopology>,
    free: Vec<Resources>,
    version: u64,
    applied: u64,
    running: HashMap<TaskId, (NodeId, Resources)>,
    rejected: u32,
}

impl FakeLm {
    fn new(nodes: usize, capacity: Resources) -> Self {
        FakeLm {
            topology: Arc::new(LmTopology {
                lm: LmId(0),
                gms: 1,
                home: vec![GmId(0); nodes],
                constraints: vec![ConstraintSet::EMPTY; nodes],
                capacity: vec![capacity; nodes],
            }),
            free: vec![capacity; nodes],
            version: 0,
            applied: 0,
            running: HashMap::new(),
            rejected: 0,
        }
    }

    fn snapshot(&mut self) -> LmSnapshot {
        self.version += 1;
        LmSnapshot {
            lm: LmId(0),
            incarnation: 1,
            version: self.version,
            taken_at: Micros::ZERO,
            topology: self.topology.clone(),
            free: Arc::new(self.free.clone()),
            free_changed: Arc::default(),
            applied_batches: vec![self.applied],
            usage: Vec::new(),
            queue_delay: Arc::default(),
            queueable_held: Arc::default(),
            jobs: Arc::default(),
        }
    }

    /// Validates every request against the true free resources.
    fn answer(&mut self, batch: &LaunchBatch) -> LaunchResponse {
        self.applied = batch.seq;
        let outcomes = batch
            .requests
            .iter()
            .map(|r| {
                let n = r.node.index();
                let outcome = match self.free[n].checked_sub(&r.task.resources) {
                    Some(left) => {
                        self.free[n] = left;
                        self.running.insert(r.task.id, (r.node, r.task.resources));
                        LaunchOutcome::Launched {
                            placement: r.placement,
                        }
                    }
                    None => {
                        self.rejected += 1;
                        LaunchOutcome::Rejected(RejectReason::InsufficientResources {
                            free: self.free[n],
                        })
                    }
                };
                (r.task.id, outcome)
            })
            .collect();
        LaunchResponse {
            lm: LmId(0),
            gm: batch.gm,
            seq: batch.seq,
            outcomes,
            snapshot: self.snapshot(),
        }
    }

    /// Work of another GM takes every free resource of `node`.
    fn fill(&mut self, node: NodeId) {
        self.free[node.index()] = Resources::ZERO;
    }

    fn finish(&mut self, task: TaskId) {
        if let Some((node, res)) = self.running.remove(&task) {
            self.free[node.index()] = self.free[node.index()].add(&res);
        }
    }
}

fn gm(placer: Placer, lm: &mut FakeLm) -> GlobalMaster {
    gm_with_groups(placer, lm, Vec::new())
}

fn gm_with_groups(placer: Placer, lm: &mut FakeLm, groups: Vec<NodeGroupSpec>) -> GlobalMaster {
    let config = GmConfig {
        lra: LraPathConfig {
            interval: Micros::from_secs(10),
            placer,
            nodes_per_rack: 2,
            groups: Arc::new(groups),
        },
        ..GmConfig::new(GmId(0), 1, 1)
    };
    let mut gm = GlobalMaster::new(config);
    gm.apply_snapshot(Micros::ZERO, &lm.snapshot());
    gm
}

/// `count` containers of `cores` cores tagged `tag`, with `constraints`.
fn lra(
    id: u64,
    count: usize,
    cores: u64,
    tag: &str,
    constraints: Vec<PlacementConstraint>,
) -> LraSubmission {
    LraSubmission {
        request: LraRequest {
            id: LraId(id),
            containers: vec![ContainerRequest::new(Resources::cores(cores, 100), [tag]); count],
            constraints,
        },
        queue: QueueId(0),
        durations: vec![Micros::from_secs(3600); count],
    }
}

/// At most one `tag` container per node, as a hard constraint.
fn spread(tag: &str) -> Vec<PlacementConstraint> {
    vec![PlacementConstraint::anti_affinity(TagSet::one(tag), TagSet::one(tag), "node").hard()]
}

fn nodes_of(gm: &GlobalMaster, id: u64, count: usize) -> Vec<Option<NodeId>> {
    let status = gm.lra_status(LraId(id)).expect("known LRA");
    assert_eq!(status.containers.len(), count);
    (0..count)
        .map(|j| {
            status.containers[j]
                .state
                .at()
                .filter(|_| status.containers[j].state.is_deployed())
                .map(|(_, n)| n)
        })
        .collect()
}

fn deliver(gm: &mut GlobalMaster, lm: &mut FakeLm, out: &LraPassOutput) {
    for batch in &out.pass.batches {
        let response = lm.answer(batch);
        gm.handle_response(Micros::ZERO, &response);
    }
}

#[test]
fn a_conflict_resubmits_the_refused_containers_which_are_placed_next_interval() {
    let mut lm = FakeLm::new(4, Resources::cores(2, 1000));
    let mut gm = gm(Placer::NodeCandidates, &mut lm);
    gm.submit_lra(Micros::ZERO, lra(1, 3, 1, "w", spread("w")))
        .expect("valid");
    let out = gm.lra_pass(Micros::ZERO).expect("due");
    assert_eq!(out.placed.len(), 1);
    let first = out.placed[0].1.clone();
    // Another GM takes the node of container 2 before the launch reaches the LM.
    let stolen = first[2].1;
    lm.fill(stolen);
    deliver(&mut gm, &mut lm, &out);
    assert_eq!(lm.rejected, 1);
    let stats = gm.stats().clone();
    assert_eq!((stats.lra_conflicts, stats.lra_resubmissions), (1, 1));
    let status = gm.lra_status(LraId(1)).expect("known");
    assert_eq!(status.state, "pending");
    assert!(
        status.reason.as_deref().unwrap_or("").contains("refused"),
        "{status:?}"
    );
    // The two launched containers stay where they are.
    assert_eq!(
        nodes_of(&gm, 1, 3)[..2],
        [Some(first[0].1), Some(first[1].1)]
    );
    // Not before the next interval.
    assert!(gm.lra_pass(Micros::from_secs(1)).is_none());
    let again = gm.lra_pass(Micros::from_secs(10)).expect("next interval");
    assert_eq!(again.placed.len(), 1);
    assert_eq!(again.placed[0].1.len(), 1, "only the refused container");
    deliver(&mut gm, &mut lm, &again);
    let status = gm.lra_status(LraId(1)).expect("known");
    assert_eq!(status.state, "running");
    let nodes: Vec<NodeId> = nodes_of(&gm, 1, 3).into_iter().flatten().collect();
    let mut distinct = nodes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        3,
        "anti-affinity holds across rounds: {nodes:?}"
    );
    assert!(!nodes.contains(&stolen));
    assert_eq!(gm.stats().lra_containers_launched, 3);
}

#[test]
fn an_infeasible_lra_launches_nothing_and_says_why_while_the_rest_is_placed() {
    let mut lm = FakeLm::new(2, Resources::cores(2, 1000));
    let mut gm = gm(Placer::Ilp(Default::default()), &mut lm);
    // Three two-core containers on two two-core nodes: never all together.
    gm.submit_lra(Micros::ZERO, lra(1, 3, 2, "big", vec![]))
        .expect("valid");
    gm.submit_lra(Micros::ZERO, lra(2, 1, 1, "small", vec![]))
        .expect("valid");
    let out = gm.lra_pass(Micros::ZERO).expect("due");
    let sent: Vec<TaskId> = out
        .pass
        .batches
        .iter()
        .flat_map(|b| b.requests.iter().map(|r| r.task.id))
        .collect();
    assert_eq!(sent, vec![container_task(LraId(2), 0)]);
    assert_eq!(out.waiting.len(), 1);
    assert_eq!(out.waiting[0].0, LraId(1));
    let status = gm.lra_status(LraId(1)).expect("known");
    assert_eq!(status.state, "pending");
    assert!(
        status
            .reason
            .as_deref()
            .unwrap_or("")
            .starts_with("not placed"),
        "{status:?}"
    );
    assert!(nodes_of(&gm, 1, 3).iter().all(Option::is_none));
    assert_eq!(gm.stats().lra_not_placed, 1);
    // It stays waiting and is tried again each interval.
    assert_eq!(gm.lras_waiting(), 1);
    deliver(&mut gm, &mut lm, &out);
    let next = gm.lra_pass(Micros::from_secs(10)).expect("retried");
    assert!(next.pass.batches.is_empty());
    assert_eq!(gm.stats().lra_not_placed, 2);
}

#[test]
fn lras_submitted_within_an_interval_are_placed_together() {
    let mut lm = FakeLm::new(4, Resources::cores(4, 1000));
    let mut gm = gm(Placer::TagPopularity, &mut lm);
    gm.submit_lra(Micros::ZERO, lra(1, 2, 1, "a", vec![]))
        .expect("valid");
    gm.submit_lra(Micros::ZERO, lra(2, 2, 1, "b", vec![]))
        .expect("valid");
    let out = gm.lra_pass(Micros::ZERO).expect("due");
    assert_eq!(out.placed.len(), 2, "one pass for both");
    deliver(&mut gm, &mut lm, &out);
    gm.submit_lra(Micros::from_secs(1), lra(3, 1, 1, "c", vec![]))
        .expect("valid");
    gm.submit_lra(Micros::from_secs(5), lra(4, 1, 1, "d", vec![]))
        .expect("valid");
    assert!(gm.lra_pass(Micros::from_secs(1)).is_none());
    assert!(gm.lra_pass(Micros::from_secs(9)).is_none());
    let out = gm
        .lra_pass(Micros::from_secs(10))
        .expect("interval elapsed");
    let ids: Vec<LraId> = out.placed.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![LraId(3), LraId(4)]);
    assert_eq!(gm.stats().lra_passes, 2);
    // Nothing waits: no pass at all.
    assert!(gm.lra_pass(Micros::from_secs(30)).is_none());
}

#[test]
fn placements_never_exceed_capacity_with_any_placer() {
    for placer in ["ilp", "nc", "tp", "j-kube"] {
        let mut lm = FakeLm::new(6, Resources::cores(4, 1000));
        let mut gm = gm(Placer::parse(placer).expect("placer"), &mut lm);
        let mut id = 0;
        for round in 0..4u64 {
            for k in 0..4u64 {
                id += 1;
                let cores = 1 + (id + k) % 3;
                let count = 1 + (id % 3) as usize;
                let constraints = if id % 2 == 0 { spread("s") } else { vec![] };
                gm.submit_lra(
                    Micros::from_secs(10 * round),
                    lra(id, count, cores, "s", constraints),
                )
                .expect("valid");
            }
            let Some(out) = gm.lra_pass(Micros::from_secs(10 * round)) else {
                continue;
            };
            deliver(&mut gm, &mut lm, &out);
            // The LM refused nothing: the GM never sent more than a node had free.
            assert_eq!(lm.rejected, 0, "{placer}: round {round}");
        }
        let used: Resources = lm.running.values().map(|(_, r)| *r).sum();
        assert!(used.cpu_millis > 0, "{placer}: something was placed");
        assert!(
            gm.stats().lra_not_placed > 0,
            "{placer}: the cluster filled up"
        );
    }
}

#[test]
fn ended_containers_stop_counting_for_anti_affinity() {
    let mut lm = FakeLm::new(1, Resources::cores(4, 1000));
    let mut gm = gm(Placer::Ilp(Default::default()), &mut lm);
    gm.submit_lra(Micros::ZERO, lra(1, 1, 1, "db", vec![]))
        .expect("valid");
    let out = gm.lra_pass(Micros::ZERO).expect("due");
    deliver(&mut gm, &mut lm, &out);
    // B must not share a node with a `db` container (hard).
    let away =
        vec![
            PlacementConstraint::anti_affinity(TagSet::one("web"), TagSet::one("db"), "node")
                .hard(),
        ];
    gm.submit_lra(Micros::ZERO, lra(2, 1, 1, "web", away))
        .expect("valid");
    let out = gm.lra_pass(Micros::from_secs(10)).expect("due");
    assert!(out.placed.is_empty(), "{:?}", out.placed);
    let db = container_task(LraId(1), 0);
    lm.finish(db);
    assert!(gm.lra_container_ended(Micros::from_secs(11), db));
    assert_eq!(gm.lra_status(LraId(1)).expect("known").state, "finished");
    gm.apply_snapshot(Micros::from_secs(11), &lm.snapshot());
    let out = gm.lra_pass(Micros::from_secs(20)).expect("due");
    assert_eq!(out.placed.len(), 1, "the db tag is gone");
    // An unknown task is not an LRA container.
    assert!(!gm.lra_container_ended(Micros::from_secs(21), TaskId::new(99, 0)));
}

#[test]
fn refusals_keep_nothing() {
    let mut lm = FakeLm::new(1, Resources::cores(4, 1000));
    let mut other = GlobalMaster::new(GmConfig {
        designated_gm: GmId(0),
        ..GmConfig::new(GmId(1), 2, 1)
    });
    assert!(matches!(
        other.submit_lra(Micros::ZERO, lra(1, 1, 1, "a", vec![])),
        Err(LraRefused::NotDesignated { designated: 0 })
    ));
    let mut gm = gm(Placer::NodeCandidates, &mut lm);
    let bad = vec![PlacementConstraint::cardinality(
        TagSet::one("a"),
        TagSet::one("a"),
        3,
        1,
        "node",
    )];
    let err = gm
        .submit_lra(Micros::ZERO, lra(1, 1, 1, "a", bad))
        .expect_err("c_min above c_max");
    assert!(
        err.to_string().contains("c_min 3 is above c_max 1"),
        "{err}"
    );
    let unknown = vec![PlacementConstraint::affinity(
        TagSet::one("a"),
        TagSet::one("a"),
        "zone",
    )];
    let err = gm
        .submit_lra(Micros::ZERO, lra(1, 1, 1, "a", unknown))
        .expect_err("unknown group");
    assert!(
        err.to_string().contains("unknown node group `zone`"),
        "{err}"
    );
    assert!(gm.lra_status(LraId(1)).is_none());
    gm.submit_lra(Micros::ZERO, lra(1, 1, 1, "a", vec![]))
        .expect("valid");
    assert_eq!(
        gm.submit_lra(Micros::ZERO, lra(1, 1, 1, "a", vec![])),
        Err(LraRefused::Duplicate(LraId(1)))
    );
    assert_eq!(gm.stats().lra_submitted, 1);
}

#[test]
fn operator_defined_groups_spread_an_lra_over_fault_domains() {
    // 4 nodes in 2 racks (nodes_per_rack 2); fault domains cut across the racks.
    let groups = vec![NodeGroupSpec {
        name: "fault".into(),
        sets: vec![vec![0, 2], vec![1, 3]],
    }];
    let mut lm = FakeLm::new(4, Resources::cores(4, 1000));
    let mut gm = gm_with_groups(Placer::NodeCandidates, &mut lm, groups);
    // At most one `w` per fault domain, and two per rack at most: the only way is
    // one container in each fault domain.
    let constraints =
        vec![
            PlacementConstraint::anti_affinity(TagSet::one("w"), TagSet::one("w"), "fault").hard(),
        ];
    gm.submit_lra(Micros::ZERO, lra(1, 2, 1, "w", constraints))
        .expect("the group is known");
    let out = gm.lra_pass(Micros::ZERO).expect("due");
    deliver(&mut gm, &mut lm, &out);
    let nodes: Vec<NodeId> = nodes_of(&gm, 1, 2).into_iter().flatten().collect();
    assert_eq!(nodes.len(), 2, "{out:?}");
    let domain = |n: &NodeId| n.0 % 2;
    assert_ne!(domain(&nodes[0]), domain(&nodes[1]), "{nodes:?}");
    // A group nobody configured is refused at submission.
    let unknown =
        vec![
            PlacementConstraint::anti_affinity(TagSet::one("v"), TagSet::one("v"), "upgrade")
                .hard(),
        ];
    assert!(gm
        .submit_lra(Micros::ZERO, lra(2, 2, 1, "v", unknown))
        .is_err());
}
