//! Unit tests of `api.rs`.

use super::*;

fn no_queues() -> QueueTable {
    QueueTable::new(GmId(0), None)
}

/// GM 1 of 2, serving `b`; `a` is GM 0's.
fn two_queues() -> QueueTable {
    let f = FairnessConfig::parse("a:0.5:0,b:0.5:1", Default::default(), 2).expect("valid");
    QueueTable::new(GmId(1), Some(Arc::new(f)))
}

fn refusal(body: &str) -> (u16, String) {
    let e = parse_job(body.as_bytes(), 3, &no_queues()).expect_err(body);
    (e.status, e.field)
}

#[test]
fn queues_are_named_and_must_be_served_here() {
    let ok_res = r#""resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10"#;
    let job = |queue: &str| format!(r#"{{"tasks":[{{{ok_res}}},{{{ok_res}{queue}}}]}}"#);
    // (queues, body, the last task's queue id or the refusal's status and field)
    type Case = (QueueTable, String, Result<u16, (u16, &'static str)>);
    let cases: Vec<Case> = vec![
        (no_queues(), job(""), Ok(0)),
        (no_queues(), job(r#","queue":"default""#), Ok(0)),
        (
            no_queues(),
            job(r#","queue":"b""#),
            Err((422, "tasks[1].queue")),
        ),
        (
            no_queues(),
            job(r#","queue":3"#),
            Err((400, "tasks[1].queue")),
        ),
        (
            two_queues(),
            job(r#","queue":"b""#),
            Err((422, "tasks[0].queue")),
        ),
        (
            two_queues(),
            format!(r#"{{"tasks":[{{{ok_res},"queue":"b"}},{{{ok_res},"queue":"b"}}]}}"#),
            Ok(1),
        ),
        (
            two_queues(),
            format!(r#"{{"tasks":[{{{ok_res},"queue":"b"}},{{{ok_res},"queue":"zz"}}]}}"#),
            Err((422, "tasks[1].queue")),
        ),
        (
            two_queues(),
            format!(r#"{{"tasks":[{{{ok_res},"queue":"a"}}]}}"#),
            Err((421, "tasks[0].queue")),
        ),
        (
            two_queues(),
            format!(r#"{{"tasks":[{{{ok_res},"queue":"default"}}]}}"#),
            Err((422, "tasks[0].queue")),
        ),
    ];
    for (table, body, want) in cases {
        let got = parse_job(body.as_bytes(), 3, &table)
            .map(|tasks| tasks[tasks.len() - 1].queue.0)
            .map_err(|e| (e.status, e.field));
        let want = want.map_err(|(s, f)| (s, f.to_owned()));
        assert_eq!(got, want, "{body}");
    }
    let misdirected = parse_job(
        format!(r#"{{"tasks":[{{{ok_res},"queue":"a"}}]}}"#).as_bytes(),
        3,
        &two_queues(),
    )
    .expect_err("a is gm0's");
    assert!(
        misdirected.error.contains("served by gm0"),
        "{}",
        misdirected.error
    );
    // The same task in a job with GUARANTEED work: the job is placed whole by the
    // designated GM, so the queue of another GM is accepted (here and there).
    let mixed = format!(
        r#"{{"tasks":[{{{ok_res},"queue":"b","kind":"guaranteed"}},{{{ok_res},"queue":"a"}}]}}"#
    );
    let tasks = parse_job(mixed.as_bytes(), 3, &two_queues()).expect("mixed job");
    assert_eq!(tasks[1].queue.0, 0, "queue a");
}

#[test]
fn table_of_refusals_names_the_field() {
    let ok_res = r#""resources":{"cpu_millis":1000,"memory_mb":64}"#;
    let ok = format!(r#"{ok_res},"duration_ms":10"#);
    let cases: Vec<(String, u16, &str)> = vec![
        ("not json".into(), 400, "body"),
        (r#"{"tasks":"x"}"#.into(), 400, "tasks"),
        (r#"{"tasks":[]}"#.into(), 422, "tasks"),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":"a","memory_mb":1}}]}"#.into(),
            400,
            "tasks[0].resources.cpu_millis",
        ),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":-5,"memory_mb":1}}]}"#.into(),
            400,
            "tasks[0].resources.cpu_millis",
        ),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":0,"memory_mb":1}}]}"#.into(),
            422,
            "tasks[0].resources.cpu_millis",
        ),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":1,"memory_mb":0}}]}"#.into(),
            422,
            "tasks[0].resources.memory_mb",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok},"constraints":[3,64]}}]}}"#),
            422,
            "tasks[1].constraints[1]",
        ),
        (
            format!(r#"{{"tasks":[{{{ok_res},"duration_ms":-1}}]}}"#),
            422,
            "tasks[0].duration_ms",
        ),
        // Without `duration_ms` only an `exec` task may run: a synthetic or burn
        // task would end at once (it used to mean 0 ms, silently).
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok_res}}}]}}"#),
            400,
            "tasks[1].duration_ms",
        ),
        (
            format!(r#"{{"tasks":[{{{ok_res},"executor":{{"type":"burn"}}}}]}}"#),
            400,
            "tasks[0].duration_ms",
        ),
        (
            format!(r#"{{"tasks":[{{{ok_res},"executor":{{"type":"synthetic"}}}}]}}"#),
            400,
            "tasks[0].duration_ms",
        ),
        (
            format!(r#"{{"tasks":[{{{ok},"kind":"bogus"}}]}}"#),
            400,
            "tasks[0].kind",
        ),
        (
            format!(r#"{{"tasks":[{{{ok},"colour":1}}]}}"#),
            400,
            "tasks[0].colour",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok}}},{{{ok}}},{{{ok}}}]}}"#),
            413,
            "tasks",
        ),
    ];
    for (body, status, field) in cases {
        assert_eq!(refusal(&body), (status, field.to_owned()), "{body}");
    }
}

