//! The networked side of a replay: jobs go to the GMs as JSON over HTTP, events come
//! from a durable queue bound to the `megha.events` topic exchange (it survives a
//! broker restart, and is deleted at the end of the run).

use super::driver::{SubmitError, Submitter};
use super::facts::ClusterFacts;
use common::events::TaskEvent;
use common::fairness::FairnessConfig;
use common::{JobId, Resources};
use global_master::service::api::NewTask;
use serde_json::{json, Value};
use service_kit::amqp::{subscribe, LinkStatus, Subscription, SubscriptionHandle};
use service_kit::topology::Exchange;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The JSON body of `POST /v1/jobs` for these tasks; queues by name (left out
/// without queues: the GMs' implicit `default` queue).
pub fn job_body(tasks: &[NewTask], queues: Option<&FairnessConfig>) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let mut task = json!({
                "resources": {"cpu_millis": t.resources.cpu_millis, "memory_mb": t.resources.memory_mb},
                "constraints": t.constraints.iter().collect::<Vec<_>>(),
                "duration_ms": t.duration.0 as f64 / 1000.0,
                "kind": t.kind,
                "tags": t.tags,
            });
            if let Some(name) = super::queues::queue_name(queues, t.queue) {
                task["queue"] = Value::String(name);
            }
            task
        })
        .collect();
    json!({ "tasks": tasks })
}

/// Submits over HTTP to `gm_urls[gm]`, naming each task's queue from `queues` and the
/// cluster in `x-megha-cluster` (a GM of another cluster refuses, 421). A full GM
/// (429), one that asks to come back later (503 with `Retry-After`: its broker is
/// behind, its body budget is in use) or one not reachable yet is retried by the
/// driver; any other refusal is final.
pub fn http_submitter(
    gm_urls: Vec<String>,
    client: reqwest::Client,
    queues: Option<Arc<FairnessConfig>>,
    cluster: &common::ClusterName,
) -> Submitter {
    let cluster = cluster.to_string();
    let urls: Arc<Vec<String>> = Arc::new(
        gm_urls
            .iter()
            .map(|u| format!("{}/v1/jobs", u.trim_end_matches('/')))
            .collect(),
    );
    Arc::new(move |gm: usize, tasks: Vec<NewTask>| {
        let url = urls[gm % urls.len()].clone();
        let client = client.clone();
        let body = job_body(&tasks, queues.as_deref());
        let cluster = cluster.clone();
        Box::pin(async move {
            let sent = client
                .post(&url)
                .header(service_kit::cluster::CLUSTER_NAME_HEADER, cluster)
                .json(&body)
                .send()
                .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) if e.is_connect() => {
                    return Err(SubmitError::Busy(Duration::from_millis(200)))
                }
                Err(e) => return Err(SubmitError::Refused(format!("{url}: {e}"))),
            };
            let status = resp.status();
            let retry_after = resp.headers().contains_key(reqwest::header::RETRY_AFTER);
            if status.as_u16() == 429 || (status.as_u16() == 503 && retry_after) {
                let secs = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(1.0);
                return Err(SubmitError::Busy(Duration::from_secs_f64(
                    secs.clamp(0.01, 30.0),
                )));
            }
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            if status.as_u16() != 202 {
                return Err(SubmitError::Refused(format!("{url}: {status}: {body}")));
            }
            body.get("job")
                .and_then(Value::as_u64)
                .map(JobId)
                .ok_or_else(|| SubmitError::Refused(format!("{url}: no job id in {body}")))
        })
    })
}

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
/// answer counts) within `wait`: a replay against a wrong or dead URL would
/// otherwise only find out through its submissions' retries.
pub async fn check_gms_reachable(
    client: &reqwest::Client,
    gm_urls: &[String],
    wait: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + wait;
    for url in gm_urls {
        let health = format!("{}/healthz", url.trim_end_matches('/'));
        loop {
            let attempt = client
                .get(&health)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            match attempt {
                Ok(_) => break,
                Err(e) if tokio::time::Instant::now() >= deadline => anyhow::bail!(
                    "--gm {url}: no answer from {health} within {} s ({e}); is the global master running, and is the URL right?",
                    wait.as_secs()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
    Ok(())
}

/// Reads what the events do not say from every GM: the cluster it sees (`/healthz`)
/// and its preemption counters (`/metrics`). A GM that does not answer is skipped
/// with a warning: the reports then lack what only it knew.
pub async fn gm_facts(client: &reqwest::Client, gm_urls: &[String]) -> ClusterFacts {
    let mut facts = ClusterFacts::default();
    for url in gm_urls {
        let base = url.trim_end_matches('/');
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
                let capacity =
                    serde_json::from_value::<Resources>(v["capacity"].clone()).unwrap_or_default();
                facts.add_gm(nodes, capacity, &metrics);
            }
            Err(e) => {
                tracing::warn!(gm = base, error = %e, "cannot read the GM's cluster view and counters")
            }
        }
    }
    facts
}

#[cfg(test)]
mod tests;
