//! The GMs of an embedded cluster behind their real HTTP APIs on loopback, with
//! forwarding to the designated GM, and polling those APIs.

use common::fairness::FairnessConfig;
use common::GmId;
use global_master::service::http::router;
use loadgen::replay::embedded::http::{api_state_with_queues, Peers};
use loadgen::replay::embedded::EmbeddedCluster;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serves every GM of `cluster` on a free loopback port (no queues, no broker);
/// the non-designated GMs forward LRAs and GUARANTEED work to `designated`, and
/// every GM requests naming another GM's job to that GM.
/// Returns the base URLs, by GM id. Call inside the cluster's actix System.
pub async fn serve_gm_apis(cluster: &EmbeddedCluster, designated: GmId) -> Vec<String> {
    serve_gm_apis_with_queues(cluster, designated, None).await
}

/// [`serve_gm_apis`] with the user queues the cluster was started with.
pub async fn serve_gm_apis_with_queues(
    cluster: &EmbeddedCluster,
    designated: GmId,
    fairness: Option<Arc<FairnessConfig>>,
) -> Vec<String> {
    let mut urls = Vec::new();
    let mut listeners = Vec::new();
    for _ in &cluster.gms {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        urls.push(format!("http://{}", l.local_addr().expect("addr")));
        listeners.push(l);
    }
    for (g, listener) in listeners.into_iter().enumerate() {
        let peers = Peers {
            designated,
            urls: urls.clone(),
        };
        let state = api_state_with_queues(cluster, g, Some(peers), fairness.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router(state)).await;
        });
    }
    urls
}

/// Polls `GET url` until `done` holds for the JSON answer (fails after 30 s).
pub async fn wait_for(client: &reqwest::Client, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v: Value = client
            .get(url)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting on {url}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
