//! Constraint validation and the constraint manager's operator override.

#![allow(clippy::unwrap_used)]

use common::Resources;
use global_master::lra::*;

fn tags(t: &[&str]) -> TagSet {
    TagSet::new(t.iter().copied())
}

fn cluster() -> ClusterState {
    ClusterState::uniform(2, 2, Resources::cores(4, 4096))
}

#[test]
fn invalid_constraints_are_refused_with_the_field_named() {
    let groups = cluster().groups().clone();
    let bad_range = PlacementConstraint::cardinality(tags(&["a"]), tags(&["b"]), 3, 1, "rack");
    let err = bad_range.validate(&groups).unwrap_err().to_string();
    assert!(
        err.contains("any_of[0][0]") && err.contains("c_min 3 is above c_max 1"),
        "{err}"
    );

    let unknown = PlacementConstraint::affinity(tags(&["a"]), tags(&["b"]), "upgrade_domain");
    let err = unknown.validate(&groups).unwrap_err().to_string();
    assert!(
        err.contains("node_group") && err.contains("upgrade_domain"),
        "{err}"
    );

    let empty_subject = PlacementConstraint::affinity(TagSet::default(), tags(&["b"]), "node");
    let err = empty_subject.validate(&groups).unwrap_err().to_string();
    assert!(err.contains("subject_tag"), "{err}");

    let empty_target = PlacementConstraint::affinity(tags(&["a"]), tags(&[" "]), "node");
    let err = empty_target.validate(&groups).unwrap_err().to_string();
    assert!(err.contains("c_tag"), "{err}");

    let bad_weight =
        PlacementConstraint::affinity(tags(&["a"]), tags(&["b"]), "node").with_weight(f64::NAN);
    assert!(bad_weight
        .validate(&groups)
        .unwrap_err()
        .to_string()
        .contains("weight"));
}

#[test]
fn a_problem_with_an_invalid_application_constraint_is_refused() {
    let c = cluster();
    let lras = [LraRequest {
        id: LraId(4),
        containers: vec![ContainerRequest::new(Resources::cores(1, 1), ["a"])],
        constraints: vec![PlacementConstraint::affinity(
            tags(&["a"]),
            tags(&["a"]),
            "pod",
        )],
    }];
    let err = Problem::new(&c, &lras, &ConstraintManager::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("lra4") && err.contains("pod"), "{err}");
    let empty = [LraRequest {
        id: LraId(5),
        containers: vec![],
        constraints: vec![],
    }];
    let err = Problem::new(&c, &empty, &ConstraintManager::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("containers"), "{err}");
}

#[test]
fn bad_node_groups_are_refused() {
    let nodes = vec![NodeState::empty(Resources::cores(1, 1), 0); 2];
    let twice = NodeGroupSpec {
        name: "fault".into(),
        sets: vec![vec![0], vec![0, 1]],
    };
    let err = ClusterState::new(nodes.clone(), &[twice])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fault") && err.contains("more than one set"),
        "{err}"
    );
    let missing = NodeGroupSpec {
        name: "fault".into(),
        sets: vec![vec![5]],
    };
    assert!(ClusterState::new(nodes.clone(), &[missing]).is_err());
    let clash = NodeGroupSpec {
        name: "rack".into(),
        sets: vec![],
    };
    assert!(ClusterState::new(nodes, &[clash]).is_err());
}

fn app(min: u32, max: Option<u32>) -> LraRequest {
    LraRequest {
        id: LraId(1),
        containers: vec![ContainerRequest::new(Resources::cores(1, 1), ["spark"])],
        constraints: vec![PlacementConstraint::new(
            tags(&["spark"]),
            tags(&["spark"]),
            min,
            max,
            "rack",
        )],
    }
}

fn effective(op: PlacementConstraint, app: LraRequest) -> Vec<PlacementConstraint> {
    let c = cluster();
    let mut m = ConstraintManager::new();
    m.add_operator(op, c.groups()).unwrap();
    m.effective_for(&[app], c.groups()).unwrap()
}

#[test]
fn a_more_restrictive_operator_constraint_overrides_the_application() {
    let op = PlacementConstraint::cardinality(tags(&["spark"]), tags(&["spark"]), 0, 3, "rack");
    // Conflict: the application wants at least 4, the operator at most 3.
    let out = effective(op.clone(), app(4, None));
    assert_eq!(out, vec![op.clone()]);
    // Operator tighter on both ends than [0, 5]: replaced.
    let out = effective(op.clone(), app(0, Some(5)));
    assert_eq!(out, vec![op]);
}

#[test]
fn a_partly_looser_operator_constraint_only_tightens() {
    let op = PlacementConstraint::cardinality(tags(&["spark"]), tags(&["spark"]), 2, 10, "rack");
    let out = effective(op.clone(), app(0, Some(5)));
    assert_eq!(out.len(), 2);
    let tightened = out[0].simple().unwrap();
    assert_eq!((tightened.c_min, tightened.c_max), (2, Some(5)));
    assert_eq!(out[1], op);
}

#[test]
fn operator_constraints_on_other_targets_leave_the_application_alone() {
    let op = PlacementConstraint::cardinality(tags(&["spark"]), tags(&["hb"]), 0, 0, "rack");
    let a = app(1, None);
    let out = effective(op, a.clone());
    assert_eq!(out[0], a.constraints[0]);
}

#[test]
fn applications_can_be_registered_and_removed() {
    let c = cluster();
    let mut m = ConstraintManager::new();
    let a = app(1, None);
    m.add_application(a.id, a.constraints.clone(), c.groups())
        .unwrap();
    assert_eq!(m.effective_for(&[], c.groups()).unwrap().len(), 1);
    m.remove_application(a.id);
    assert!(m.effective_for(&[], c.groups()).unwrap().is_empty());
    let bad = vec![PlacementConstraint::affinity(
        tags(&["a"]),
        tags(&["b"]),
        "nowhere",
    )];
    assert!(m.add_application(LraId(2), bad, c.groups()).is_err());
}
