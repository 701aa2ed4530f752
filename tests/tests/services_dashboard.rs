//! The GM's web dashboard (`GET /`), driven in headless Chromium against a real
//! cluster (2 GMs, 1 LM of 4 one-core nodes, 2 workers, queues `a` and `b`, its own
//! broker vhost): one short job finishes, a long job of three tasks runs (the third
//! repartitioned into GM 1's partition: a logical node), then a worker is killed and
//! its two nodes go down. What the page shows must agree with the API: node counts
//! (total, down, logical), each job's state, queued tasks, allocation-time samples
//! and the queues. Without a token the page asks for one; with one it shows the
//! data. A screenshot is kept under `target/test-artefacts/dashboard.png`.

use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::browser::{attr_where, dump_dom, screenshot, text_of};
use tests::procs::{bin_dir, credentials, get_json, wait_until, LoopbackCluster, RoleArgs};

fn submit(gm: &str, queue: &str, tasks: usize, duration_ms: u64) -> u64 {
    let task = format!(
        r#"{{"queue":"{queue}","resources":{{"cpu_millis":1000,"memory_mb":128}},"duration_ms":{duration_ms}}}"#
    );
    let answer = tests::procs::submit_tasks(gm, &task, tasks);
    answer["job"].as_u64().expect("job id")
}

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// (nodes, down, lent) over the LMs' own lists, as `/v1/cluster` relays them.
fn cluster_counts(gm: &str) -> (usize, usize, usize) {
    let cluster = get_json(&format!("{gm}/v1/cluster"));
    let mut counts = (0, 0, 0);
    for lm in cluster["lms"].as_array().expect("lms") {
        let nodes = lm["state"]["nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("LM answered no nodes: {lm}"));
        counts.0 += nodes.len();
        counts.1 += nodes.iter().filter(|n| n["down"] == true).count();
        counts.2 += nodes
            .iter()
            .map(|n| n["lent"].as_array().map_or(0, Vec::len))
            .sum::<usize>();
    }
    counts
}

fn number(dom: &str, id: &str) -> u64 {
    let text = text_of(dom, id).unwrap_or_else(|| panic!("no #{id} in the page"));
    text.parse()
        .unwrap_or_else(|_| panic!("#{id} shows `{text}`, not a number"))
}

#[test]
fn the_dashboard_shows_what_the_api_says() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-dashboard-{}", std::process::id()));
    let extra = RoleArgs {
        lm: flags(&["--worker-timeout-ms", "1500"]),
        worker: flags(&["--lm-check-ms", "200"]),
        ..RoleArgs::default()
    };
    let mut cluster = LoopbackCluster::start_with_args(
        2,
        1,
        2,
        2,
        &broker.url,
        &dir.join("logs"),
        &["a:0.5:0", "b:0.5:1"],
        &extra,
    );
    let gm = cluster.gms[0].url.clone();
    let lm = cluster.lms[0].url.clone();
    let short = submit(&gm, "a", 1, 100);
    wait_until("the short job to finish", Duration::from_secs(30), || {
        get_json(&format!("{gm}/v1/jobs/{short}"))["state"] == "finished"
    });
    // The GM's view frees the short task's node only with the LM's next state; until
    // then a third long task would find GM 0's partition full and be lent as well.
    wait_until(
        "GM 0's view of the LM to show every node free",
        Duration::from_secs(30),
        || {
            let view = get_json(&format!("{gm}/v1/nodes?summary=true"));
            view["lms"][0]["free"] == view["lms"][0]["capacity"]
        },
    );
    let long = submit(&gm, "a", 3, 600_000);
    wait_until(
        "the three long tasks running",
        Duration::from_secs(30),
        || get_json(&format!("{lm}/healthz"))["running"].as_u64() == Some(3),
    );
    assert_eq!(
        cluster_counts(&gm).2,
        1,
        "one task lent into GM 1's partition"
    );
    cluster.workers[1].kill();
    wait_until(
        "the killed worker's nodes down",
        Duration::from_secs(30),
        || cluster_counts(&gm).1 == 2,
    );
    wait_until(
        "the GM to see the lost tasks",
        Duration::from_secs(30),
        || {
            let job = get_json(&format!("{gm}/v1/jobs/{long}"));
            job["states"]["failed"].as_u64().unwrap_or(0) >= 1
        },
    );

    // Without a token the page asks for one and shows no data.
    let profile = dir.join("chromium");
    let page = format!("{gm}/");
    let dom = dump_dom(&page, &profile.join("anonymous"), 4000);
    assert_eq!(
        text_of(&dom, "status").as_deref(),
        Some("token needed"),
        "{dom}"
    );
    assert!(
        !dom.contains(r#"id="token-form" hidden"#),
        "token form shown"
    );
    assert_eq!(text_of(&dom, "nodes-total").as_deref(), Some("–"));

    // With the admin token (moved from the fragment to sessionStorage).
    let with_token = format!("{gm}/#token={}", credentials().admin);
    let dom = dump_dom(&with_token, &profile.join("admin"), 6000);
    assert_eq!(
        attr_where(&dom, "data-loaded", "1", "data-loaded").as_deref(),
        Some("1"),
        "the page loaded its data: {dom}"
    );
    let (nodes, down, lent) = cluster_counts(&gm);
    assert_eq!((nodes, down), (4, 2));
    assert_eq!(number(&dom, "nodes-total"), nodes as u64);
    assert_eq!(number(&dom, "nodes-down"), down as u64);
    assert_eq!(number(&dom, "logical-nodes"), lent as u64);
    assert_eq!(
        number(&dom, "nodes-free") + number(&dom, "nodes-used") + number(&dom, "nodes-down"),
        nodes as u64
    );
    let overview: Value = get_json(&format!("{gm}/v1/overview"));
    assert_eq!(
        number(&dom, "queued"),
        overview["queued"].as_u64().expect("queued")
    );
    assert_eq!(
        attr_where(&dom, "id", "alloc-summary", "data-samples"),
        Some(overview["allocation"]["samples"].to_string()),
        "allocation-time samples"
    );
    assert!(
        overview["allocation"]["samples"].as_u64() >= Some(3),
        "{overview}"
    );
    for job in [short, long] {
        let state = get_json(&format!("{gm}/v1/jobs/{job}"))["state"].clone();
        assert_eq!(
            attr_where(&dom, "data-job", &job.to_string(), "data-state").map(Value::from),
            Some(state),
            "job {job}"
        );
    }
    for queue in ["a", "b"] {
        assert!(
            dom.contains(&format!(r#"data-queue="{queue}""#)),
            "queue {queue} listed"
        );
    }
    assert!(
        dom.contains(r#"data-event="queued""#),
        "recent events listed"
    );

    let target = bin_dir().parent().expect("target/").to_path_buf();
    let shot = target.join("test-artefacts/dashboard.png");
    std::fs::create_dir_all(shot.parent().expect("dir")).expect("artefact dir");
    screenshot(
        &with_token,
        &profile.join("shot"),
        6000,
        &shot,
        (1400, 1250),
    );
    println!("dashboard screenshot: {}", shot.display());
    // Cancel the long job, then stop every live process (worker 1 is dead already).
    let (status, _, body) =
        tests::procs::http("DELETE", &format!("{gm}/v1/jobs/{long}"), None).expect("cancel");
    assert_eq!(status, 202, "{body}");
    wait_until("the long job cancelled", Duration::from_secs(30), || {
        get_json(&format!("{gm}/v1/jobs/{long}"))["state"] == "cancelled"
    });
    let live = cluster
        .gms
        .iter_mut()
        .chain(&mut cluster.workers[..1])
        .chain(&mut cluster.lms);
    for p in live {
        let status = p.terminate(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "{}: {status:?}",
            p.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
