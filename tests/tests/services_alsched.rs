//! Soft constraints over the real processes (issue 36, docs/alsched.md): a job
//! submitted with a utility tree is placed by it, `GET /v1/tasks` shows the branch
//! each task got and why the better one was not taken, and after a GM restart the
//! resumed tasks are placed by the same tree (the journal kept it with the job's
//! spec).
//!
//! A second test runs a described cluster whose nodes have named attributes.
//!
//! 1 GM with a journal, 1 LM of 2 one-core nodes, 1 worker. The LM's generated
//! nodes all have Megha constraint 20 (its measured fraction is 1) and none has 63.
//! Fails (never skips) without RabbitMQ.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, http, wait_until, LoopbackCluster, RoleArgs};

const TASK: &str = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":2000}"#;
const TASKS: usize = 6;

/// `prefer(c63)` first (no node has it), then `prefer(c20)` (every node has it).
const TREE: &str = r#"{"max":[{"prefer":{"set":"c63"}},{"prefer":{"set":"c20"}}]}"#;

fn soft_of(gm: &str, job: u64, index: u32) -> serde_json::Value {
    get_json(&format!("{gm}/v1/tasks/{job}/{index}"))["soft"].clone()
}

#[test]
fn a_job_is_placed_by_its_tree_and_keeps_it_across_a_gm_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-alsched-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm0-data");
    let extra = RoleArgs {
        gm: vec![
            "--data-dir".into(),
            data.display().to_string(),
            "--drain-timeout-ms".into(),
            "1000".into(),
        ],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let body = format!(
        r#"{{"tasks":[{}],"utility":{TREE}}}"#,
        [TASK; TASKS].join(",")
    );
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let job = answer["job"].as_u64().expect("job id");
    wait_until("a task placed", Duration::from_secs(30), || {
        soft_of(&gm, job, 0).is_object()
    });
    let first = soft_of(&gm, job, 0);
    assert_eq!(first["branch"], "utility.max[1].prefer", "{first}");
    assert_eq!(
        first["passed_over"][0]["branch"], "utility.max[0].prefer",
        "{first}"
    );
    let why = first["passed_over"][0]["why"].as_str().unwrap_or("");
    assert!(why.contains("no node in the set"), "{first}");

    // Restarted while tasks wait: the resumed ones are placed by the same tree.
    cluster.stop_and_restart_gm(0, Duration::from_millis(500));
    let gm = cluster.gms[0].url.clone();
    wait_until(
        "the job to finish at the restarted GM",
        Duration::from_secs(90),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    let last = soft_of(&gm, job, TASKS as u32 - 1);
    assert_eq!(
        last["branch"],
        "utility.max[1].prefer",
        "the last task was placed after the restart, by the tree: {last}; logs in {}",
        dir.display()
    );
}

/// A described cluster (issue 36 item 1): given the same `--cluster-file` as the LM,
/// the GM lists the attribute names on `GET /v1/cluster` and takes them in a task's
/// `constraints` and in utility trees; an unknown name is a 422 naming the element,
/// and `c3` (a numbered name) is unknown once the cluster names its bits.
#[test]
fn jobs_name_the_attributes_of_a_described_cluster() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-attrs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    let file = dir.join("cluster.json");
    std::fs::write(
        &file,
        r#"{"gms": 1, "lms": [{"nodes": [
            {"count": 1, "cpus": 1, "memory_mb": 1024, "attributes": ["gpu", "rack=r0"]},
            {"count": 1, "cpus": 1, "memory_mb": 1024, "attributes": ["rack=r1"]}]}]}"#,
    )
    .expect("cluster file");
    let with_file = vec!["--cluster-file".to_owned(), file.display().to_string()];
    let extra = RoleArgs {
        gm: with_file.clone(),
        lm: with_file,
        ..RoleArgs::default()
    };
    let cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let names = get_json(&format!("{gm}/v1/cluster"))["attributes"].clone();
    assert_eq!(
        names,
        serde_json::json!({"gpu": 0, "rack=r0": 1, "rack=r1": 2}),
        "the names and their bits, in name order"
    );

    let task = |constraints: &str| {
        format!(
            r#"{{"resources":{{"cpu_millis":1000,"memory_mb":128}},"duration_ms":300,"constraints":{constraints}}}"#
        )
    };
    for (constraints, field, why) in [
        (
            r#"["gpux"]"#,
            "tasks[0].constraints[0]",
            "unknown attribute \"gpux\"",
        ),
        (
            r#"["c3"]"#,
            "tasks[0].constraints[0]",
            "this cluster names gpu, rack=r0, rack=r1",
        ),
        (r#"[1, 64]"#, "tasks[0].constraints[1]", "out of range"),
    ] {
        let body = format!(r#"{{"tasks":[{}]}}"#, task(constraints));
        let (status, _, answer) =
            http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
        assert_eq!(status, 422, "{constraints}: {answer}");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(answer["field"], field, "{answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(why),
            "{answer}"
        );
    }
    let bad_tree = format!(
        r#"{{"tasks":[{}],"utility":{{"prefer":{{"set":"c20"}}}}}}"#,
        task("[]")
    );
    let (status, _, answer) =
        http("POST", &format!("{gm}/v1/jobs"), Some(&bad_tree)).expect("post");
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("utility.prefer.set"), "{answer}");

    // By name: a task on the GPU node, one on rack r1 (the numbered bit 2, by number),
    // and a job preferring rack r1 softly.
    let body = format!(r#"{{"tasks":[{},{}]}}"#, task(r#"["gpu"]"#), task("[2]"));
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let hard: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let hard = hard["job"].as_u64().expect("job id");
    // The soft job comes once the hard one ended, so that node 1 is free for it (else
    // it would rightly fall back at once: `no room`).
    wait_until("the hard job to finish", Duration::from_secs(60), || {
        get_json(&format!("{gm}/v1/jobs/{hard}"))["state"] == "finished"
    });
    // An exec task, told its branch (`MEGHA_BRANCH`), which it prints.
    let exec = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"executor":{"type":"exec","command":["sh","-c","echo $MEGHA_BRANCH"]}}"#;
    let soft_body = format!(
        r#"{{"tasks":[{exec}],"utility":{{"prefer":{{"set":{{"and":["rack=r1",{{"not":"gpu"}}]}}}}}}}}"#
    );
    let (status, _, answer) =
        http("POST", &format!("{gm}/v1/jobs"), Some(&soft_body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let soft: serde_json::Value = serde_json::from_str(&answer).expect("json");
    let soft = soft["job"].as_u64().expect("job id");
    wait_until("the soft job to finish", Duration::from_secs(60), || {
        get_json(&format!("{gm}/v1/jobs/{soft}"))["state"] == "finished"
    });
    let node_of = |job: u64, i: u32| get_json(&format!("{gm}/v1/tasks/{job}/{i}"))["node"].as_u64();
    assert_eq!(
        (node_of(hard, 0), node_of(hard, 1)),
        (Some(0), Some(1)),
        "`gpu` is node 0's, bit 2 (`rack=r1`) node 1's; logs in {}",
        dir.display()
    );
    let got = soft_of(&gm, soft, 0);
    assert_eq!(got["branch"], "utility.prefer", "{got}");
    assert_eq!(node_of(soft, 0), Some(1), "{got}");
    let (status, _, printed) =
        http("GET", &format!("{gm}/v1/tasks/{soft}/0/logs"), None).expect("logs");
    assert_eq!((status, printed.as_str()), (200, "utility.prefer\n"));
    // The event stream names the branch too (the dashboard's recent events, which
    // the GM also publishes on the events exchange); a task without a tree has none.
    let events = get_json(&format!("{gm}/v1/overview"))["events"].clone();
    let dispatched = |job: u64| {
        events
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| {
                e["event"] == "dispatched" && e["task"]["job"] == job && e["task"]["index"] == 0
            })
            .cloned()
            .unwrap_or_else(|| panic!("no dispatched event of job {job}: {events}"))
    };
    assert_eq!(dispatched(soft)["branch"], "utility.prefer");
    assert!(dispatched(hard).get("branch").is_none(), "{events}");
}
