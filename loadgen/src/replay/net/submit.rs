//! Submitting a replay's jobs over HTTP: each GM may have several addresses (a GM and
//! its standby, `--gm http://gm-0:8080|http://gm-0-standby:8080,...`), and every job
//! carries an `Idempotency-Key`, so a submission whose answer was lost (the GM killed
//! while answering) is sent again, to whichever address serves, without making a
//! second job (the GM keeps its keys in its data dir, which a standby takes over).

use super::super::driver::{JobSubmission, SubmitError, Submitter};
use super::body::{gang_body, job_body};
use common::fairness::FairnessConfig;
use common::JobId;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long to wait between rounds over a GM's addresses when none answered.
const ROUND_PAUSE: Duration = Duration::from_millis(200);
/// Rounds after an unanswered delivery (the key then must be kept) before giving up.
const ROUNDS_IN_DOUBT: u32 = 300;

/// One GM's addresses (`|`-separated alternatives) and the one that answered last.
#[derive(Debug)]
struct Addresses {
    jobs_urls: Vec<String>,
    current: AtomicUsize,
}

impl Addresses {
    fn parse(gm: &str) -> Addresses {
        let urls = service_kit::links::alternatives(gm);
        Addresses {
            jobs_urls: urls.iter().map(|u| format!("{u}/v1/jobs")).collect(),
            current: AtomicUsize::new(0),
        }
    }
}

/// What one POST to one address came to.
enum Attempt {
    Accepted(JobId),
    /// Not delivered (no connection): nothing can have been accepted.
    NotDelivered,
    /// Sent, no answer (reset, timeout): it may have been accepted.
    InDoubt,
    /// This address does not serve now (503: a standby, a GM going away).
    NotServing(Duration),
    /// The GM serves but asks to come back (429, or 409: the key is in flight).
    Later(Duration),
    Refused(String),
}

/// The `Retry-After` of an answer in seconds (1 s when absent), clamped.
fn retry_after(resp: &reqwest::Response) -> Duration {
    let secs = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(secs.clamp(0.01, 30.0))
}

async fn attempt(
    client: &reqwest::Client,
    url: &str,
    cluster: &str,
    key: &str,
    body: &[u8],
) -> Attempt {
    let sent = client
        .post(url)
        .header(service_kit::cluster::CLUSTER_NAME_HEADER, cluster)
        .header("Idempotency-Key", key)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_vec())
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) if e.is_connect() => return Attempt::NotDelivered,
        Err(e) => {
            tracing::warn!(url, key, error = %e, "no answer to a submission: sending it again with its key");
            return Attempt::InDoubt;
        }
    };
    let status = resp.status().as_u16();
    match status {
        503 => return Attempt::NotServing(retry_after(&resp)),
        429 | 409 => return Attempt::Later(retry_after(&resp)),
        _ => {}
    }
    let body: Value = match resp.json().await {
        Ok(v) => v,
        Err(_) if status == 202 => return Attempt::InDoubt,
        Err(_) => Value::Null,
    };
    if status != 202 {
        return Attempt::Refused(format!("{url}: {status}: {body}"));
    }
    match body.get("job").and_then(Value::as_u64) {
        Some(job) => Attempt::Accepted(JobId(job)),
        None => Attempt::Refused(format!("{url}: no job id in {body}")),
    }
}

/// Submits over HTTP to GM `gm` of `gms` (each `URL` or `URL|URL...`), naming each
/// task's queue from `queues` and the cluster in `x-megha-cluster` (a GM of another
/// cluster refuses, 421). Each call tries the GM's addresses from the one that
/// answered last; one that is unreachable or answers 503 (a standby not in charge) is
/// skipped. When none accepts: a full GM (429), or only unreachable or not serving
/// ones, is retried by the driver; a submission that may have been delivered is sent
/// again with the same key until a GM answers; any other refusal is final.
pub fn http_submitter(
    gms: Vec<String>,
    client: reqwest::Client,
    queues: Option<Arc<FairnessConfig>>,
    cluster: &common::ClusterName,
) -> Submitter {
    let cluster: Arc<str> = cluster.to_string().into();
    let gms: Arc<Vec<Addresses>> = Arc::new(gms.iter().map(|g| Addresses::parse(g)).collect());
    let run = format!(
        "loadgen-{}-{}",
        std::process::id(),
        service_kit::clock::now().0
    );
    let sequence = Arc::new(AtomicU64::new(0));
    Arc::new(move |gm: usize, job: JobSubmission| {
        let (gms, client, cluster) = (gms.clone(), client.clone(), cluster.clone());
        let key = format!("{run}-{}", sequence.fetch_add(1, Ordering::Relaxed));
        let mut body = job_body(&job.tasks, job.dag.as_deref(), queues.as_deref());
        if let Some(gang) = &job.gang {
            body["gang"] = gang_body(gang);
        }
        let body = serde_json::to_vec(&body).unwrap_or_default();
        Box::pin(async move {
            let addresses = &gms[gm % gms.len()];
            let n = addresses.jobs_urls.len().max(1);
            let mut in_doubt = false;
            for round in 0.. {
                let first = addresses.current.load(Ordering::Relaxed);
                let mut wait = ROUND_PAUSE;
                for k in 0..n {
                    let i = (first + k) % n;
                    let url = &addresses.jobs_urls[i];
                    match attempt(&client, url, &cluster, &key, &body).await {
                        Attempt::Accepted(job) => {
                            addresses.current.store(i, Ordering::Relaxed);
                            return Ok(job);
                        }
                        Attempt::NotDelivered => {}
                        Attempt::InDoubt => in_doubt = true,
                        Attempt::NotServing(after) => wait = wait.max(after),
                        Attempt::Later(after) => {
                            addresses.current.store(i, Ordering::Relaxed);
                            if !in_doubt {
                                return Err(SubmitError::Busy(after));
                            }
                            wait = wait.max(after);
                            break;
                        }
                        Attempt::Refused(m) => return Err(SubmitError::Refused(m)),
                    }
                }
                if !in_doubt {
                    // Nothing can have been accepted: the driver retries (a new key).
                    return Err(SubmitError::Busy(wait.min(ROUND_PAUSE * 5)));
                }
                if round >= ROUNDS_IN_DOUBT {
                    break;
                }
                tokio::time::sleep(wait.min(ROUND_PAUSE * 5)).await;
            }
            Err(SubmitError::Refused(format!(
                "GM {gm}: no answer from {:?} with key {key} after {ROUNDS_IN_DOUBT} rounds",
                addresses.jobs_urls
            )))
        })
    })
}
