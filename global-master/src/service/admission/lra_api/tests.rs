use super::*;

fn no_queues() -> QueueTable {
    QueueTable::new(common::GmId(0), None)
}

fn refusal(body: &str) -> (u16, String) {
    let e = parse_lra(body.as_bytes(), 8, &no_queues(), &[]).expect_err(body);
    (e.status, e.field)
}

const C: &str = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"tags":["w"]}"#;

#[test]
fn table_of_refusals_names_the_field() {
    let with = |constraint: &str| format!(r#"{{"containers":[{C}],"constraints":[{constraint}]}}"#);
    let cases: Vec<(String, u16, &str)> = vec![
        ("[".into(), 400, "body"),
        (r#"{"containers":[]}"#.into(), 422, "containers"),
        (
            r#"{"containers":[{"resources":{"cpu_millis":0,"memory_mb":1}}]}"#.into(),
            422,
            "containers[0].resources.cpu_millis",
        ),
        (
            format!(
                r#"{{"containers":[{C},{{"resources":{{"cpu_millis":1,"memory_mb":1}},"tags":[""]}}]}}"#
            ),
            422,
            "containers[1].tags",
        ),
        (
            r#"{"containers":[{"resources":{"cpu_millis":1,"memory_mb":1},"count":0}]}"#.into(),
            422,
            "containers[0].count",
        ),
        (
            r#"{"containers":[{"resources":{"cpu_millis":1,"memory_mb":1},"count":9}]}"#.into(),
            413,
            "containers",
        ),
        // A bad field is named whatever the LRA's size (found by schemathesis).
        (
            r#"{"containers":[{"resources":{"cpu_millis":1,"memory_mb":1},"count":9},{"resources":{"cpu_millis":1,"memory_mb":1},"count":0}]}"#.into(),
            422,
            "containers[1].count",
        ),
        (
            r#"{"containers":[{"resources":{"cpu_millis":1,"memory_mb":1},"duration_ms":-2}]}"#
                .into(),
            422,
            "containers[0].duration_ms",
        ),
        (
            format!(r#"{{"containers":[{C}],"colour":1}}"#),
            400,
            "colour",
        ),
        (
            with(r#"{"subject_tag":"w","tag":"w","c_min":3,"c_max":1,"node_group":"node"}"#),
            422,
            "constraints[0].c_min",
        ),
        (
            with(r#"{"subject_tag":"w","tag":"w","node_group":"zone"}"#),
            422,
            "constraints[0].node_group",
        ),
        (
            with(r#"{"subject_tag":"","tag":"w","node_group":"node"}"#),
            422,
            "constraints[0].subject_tag",
        ),
        (
            with(r#"{"subject_tag":"w","tag":[],"node_group":"node"}"#),
            422,
            "constraints[0].tag",
        ),
        (
            with(r#"{"subject_tag":"w","tag":"w","node_group":"node","weight":-1}"#),
            422,
            "constraints[0].weight",
        ),
        (with(r#"{"subject_tag":"w"}"#), 422, "constraints[0].tag"),
        (
            with(r#"{"subject_tag":"w","any_of":[]}"#),
            422,
            "constraints[0].any_of",
        ),
        (
            with(
                r#"{"subject_tag":"w","any_of":[[{"tag":"a","node_group":"rack"}],[{"tag":"b","c_min":2,"c_max":1,"node_group":"node"}]]}"#,
            ),
            422,
            "constraints[0].any_of[1][0].c_min",
        ),
        (
            with(
                r#"{"subject_tag":"w","tag":"w","node_group":"node","any_of":[[{"tag":"a","node_group":"rack"}]]}"#,
            ),
            422,
            "constraints[0].any_of",
        ),
    ];
    for (body, status, field) in cases {
        assert_eq!(refusal(&body), (status, field.to_owned()), "{body}");
    }
}

#[test]
fn operator_constraints_are_a_list_in_the_same_format() {
    let list = br#"[{"subject_tag":"hb","tag":"hb","c_max":2,"node_group":"node"}]"#;
    let parsed = parse_operator_constraints(list, &[]).expect("valid");
    assert_eq!(parsed[0].simple().and_then(|s| s.c_max), Some(2));
    let bad = br#"[{"subject_tag":"hb","tag":"hb","node_group":"zone"}]"#;
    let e = parse_operator_constraints(bad, &[]).expect_err("unknown group");
    assert_eq!(e.field, "[0].node_group");
    assert_eq!(
        e.error,
        "constraint field `node_group`: unknown node group `zone`"
    );
}

#[test]
fn accepts_counts_defaults_and_dnf() {
    let body = format!(
        r#"{{"queue":"b","containers":[{C},{{"resources":{{"cpu_millis":500,"memory_mb":8}},"tags":["m"],"count":2,"duration_ms":1.5}}],
        "constraints":[{{"subject_tag":"w","tag":"w","c_max":0,"node_group":"node","hard":true}},
                       {{"subject_tag":["m"],"any_of":[[{{"tag":"w","c_min":1,"node_group":"rack"}}],[{{"tag":["w","x"],"node_group":"node"}}]]}}]}}"#
    );
    // Queue b is GM 1's; an LRA names any queue (the designated GM places it).
    let fairness = common::fairness::FairnessConfig::parse(
        "a:0.5:0,b:0.5:1",
        common::fairness::SharePolicy::Drf,
        2,
    )
    .expect("queues");
    let queues = QueueTable::new(common::GmId(0), Some(std::sync::Arc::new(fairness)));
    let lra = parse_lra(body.as_bytes(), 8, &queues, &[]).expect("valid");
    assert_eq!(lra.queue, QueueId(1));
    let unknown = body.replace(r#""queue":"b""#, r#""queue":"zz""#);
    let e = parse_lra(unknown.as_bytes(), 8, &queues, &[]).expect_err("unknown queue");
    assert_eq!((e.status, e.field.as_str()), (422, "queue"));
    assert_eq!(lra.containers.len(), 3);
    assert_eq!(lra.durations[1], Micros(1500));
    assert_eq!(lra.durations[0], Micros((MAX_DURATION_MS * 1000.0) as u64));
    assert!(lra.constraints[0].is_hard());
    assert_eq!(lra.constraints[0].simple().and_then(|s| s.c_max), Some(0));
    assert_eq!(lra.constraints[1].any_of.len(), 2);
    assert_eq!(lra.constraints[1].weight, 1.0);
}

#[test]
fn node_groups_are_checked_and_constraints_may_name_them() {
    let groups =
        parse_node_groups(br#"[{"name":"fault","sets":[[0,2],[1,3]]}]"#).expect("valid groups");
    let body = format!(
        r#"{{"containers":[{C}],"constraints":[{{"subject_tag":"w","tag":"w","c_max":0,"node_group":"fault"}}]}}"#
    );
    assert!(parse_lra(body.as_bytes(), 8, &no_queues(), &groups).is_ok());
    let e = parse_lra(body.as_bytes(), 8, &no_queues(), &[]).expect_err("unknown group");
    assert_eq!(
        (e.status, e.field.as_str()),
        (422, "constraints[0].node_group")
    );
    for bad in [
        &br#"[{"name":"rack","sets":[[0]]}]"#[..],
        br#"[{"name":"f","sets":[[0,1],[1,2]]}]"#,
        br#"[{"name":"f","sets":[[0]]},{"name":"f","sets":[[1]]}]"#,
        br#"[{"name":"f"}]"#,
    ] {
        let text = String::from_utf8_lossy(bad);
        assert!(parse_node_groups(bad).is_err(), "{text}");
    }
}
