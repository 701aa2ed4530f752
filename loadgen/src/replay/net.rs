//! The networked side of a replay: jobs go to the GMs as JSON over HTTP, events come
//! from a durable queue bound to the `megha.events` topic exchange (it survives a
//! broker restart, and is deleted at the end of the run).

use super::facts::ClusterFacts;
use common::events::TaskEvent;
use common::Resources;
use serde_json::Value;
use service_kit::amqp::{subscribe, LinkStatus, Subscription, SubscriptionHandle};
use service_kit::topology::Exchange;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

mod body;
mod submit;
pub use body::{gang_body, job_body};
pub use submit::http_submitter;

/// Consumes every task event of `cluster` into a channel, from its durable queue
/// `queue` (named `<cluster>.<queue>` on the broker).
pub fn amqp_events(
    url: String,
    cluster: service_kit::cluster::Cluster,
    queue: String,
) -> (
    mpsc::UnboundedReceiver<TaskEvent>,
    Arc<LinkStatus>,
    SubscriptionHandle,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = Subscription {
        exchange: Exchange::Events,
        binding: "task.#".into(),
        queue: Some(queue),
        ack: true,
        prefetch: 5000,
    };
    let (status, handle) =
        subscribe(
            url,
            cluster,
            sub,
            move |_, body| match service_kit::sinks::decode_events(body) {
                Ok(events) => {
                    for ev in events {
                        let _ = tx.send(ev);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "undecodable event ignored"),
            },
        );
    (rx, status, handle)
}

/// Fails fast, naming the URL, when a GM does not answer `GET /healthz` (any HTTP
/// answer counts, a standby's 503 too) at any of its addresses (`URL|URL...`) within
/// `wait`: a replay against a wrong or dead URL would otherwise only find out
/// through its submissions' retries.
pub async fn check_gms_reachable(
    client: &reqwest::Client,
    gm_urls: &[String],
    cluster: &common::ClusterName,
    wait: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + wait;
    for url in gm_urls {
        let addresses = service_kit::links::alternatives(url);
        'gm: loop {
            let mut last = None;
            for address in &addresses {
                let attempt = client
                    .get(format!("{address}/healthz"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await;
                match attempt {
                    Ok(resp) => {
                        // Every answer of a GM names its cluster: a replay into
                        // another cluster would have every job refused (421) and
                        // read no event, so it stops here, saying why first.
                        if let Some(theirs) = service_kit::links::foreign_answer(&resp, cluster) {
                            anyhow::bail!(
                                "cluster mismatch: --gm {url} belongs to cluster `{theirs}`, this replay to `{cluster}`: give loadgen the GMs' --cluster-name (MEGHA_CLUSTER_NAME), or point --gm at a GM of cluster `{cluster}`"
                            );
                        }
                        break 'gm;
                    }
                    Err(e) => last = Some(e),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                let e = last.map_or_else(|| "no address".to_owned(), |e| e.to_string());
                anyhow::bail!(
                    "--gm {url}: no answer from {url}/healthz within {} s ({e}); is the global master running, and is the URL right?",
                    wait.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// Reads what the events do not say from every GM, at the first of its addresses
/// that serves: the cluster it sees (`/healthz`) and its preemption counters
/// (`/metrics`). A GM that does not answer is skipped with a warning: the reports
/// then lack what only it knew.
pub async fn gm_facts(client: &reqwest::Client, gm_urls: &[String]) -> ClusterFacts {
    let mut facts = ClusterFacts::default();
    for url in gm_urls {
        let mut last = None;
        for base in service_kit::links::alternatives(url) {
            let get = |path: &str| {
                let request = client.get(format!("{base}{path}")).send();
                async move { request.await?.error_for_status() }
            };
            let health = async {
                let v: Value = get("/healthz").await?.json().await?;
                let metrics = get("/metrics").await?.text().await?;
                Ok::<_, reqwest::Error>((v, metrics))
            };
            match health.await {
                Ok((v, metrics)) => {
                    let nodes = v["nodes"].as_u64().unwrap_or(0) as usize;
                    let capacity = serde_json::from_value::<Resources>(v["capacity"].clone())
                        .unwrap_or_default();
                    facts.add_gm(nodes, capacity, &metrics);
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            tracing::warn!(gm = url, error = %e, "cannot read the GM's cluster view and counters");
        }
    }
    facts
}

#[cfg(test)]
mod tests;