#[test]
fn an_exec_task_may_leave_out_its_duration() {
    let body = r#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":64},"executor":{"type":"exec","command":["true"]}}]}"#;
    let tasks = parse_job(body.as_bytes(), 3, &no_queues()).expect("exec without duration");
    assert_eq!(tasks[0].duration, Micros(0));
    let refused = parse_job(
        br#"{"tasks":[{"resources":{"cpu_millis":1000,"memory_mb":64}}]}"#,
        3,
        &no_queues(),
    )
    .expect_err("the default executor needs a duration");
    assert!(refused.error.contains("required"), "{}", refused.error);
}

#[test]
fn retry_policies_are_checked_field_by_field() {
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10}"#;
    let job = |retry: &str| format!(r#"{{"tasks":[{task}],"retry":{retry}}}"#);
    let parse = |retry: &str| parse_job_request(job(retry).as_bytes(), 3, &no_queues());
    let policy = parse(r#"{"max_attempts":3,"backoff":{"initial_ms":10,"factor":3,"max_ms":50}}"#)
        .expect("valid")
        .retry
        .expect("a policy");
    assert_eq!(policy.max_attempts, 3);
    assert_eq!(
        (policy.backoff.initial, policy.backoff.max),
        (Micros(10_000), Micros(50_000))
    );
    let defaults = parse(r#"{"max_attempts":2}"#)
        .expect("valid")
        .retry
        .expect("a policy");
    assert_eq!(defaults.backoff, Backoff::default());
    let none = parse_job_request(
        format!(r#"{{"tasks":[{task}]}}"#).as_bytes(),
        3,
        &no_queues(),
    );
    assert_eq!(none.expect("valid").retry, None);
    for (retry, status, field) in [
        (r#"{"max_attempts":0}"#, 422, "retry.max_attempts"),
        (r#"{"max_attempts":101}"#, 422, "retry.max_attempts"),
        (r#"{"max_attempts":-1}"#, 400, "retry.max_attempts"),
        (r#"{}"#, 400, "retry"),
        (r#"{"max_attempts":2,"tries":1}"#, 400, "retry.tries"),
        (
            r#"{"max_attempts":2,"backoff":{"initial_ms":-5}}"#,
            422,
            "retry.backoff.initial_ms",
        ),
        (
            r#"{"max_attempts":2,"backoff":{"factor":0.5}}"#,
            422,
            "retry.backoff.factor",
        ),
        (
            r#"{"max_attempts":2,"backoff":{"initial_ms":100,"max_ms":10}}"#,
            422,
            "retry.backoff.max_ms",
        ),
    ] {
        let e = parse(retry).expect_err(retry);
        assert_eq!((e.status, e.field.as_str()), (status, field), "{retry}");
    }
}

#[test]
fn accepts_a_well_formed_job() {
    let body = r#"{"tasks":[{"queue":"b","resources":{"cpu_millis":500,"memory_mb":64},"constraints":[0,20],"duration_ms":1.5,"kind":"queueable","tags":["a"]}]}"#;
    let tasks = parse_job(body.as_bytes(), 3, &two_queues()).expect("valid");
    assert_eq!(tasks[0].duration, Micros(1500));
    assert_eq!(
        tasks[0].constraints,
        ConstraintSet::from_ids([0, 20]).expect("ids")
    );
    assert_eq!(tasks[0].queue, QueueId(1));
}

#[test]
fn names_and_labels_are_checked_naming_the_field() {
    let ok = r#""tasks":[{"resources":{"cpu_millis":1,"memory_mb":1},"duration_ms":1}]"#;
    let job = |extra: &str| format!("{{{ok},{extra}}}");
    let long = "x".repeat(129);
    let many: Vec<String> = (0..33).map(|i| format!(r#""k{i}":"v""#)).collect();
    let cases: Vec<(String, (u16, String))> = vec![
        (job(r#""name":"""#), (422, "name".into())),
        (job(r#""name":"  ""#), (422, "name".into())),
        (job(&format!(r#""name":"{long}""#)), (422, "name".into())),
        (job(r#""name":"a\nb""#), (422, "name".into())),
        (job(r#""name":7"#), (400, "name".into())),
        (
            job(&format!(r#""labels":{{{}}}"#, many.join(","))),
            (422, "labels".into()),
        ),
        (job(r#""labels":{"":"v"}"#), (422, "labels.".into())),
        (job(r#""labels":{"a=b":"v"}"#), (422, "labels.a=b".into())),
        (
            job(&format!(r#""labels":{{"{}":"v"}}"#, "k".repeat(65))),
            (422, format!("labels.{}", "k".repeat(65))),
        ),
        (
            job(&format!(r#""labels":{{"k":"{}"}}"#, "v".repeat(257))),
            (422, "labels.k".into()),
        ),
        (job(r#""labels":{"k":1}"#), (400, "labels.k".into())),
        (job(r#""labels":["k"]"#), (400, "labels".into())),
    ];
    for (body, expected) in cases {
        assert_eq!(refusal(&body), expected, "{body}");
    }
    let body = job(&format!(
        r#""name":"train","labels":{{"team":"ml","{}":"{}"}}"#,
        "k".repeat(64),
        "v".repeat(256)
    ));
    let parsed = parse_job_request(body.as_bytes(), 3, &no_queues()).expect("valid");
    assert_eq!(parsed.names.name.as_deref(), Some("train"));
    assert_eq!(parsed.names.labels.len(), 2);
    assert_eq!(parsed.names.labels["team"], "ml");
    let none = parse_job_request(job(r#""user":"u""#).as_bytes(), 3, &no_queues()).expect("valid");
    assert_eq!(none.names, JobNames::default());
}

/// Constraints by attribute name (issue 36 item 1) as well as by number; a name the
/// cluster does not have is a 422 naming the element and listing the names.
#[test]
fn constraints_name_attributes_of_the_cluster() {
    let (_, names) = common::cluster_described::DescribedCluster::from_json(
        r#"{"gms": 1, "lms": [{"nodes": [
            {"count": 1, "cpus": 1, "memory_mb": 64, "attributes": ["gpu", "rack=r0"]}]}]}"#,
    )
    .expect("described");
    let queues = no_queues().with_attributes(Arc::new(names));
    let job = |constraints: &str| {
        format!(
            r#"{{"tasks":[{{"resources":{{"cpu_millis":1,"memory_mb":1}},"duration_ms":1,"constraints":{constraints}}}]}}"#
        )
    };
    let tasks = parse_job(job(r#"["rack=r0", 5, "gpu"]"#).as_bytes(), 1, &queues).expect("valid");
    assert_eq!(
        tasks[0].constraints,
        ConstraintSet::from_ids([0, 1, 5]).expect("ids")
    );
    for (constraints, field, why) in [
        (
            r#"[0, "tpu"]"#,
            "tasks[0].constraints[1]",
            r#"unknown attribute "tpu"; this cluster names gpu, rack=r0"#,
        ),
        (
            r#"["c0"]"#,
            "tasks[0].constraints[0]",
            r#"unknown attribute "c0""#,
        ),
        (
            r#"[64]"#,
            "tasks[0].constraints[0]",
            "constraint id 64 is out of range (ids are 0..64)",
        ),
        (
            r#"[true]"#,
            "tasks[0].constraints[0]",
            "did not match any variant",
        ),
    ] {
        let e = parse_job(job(constraints).as_bytes(), 1, &queues).expect_err(constraints);
        assert_eq!(e.field, field, "{constraints}: {e:?}");
        assert!(e.error.contains(why), "{constraints}: {e:?}");
    }
    // Without a description the numbered names work as in trees: `c7` is bit 7.
    let tasks = parse_job(job(r#"["c7", 2]"#).as_bytes(), 1, &no_queues()).expect("c7");
    assert_eq!(
        tasks[0].constraints,
        ConstraintSet::from_ids([2, 7]).expect("ids")
    );
}
