//! Multi-process with a real RabbitMQ: an LRA submitted to GM 1 is forwarded over
//! HTTP to GM 0 (the designated GM), placed respecting its anti-affinity, run, and
//! seen to finish through the `task.finished` events on the broker. Fails (never
//! skips) when RabbitMQ is not running.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, http, LoopbackCluster};

#[test]
fn an_lra_sent_to_another_gm_is_placed_by_the_designated_gm_and_finishes() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-lra-loopback-{}", std::process::id()));
    // 2 GMs, 2 LMs, 2 nodes per partition: 8 one-core nodes.
    let cluster = LoopbackCluster::start(2, 2, 2, 2, &broker.url, &dir.join("logs"));
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let lra = r#"{"containers":[{"resources":{"cpu_millis":500,"memory_mb":64},"tags":["w"],
        "count":5,"duration_ms":1500}],
        "constraints":[{"subject_tag":"w","tag":"w","c_max":0,"node_group":"node","hard":true}]}"#;
    let (status, _, body) = http("POST", &format!("{gm1}/v1/lras"), Some(lra)).expect("post");
    assert_eq!(status, 202, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("json");
    let id = answer["lra"].as_u64().expect("id");
    assert_eq!(id >> 48, 0, "GM 0 accepted it");

    let deadline = Instant::now() + Duration::from_secs(40);
    let mut seen_placed = None;
    let last = loop {
        let v = get_json(&format!("{gm1}/v1/lras/{id}"));
        if seen_placed.is_none() && v["state"] != "pending" {
            seen_placed = Some(v.clone());
        }
        if v["state"] == "finished" {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "LRA never finished: {v}; logs in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let nodes: BTreeSet<(u64, u64)> = last["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| {
            (
                c["lm"].as_u64().expect("lm"),
                c["node"].as_u64().expect("node"),
            )
        })
        .collect();
    assert_eq!(nodes.len(), 5, "one `w` container per node: {last}");
    assert!(seen_placed.is_some());
    let launched = cluster.metric(&cluster.gms[..1], "megha_gm_lra_containers_launched_total");
    let ended = cluster.metric(&cluster.gms[..1], "megha_gm_lra_containers_ended_total");
    assert_eq!((launched, ended), (5.0, 5.0));
    // The status is the same whichever GM is asked.
    assert_eq!(
        get_json(&format!("{gm0}/v1/lras/{id}"))["state"],
        "finished"
    );
}
