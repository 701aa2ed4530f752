//! Table tests of every operator and template against hand-computed utilities, of
//! the greedy ranking, and of validation paths.

use crate::attributes::Attributes;
use crate::utility::{compile, Utility, UtilityTree};
use crate::ConstraintSet;

/// Bits: gpu 0, ssd 1, rack=r0 2, rack=r1 3, rack=r2 4.
fn names() -> Attributes {
    let mut a = Attributes::new();
    for (n, b) in [
        ("gpu", 0),
        ("ssd", 1),
        ("rack=r0", 2),
        ("rack=r1", 3),
        ("rack=r2", 4),
    ] {
        a.name_bit(n, b).unwrap();
    }
    a
}

fn tree(json: &str, tasks: u32) -> Utility {
    let t: UtilityTree = serde_json::from_str(json).unwrap();
    compile(&t, &names(), tasks, "utility").unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn node(ids: &[u64]) -> ConstraintSet {
    ConstraintSet::from_ids(ids.iter().copied()).unwrap()
}

const GPU3_SSD4: &str =
    r#"{"nCk": {"set": "gpu", "k": 1, "u": 3}}, {"LnCk": {"set": "ssd", "k": 2, "u": 4}}"#;

#[test]
fn every_operator_against_hand_computed_utilities() {
    let max = format!(r#"{{"max": [{GPU3_SSD4}]}}"#);
    let min = format!(r#"{{"min": [{GPU3_SSD4}]}}"#);
    let sum = format!(r#"{{"sum": [{GPU3_SSD4}]}}"#);
    // (tree, tasks of the job, tasks per leaf, utility)
    let table: &[(&str, u32, &[u32], f64)] = &[
        (r#"{"nCk": {"set": "gpu", "k": 2, "u": 10}}"#, 4, &[0], 0.0),
        (r#"{"nCk": {"set": "gpu", "k": 2, "u": 10}}"#, 4, &[1], 0.0),
        (r#"{"nCk": {"set": "gpu", "k": 2, "u": 10}}"#, 4, &[2], 10.0),
        (r#"{"nCk": {"set": "gpu", "k": 2, "u": 10}}"#, 4, &[3], 10.0),
        (r#"{"LnCk": {"set": "gpu", "k": 4, "u": 8}}"#, 5, &[1], 2.0),
        (r#"{"LnCk": {"set": "gpu", "k": 4, "u": 8}}"#, 5, &[3], 6.0),
        (r#"{"LnCk": {"set": "gpu", "k": 4, "u": 8}}"#, 5, &[5], 8.0),
        (&max, 4, &[0, 0], 0.0),
        (&max, 4, &[1, 1], 3.0),
        (&max, 4, &[0, 1], 2.0),
        (&max, 4, &[1, 2], 4.0),
        (&min, 4, &[1, 1], 2.0),
        (&min, 4, &[1, 0], 0.0),
        (&min, 4, &[1, 2], 3.0),
        (&sum, 4, &[1, 1], 5.0),
        (&sum, 4, &[0, 2], 4.0),
        (
            r#"{"scale": {"s": 2.5, "child": {"nCk": {"set": "gpu", "k": 1, "u": 4}}}}"#,
            2,
            &[1],
            10.0,
        ),
        (
            r#"{"barrier": {"b": 5, "child": {"LnCk": {"set": "gpu", "k": 4, "u": 8}}}}"#,
            4,
            &[2],
            0.0,
        ),
        (
            r#"{"barrier": {"b": 5, "child": {"LnCk": {"set": "gpu", "k": 4, "u": 8}}}}"#,
            4,
            &[3],
            5.0,
        ),
        (r#"{"prefer": {"set": "gpu"}}"#, 4, &[2], 0.5),
        (
            r#"{"prefer": {"set": "gpu", "else": "ssd"}}"#,
            4,
            &[2, 2],
            0.75,
        ),
        (r#"{"same": {"attr": "rack"}}"#, 2, &[1, 1, 0], 0.0),
        (r#"{"same": {"attr": "rack"}}"#, 2, &[0, 2, 0], 1.0),
        (
            r#"{"spread": {"attr": "rack", "k": 2}}"#,
            3,
            &[1, 1, 0],
            1.0,
        ),
        (
            r#"{"spread": {"attr": "rack", "k": 2}}"#,
            3,
            &[3, 0, 0],
            0.5,
        ),
        (
            r#"{"spread": {"attr": "rack", "k": 2}}"#,
            3,
            &[1, 1, 1],
            1.5,
        ),
    ];
    for (json, tasks, counts, want) in table {
        let got = tree(json, *tasks).value(counts);
        assert!((got - want).abs() < 1e-9, "{json} at {counts:?}: {got}");
    }
}

#[test]
fn the_least_relax_after_of_the_tree_is_kept() {
    let table: &[(&str, Option<u64>)] = &[
        (r#"{"prefer": {"set": "gpu"}}"#, None),
        (
            r#"{"prefer": {"set": "gpu", "relax_after_s": 2.5}}"#,
            Some(2_500_000),
        ),
        (
            r#"{"max": [{"nCk": {"set": "gpu", "k": 1, "u": 1, "relax_after_s": 4}},
                        {"prefer": {"set": "ssd", "relax_after_s": 3}}]}"#,
            Some(3_000_000),
        ),
    ];
    for (json, want) in table {
        assert_eq!(tree(json, 2).relax_after_us, *want, "{json}");
    }
    let passes = tree(
        r#"{"max": [{"prefer": {"set": "gpu", "relax_after_passes": 7}},
                    {"LnCk": {"set": "ssd", "k": 1, "u": 1, "relax_after_passes": 4, "relax_after_s": 9}}]}"#,
        2,
    );
    assert_eq!(
        (passes.relax_after_passes, passes.relax_after_us),
        (Some(4), Some(9_000_000))
    );
}

#[test]
fn a_task_counts_in_every_leaf_whose_set_holds_its_node() {
    let u = tree(r#"{"prefer": {"set": "gpu", "else": "ssd"}}"#, 4);
    let table: &[(&[u64], [u32; 2])] = &[
        (&[0, 1], [1, 0]),
        (&[1], [0, 1]),
        (&[2], [0, 0]),
        (&[0], [1, 0]),
    ];
    for (attrs, want) in table {
        let mut counts = Vec::new();
        u.count(node(attrs), &mut counts);
        assert_eq!(counts, want, "node {attrs:?}");
        u.uncount(node(attrs), &mut counts);
        assert_eq!(counts, [0, 0], "node {attrs:?} taken back");
        u.uncount(node(attrs), &mut counts);
        assert_eq!(counts, [0, 0], "never below zero");
    }
}

#[test]
fn greedy_ranking_follows_the_relaxed_utility() {
    // A min of two preferences needs both: its one branch is gpu AND ssd.
    let both = tree(
        r#"{"min": [{"prefer": {"set": "gpu"}}, {"prefer": {"set": "ssd"}}]}"#,
        2,
    );
    assert_eq!(both.branches.len(), 1);
    assert_eq!(both.ranked(&[0, 0]), vec![(0, 0.5)]);
    let set = &both.branches[0].set;
    assert!(set.holds(node(&[0, 1])) && !set.holds(node(&[0])) && !set.holds(node(&[1])));
    assert_eq!(
        both.branches[0].label,
        "utility.min[0].prefer & utility.min[1].prefer"
    );
    // prefer with an else: the preferred set first, the else set second.
    let prefer = tree(r#"{"prefer": {"set": "gpu", "else": "ssd"}}"#, 4);
    assert_eq!(prefer.ranked(&[0, 0]), vec![(0, 0.25), (1, 0.125)]);
    assert_eq!(prefer.ranked(&[4, 0]), vec![(1, 0.125)], "gpu leaf is full");
    // same(rack): every rack ties at first, then the rack already begun wins alone.
    let same = tree(r#"{"same": {"attr": "rack"}}"#, 3);
    let third = 1.0 / 3.0;
    let got: Vec<usize> = same.ranked(&[0, 0, 0]).into_iter().map(|r| r.0).collect();
    assert_eq!(got, vec![0, 1, 2]);
    let got = same.ranked(&[0, 1, 0]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 1);
    assert!((got[0].1 - third).abs() < 1e-9);
    assert_eq!(same.branches[1].label, "utility.same.attr=r1");
    // spread(rack, 2): only racks without a task gain (the sum is not capped at k
    // racks: a third rack still gains).
    let spread = tree(r#"{"spread": {"attr": "rack", "k": 2}}"#, 4);
    let got: Vec<usize> = spread.ranked(&[1, 0, 0]).into_iter().map(|r| r.0).collect();
    assert_eq!(got, vec![1, 2]);
}

#[test]
fn a_bad_tree_names_the_path_of_its_bad_node() {
    let ok = r#"{"nCk": {"set": "gpu", "k": 1, "u": 1}}"#;
    let max_bad = format!(r#"{{"max": [{ok}, {{"nCk": {{"set": "gpux", "k": 1, "u": 1}}}}]}}"#);
    let scale_bad = format!(r#"{{"scale": {{"s": -2, "child": {ok}}}}}"#);
    let barrier_bad = format!(r#"{{"barrier": {{"b": 0, "child": {ok}}}}}"#);
    let same = r#"{"same": {"attr": "rack"}}"#;
    let too_many = format!(r#"{{"min": [{}]}}"#, [same; 6].join(", "));
    let table: &[(&str, u32, &str)] = &[
        (
            &max_bad,
            2,
            r#"utility.max[1].nCk.set: unknown attribute "gpux""#,
        ),
        (
            r#"{"LnCk": {"set": {"and": ["gpu", {"not": "nvme"}]}, "k": 1, "u": 1}}"#,
            2,
            r#"utility.LnCk.set.and[1].not: unknown attribute "nvme""#,
        ),
        (
            r#"{"LnCk": {"set": {"or": []}, "k": 1, "u": 1}}"#,
            2,
            "utility.LnCk.set.or: needs at least one operand",
        ),
        (
            r#"{"nCk": {"set": "gpu", "k": 0, "u": 1}}"#,
            2,
            "utility.nCk.k: k must be at least 1",
        ),
        (
            r#"{"nCk": {"set": "gpu", "k": 5, "u": 1}}"#,
            2,
            "utility.nCk.k: k = 5 is more than the job's 2 tasks",
        ),
        (
            r#"{"nCk": {"set": "gpu", "k": 1, "u": -1}}"#,
            2,
            "utility.nCk.u: -1 is not a finite number >= 0",
        ),
        (r#"{"sum": []}"#, 2, "utility.sum: needs at least one child"),
        (
            &scale_bad,
            2,
            "utility.scale.s: -2 is not a finite number >= 0",
        ),
        (
            &barrier_bad,
            2,
            "utility.barrier.b: 0 is not a finite number > 0",
        ),
        (
            r#"{"same": {"attr": "gpu"}}"#,
            2,
            r#"utility.same.attr: "gpu" is not a multi-valued attribute (no gpu=value is named)"#,
        ),
        (
            r#"{"spread": {"attr": "rack", "k": 0}}"#,
            2,
            "utility.spread.k: k must be at least 1",
        ),
        (
            r#"{"prefer": {"set": "gpu", "else": "ssdx"}}"#,
            2,
            r#"utility.prefer.else: unknown attribute "ssdx""#,
        ),
        (
            r#"{"prefer": {"set": "gpu", "relax_after_s": -1}}"#,
            2,
            "utility.prefer.relax_after_s: -1 is not a number of seconds in 0..=1e9",
        ),
        (
            r#"{"prefer": {"set": "gpu", "relax_after_passes": 0}}"#,
            2,
            "utility.prefer.relax_after_passes: 0 is not a number of passes in 1..=1000000",
        ),
        (
            &too_many,
            2,
            "utility.min: more than 256 branches (a min multiplies its children's)",
        ),
    ];
    for (json, tasks, want) in table {
        let t: UtilityTree = serde_json::from_str(json).unwrap();
        let err = compile(&t, &names(), *tasks, "utility").unwrap_err();
        assert_eq!(err.to_string(), *want, "{json}");
    }
}
