//! Bad input: a table of malformed submissions to a real GM process; each gets the
//! right 4xx naming the field, and none changes the GM's state. Also: a full GM answers
//! 429 with Retry-After. (No LM is running, so accepted tasks wait with a reason.)

use tests::checks::metric_sum;
use tests::procs::{get_json, http, http_bytes, Proc};

fn state(gm: &str) -> (f64, u64) {
    let (_, _, page) = http("GET", &format!("{gm}/metrics"), None).expect("metrics");
    let pending = get_json(&format!("{gm}/v1/pending"));
    (
        metric_sum(&page, "megha_gm_submitted_total"),
        pending["total"].as_u64().expect("total"),
    )
}

#[test]
fn malformed_submissions_get_a_4xx_and_change_nothing() {
    let dir = std::env::temp_dir().join(format!("megha-bad-input-{}", std::process::id()));
    let args: Vec<String> = [
        "--id",
        "0",
        "--gms",
        "1",
        "--lm-urls",
        "http://127.0.0.1:9",
        "--listen",
        "127.0.0.1:0",
        "--max-job-tasks",
        "3",
        "--max-queued",
        "4",
        "--amqp",
        "amqp://guest:guest@127.0.0.1:1/%2f",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let gm = Proc::spawn("global-master", &args, &dir, "gm");
    let jobs = format!("{}/v1/jobs", gm.url);
    let res = r#""resources":{"cpu_millis":1000,"memory_mb":64}"#;
    let ok = format!(r#"{res},"duration_ms":10"#);
    let cases: Vec<(String, u16, &str)> = vec![
        ("{".into(), 400, "body"),
        (
            format!(r#"{{"tasks":[{{{ok}}}],"retry":{{"max_attempts":0}}}}"#),
            422,
            "retry.max_attempts",
        ),
        (
            format!(
                r#"{{"tasks":[{{{ok}}}],"retry":{{"max_attempts":2,"backoff":{{"factor":-1}}}}}}"#
            ),
            422,
            "retry.backoff.factor",
        ),
        (format!(r#"{{"tasks":[{{{ok}}}],"user":""}}"#), 422, "user"),
        (r#"{"tasks":5}"#.into(), 400, "tasks"),
        (r#"{"tasks":[]}"#.into(), 422, "tasks"),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":"1","memory_mb":1}}]}"#.into(),
            400,
            "tasks[0].resources.cpu_millis",
        ),
        (
            r#"{"tasks":[{"resources":{"cpu_millis":-1,"memory_mb":1}}]}"#.into(),
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
            format!(r#"{{"tasks":[{{{ok},"constraints":[1,99]}}]}}"#),
            422,
            "tasks[0].constraints[1]",
        ),
        (
            format!(r#"{{"tasks":[{{{res},"duration_ms":"long"}}]}}"#),
            400,
            "tasks[0].duration_ms",
        ),
        // Without `duration_ms` a synthetic or burn task would end at once.
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{res}}}]}}"#),
            400,
            "tasks[1].duration_ms",
        ),
        (
            format!(r#"{{"tasks":[{{{res},"executor":{{"type":"burn"}}}}]}}"#),
            400,
            "tasks[0].duration_ms",
        ),
        (
            format!(r#"{{"tasks":[{{{ok},"kind":"huge"}}]}}"#),
            400,
            "tasks[0].kind",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok}}},{{{ok}}},{{{ok}}}]}}"#),
            413,
            "tasks",
        ),
        // Soft constraints (docs/alsched.md): a bad utility tree names its node.
        (
            format!(
                r#"{{"tasks":[{{{ok}}}],"utility":{{"max":[{{"prefer":{{"set":"c1"}}}},{{"nCk":{{"set":"gpux","k":1,"u":1}}}}]}}}}"#
            ),
            400,
            "utility.max[1].nCk.set",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}}],"utility":{{"nCk":{{"set":"c1","k":2,"u":1}}}}}}"#),
            400,
            "utility.nCk.k",
        ),
        // Gangs (docs/gangs.md): each bad value names its field.
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok}}}],"gang":{{"min_members":0}}}}"#),
            400,
            "gang.min_members",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok}}}],"gang":{{"min_members":3}}}}"#),
            400,
            "gang.min_members",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}},{{{ok}}}],"gang":{{"timeout_s":-1}}}}"#),
            400,
            "gang.timeout_s",
        ),
    ];
    for (body, status, field) in &cases {
        let (got, _, answer) = http("POST", &jobs, Some(body)).expect("post");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("json error body");
        assert_eq!(got, *status, "{body} -> {answer}");
        assert_eq!(answer["field"], *field, "{body} -> {answer}");
        assert!(
            !answer["error"].as_str().unwrap_or("").is_empty(),
            "{answer}"
        );
        assert_eq!(state(&gm.url), (0.0, 0), "state changed after {body}");
    }

    // A good job is accepted and waits, saying why.
    let (got, _, answer) = http(
        "POST",
        &jobs,
        Some(&format!(
            r#"{{"tasks":[{{{ok}}},{{{ok}}}],"utility":{{"prefer":{{"set":"c3"}}}}}}"#
        )),
    )
    .expect("post");
    assert_eq!(got, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let job = answer["job"].as_u64().expect("job id");
    assert_eq!(state(&gm.url), (2.0, 2));
    let pending = get_json(&format!("{}/v1/pending", gm.url));
    assert_eq!(
        pending["shown"][0]["reason_detail"]["reason"],
        "no_state_yet"
    );
    let task = get_json(&format!("{}/v1/tasks/{job}/1", gm.url));
    assert_eq!(task["state"], "queued");
    let job_status = get_json(&format!("{}/v1/jobs/{job}", gm.url));
    assert_eq!(job_status["tasks"], 2);

    // The job list: the accepted job, active; bad filters are 400 naming the field.
    let list = get_json(&format!("{}/v1/jobs", gm.url));
    assert_eq!(list["jobs"][0]["job"].as_u64(), Some(job), "{list}");
    assert_eq!(list["jobs"][0]["state"], "active", "{list}");
    assert_eq!(list["next"], serde_json::Value::Null);
    let finished = get_json(&format!("{}/v1/jobs?state=finished", gm.url));
    assert_eq!(
        finished["jobs"].as_array().map(Vec::len),
        Some(0),
        "{finished}"
    );
    for (query, field) in [
        ("state=done", "state"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("limit=x", "query"),
        ("order=sideways", "order"),
    ] {
        let (got, _, answer) =
            http("GET", &format!("{}/v1/jobs?{query}", gm.url), None).expect("get");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(
            (got, answer["field"].as_str()),
            (400, Some(field)),
            "{query}: {answer}"
        );
    }

    // Full: 2 held + 3 > 4.
    let three = format!(r#"{{"tasks":[{{{ok}}},{{{ok}}},{{{ok}}}]}}"#);
    let (got, head, _) = http("POST", &jobs, Some(&three)).expect("post");
    assert_eq!(got, 429);
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    assert_eq!(state(&gm.url), (2.0, 2));

    // The internal endpoint (bincode LM -> GM messages): an undecodable body is 400, a
    // message for another GM is 422 naming `gm`; neither changes anything.
    let internal = format!("{}/v1/internal/messages", gm.url);
    let ct = common::codec::CONTENT_TYPE;
    let (got, _, _) = http_bytes("POST", &internal, ct, b"\x02garbage").expect("post");
    assert_eq!(got, 400);
    let (got, _, _) = http_bytes("POST", &internal, ct, b"\x01").expect("post");
    assert_eq!(got, 400, "an old wire version is refused");
    let spec = common::TaskSpec::short(
        common::TaskId::new(7, 0),
        common::Resources::cores(1, 64),
        common::Micros(1),
    );
    let elsewhere = common::protocol::LmToGm::Requeue(common::messages::PreemptedTasks {
        lm: common::LmId(0),
        gm: common::GmId(5),
        tasks: vec![(spec, common::Micros::ZERO)],
    });
    let body = common::codec::encode(&Default::default(), &vec![elsewhere]).expect("encode");
    let (got, _, answer) = http_bytes("POST", &internal, ct, &body).expect("post");
    let answer: serde_json::Value = serde_json::from_slice(&answer).expect("json error body");
    assert_eq!(
        (got, answer["field"].as_str()),
        (422, Some("gm")),
        "{answer}"
    );
    assert_eq!(state(&gm.url), (2.0, 2));

    // Bad paths.
    assert_eq!(
        http("GET", &format!("{}/v1/tasks/abc/0", gm.url), None)
            .expect("get")
            .0,
        400
    );
    assert_eq!(
        http("GET", &format!("{}/v1/jobs/12345", gm.url), None)
            .expect("get")
            .0,
        404
    );

    // Logs, nodes and cancel: bad input is a 4xx naming what is wrong.
    let status = |method: &str, path: &str| {
        let (got, _, body) = http(method, &format!("{}{path}", gm.url), None).expect("call");
        (got, body)
    };
    assert_eq!(
        status("GET", &format!("/v1/tasks/{job}/0/logs?stream=x")).0,
        400
    );
    assert_eq!(
        status("GET", &format!("/v1/tasks/{job}/0/logs?colour=1")).0,
        400
    );
    let (got, body) = status("GET", &format!("/v1/tasks/{job}/0/logs"));
    assert_eq!(got, 409, "not started yet: {body}");
    assert_eq!(status("GET", "/v1/tasks/12345/0/logs").0, 404);
    assert_eq!(status("GET", "/v1/nodes?summary=maybe").0, 400);
    let nodes = get_json(&format!("{}/v1/nodes", gm.url));
    assert_eq!(nodes["lms"][0]["known"], false, "no LM state yet: {nodes}");
    assert_eq!(status("DELETE", "/v1/jobs/abc").0, 400);
    let (got, body) = status("DELETE", "/v1/jobs/12345");
    assert_eq!(got, 404, "{body}");
    // Cancelling the queued job: both tasks leave the queue at once.
    let (got, body) = status("DELETE", &format!("/v1/jobs/{job}"));
    assert_eq!(got, 202, "{body}");
    let cancelled: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(state(&gm.url), (2.0, 0));
    let (got, again) = status("DELETE", &format!("/v1/jobs/{job}"));
    assert_eq!(
        (got, again.contains("\"cancelled\"")),
        (202, true),
        "{again}"
    );
}

/// With queues configured, a submission names a queue this GM serves: unknown or
/// missing queues are 422, a queue served by another GM is 421 naming that GM; none
/// changes the GM's state. (GM 1 of 2 serves `b`; `a` is GM 0's.)
#[test]
fn queues_must_exist_and_be_served_by_this_gm() {
    let dir = std::env::temp_dir().join(format!("megha-bad-queue-{}", std::process::id()));
    let args: Vec<String> = [
        "--id",
        "1",
        "--gms",
        "2",
        "--lm-urls",
        "http://127.0.0.1:9",
        "--listen",
        "127.0.0.1:0",
        "--queue",
        "a:0.5:0",
        "--queue",
        "b:0.5:1",
        "--amqp",
        "amqp://guest:guest@127.0.0.1:1/%2f",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let gm = Proc::spawn("global-master", &args, &dir, "gm");
    let jobs = format!("{}/v1/jobs", gm.url);
    let ok = r#""resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10"#;
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (
            format!(r#"{{"tasks":[{{{ok},"queue":"b"}},{{{ok},"queue":"nope"}}]}}"#),
            422,
            "tasks[1].queue",
            "unknown queue `nope`",
        ),
        (
            format!(r#"{{"tasks":[{{{ok}}}]}}"#),
            422,
            "tasks[0].queue",
            "required",
        ),
        (
            format!(r#"{{"tasks":[{{{ok},"queue":"default"}}]}}"#),
            422,
            "tasks[0].queue",
            "unknown queue",
        ),
        (
            format!(r#"{{"tasks":[{{{ok},"queue":"b"}},{{{ok},"queue":"a"}}]}}"#),
            421,
            "tasks[1].queue",
            "served by gm0",
        ),
    ];
    for (body, status, field, says) in &cases {
        let (got, _, answer) = http("POST", &jobs, Some(body)).expect("post");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("json error body");
        assert_eq!(got, *status, "{body} -> {answer}");
        assert_eq!(answer["field"], *field, "{body} -> {answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(says),
            "{body} -> {answer}"
        );
        assert_eq!(state(&gm.url), (0.0, 0), "state changed after {body}");
    }
    let (got, _, answer) = http(
        "POST",
        &jobs,
        Some(&format!(r#"{{"tasks":[{{{ok},"queue":"b"}}]}}"#)),
    )
    .expect("post");
    assert_eq!(got, 202, "{answer}");
    assert_eq!(state(&gm.url), (1.0, 1));
    let (_, _, page) = http("GET", &format!("{}/metrics", gm.url), None).expect("metrics");
    assert!(
        page.contains("megha_gm_queue_length{queue=\"b\"} 1"),
        "{page}"
    );
}

/// `loadgen replay` against a GM URL nobody answers fails within seconds, naming the
/// URL, instead of retrying its submissions in silence.
#[test]
fn a_replay_against_an_unreachable_gm_fails_naming_it() {
    let broker = tests::broker::require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-replay-nogm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let url = format!("http://127.0.0.1:{}", tests::procs::free_port());
    let args: Vec<String> = [
        "replay",
        "--trace",
        "data/traces/YH_small.tr",
        "--gm",
        &url,
        "--amqp",
        &broker.url,
        "--out",
        dir.join("out").to_str().expect("utf-8 path"),
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = dir.join("loadgen.log");
    let status = tests::procs::loadgen(&args, &log);
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!status.success(), "{text}");
    assert!(
        text.contains(&url) && text.contains("no answer"),
        "the error names the GM: {text}"
    );
}
