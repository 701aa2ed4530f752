//! Embedded mode with both GMs' HTTP APIs on loopback: LRAs and GUARANTEED tasks
//! submitted to the non-designated GM are forwarded to the designated one, placed by
//! its LRA path (anti-affinity respected) or its core path, and run; the ends of LRA
//! containers reach the designated GM; a forwarded request is never forwarded again.

use common::cluster::ClusterSpec;
use common::events::{TaskEvent, TaskEventKind};
use common::{GmId, Micros, Resources};
use global_master::core::lra_path::LraPathConfig;
use global_master::core::GmConfig;
use global_master::lra::Placer;
use global_master::service::admission::route::FORWARDED_BY;
use loadgen::cli::replay::in_actix_system;
use loadgen::replay::embedded::start_with;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tests::embedded_config;
use tests::gm_http::{serve_gm_apis, wait_for};

#[test]
fn lras_and_guaranteed_tasks_sent_to_another_gm_run_on_the_designated_gm() {
    let seen: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
    let record = seen.clone();
    in_actix_system(async move {
        // 2 GMs, 2 LMs, 2 nodes per partition: 8 nodes of 2 cores.
        let cfg = embedded_config(ClusterSpec::generate(2, 2, 2, Resources::cores(2, 4096), 3));
        let tune = |c: GmConfig| GmConfig {
            designated_gm: GmId(0),
            lra: LraPathConfig {
                interval: Micros::from_millis(100),
                placer: Placer::parse("ilp").expect("ilp"),
                nodes_per_rack: 2,
                groups: Default::default(),
            },
            ..c
        };
        let events = Arc::new(move |batch: Vec<TaskEvent>| {
            record.lock().expect("events").extend(batch);
        });
        let cluster = start_with(&cfg, &tune, events)
            .await
            .expect("embedded cluster");
        let client = reqwest::Client::new();
        let urls = serve_gm_apis(&cluster, GmId(0)).await;
        let other = &urls[1];

        // Six one-core containers, at most one per node (hard anti-affinity), long.
        let lra = json!({
            "containers": [{"resources": {"cpu_millis": 1000, "memory_mb": 256},
                            "tags": ["w"], "count": 6, "duration_ms": 600000}],
            "constraints": [{"subject_tag": "w", "tag": "w", "c_max": 0,
                             "node_group": "node", "hard": true}]
        });
        let answer = client
            .post(format!("{other}/v1/lras"))
            .json(&lra)
            .send()
            .await
            .expect("post");
        assert_eq!(answer.status().as_u16(), 202);
        let id = answer.json::<Value>().await.expect("json")["lra"]
            .as_u64()
            .expect("id");
        // Forwarded: the designated GM holds it (ids carry the GM number up top).
        assert_eq!(id >> 48, 0, "the designated GM answered");
        let status = wait_for(&client, &format!("{other}/v1/lras/{id}"), |v| {
            v["state"] == "running"
        })
        .await;
        let nodes: Vec<(u64, u64)> = status["containers"]
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
        assert_eq!(nodes.len(), 6);
        let distinct: BTreeSet<_> = nodes.iter().collect();
        assert_eq!(
            distinct.len(),
            6,
            "anti-affinity: one `w` per node: {nodes:?}"
        );

        // A short LRA runs and finishes: the designated GM learns the end.
        let short = json!({"containers": [{"resources": {"cpu_millis": 500, "memory_mb": 64},
                                            "tags": ["s"], "count": 2, "duration_ms": 20}]});
        let answer: Value = client
            .post(format!("{other}/v1/lras"))
            .json(&short)
            .send()
            .await
            .expect("post")
            .json()
            .await
            .expect("json");
        let short_id = answer["lra"].as_u64().expect("id");
        wait_for(&client, &format!("{}/v1/lras/{short_id}", urls[0]), |v| {
            v["state"] == "finished"
        })
        .await;

        // A GUARANTEED task sent to the other GM runs, placed by the designated GM.
        let job = json!({"tasks": [{"resources": {"cpu_millis": 500, "memory_mb": 64},
                                    "duration_ms": 10, "kind": "guaranteed"}]});
        let answer = client
            .post(format!("{other}/v1/jobs"))
            .json(&job)
            .send()
            .await
            .expect("post");
        assert_eq!(answer.status().as_u16(), 202);
        let job_id = answer.json::<Value>().await.expect("json")["job"]
            .as_u64()
            .expect("job");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = seen.lock().expect("events").clone();
            let mine: Vec<&TaskEvent> = events.iter().filter(|e| e.task.job.0 == job_id).collect();
            if mine
                .iter()
                .any(|e| matches!(e.kind, TaskEventKind::Finished { .. }))
            {
                assert!(mine
                    .iter()
                    .any(|e| matches!(e.kind, TaskEventKind::Dispatched { gm: GmId(0), .. })));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "guaranteed task never finished: {mine:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Its status is asked of the GM it was sent to, which asks the designated GM.
        let status: Value = client
            .get(format!("{other}/v1/jobs/{job_id}"))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        assert_eq!(
            (&status["job"], &status["tasks"]),
            (&json!(job_id), &json!(1)),
            "{status}"
        );

        // A forwarded request reaching a GM that is not designated is not forwarded on.
        let looped = client
            .post(format!("{other}/v1/lras"))
            .header(FORWARDED_BY, "0")
            .json(&short)
            .send()
            .await
            .expect("post");
        assert_eq!(looped.status().as_u16(), 421);
        // Bad input is refused by the first GM, naming the field.
        let bad = json!({"containers": [{"resources": {"cpu_millis": 1, "memory_mb": 1}}],
                         "constraints": [{"subject_tag": "w", "tag": "w", "c_min": 2,
                                          "c_max": 1, "node_group": "node"}]});
        let refused = client
            .post(format!("{other}/v1/lras"))
            .json(&bad)
            .send()
            .await
            .expect("post");
        assert_eq!(refused.status().as_u16(), 422);
        let body: Value = refused.json().await.expect("json");
        assert_eq!(body["field"], "constraints[0].c_min");
    });
}
