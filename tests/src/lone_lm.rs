//! One LM of two nodes with one worker and no GM, driven by hand: the tests post GM
//! messages to it (`/v1/messages`) and read its metrics. Used by the tests of the LM's
//! broker backlog (`services_bounded_memory`, `services_lm_broker_outage`).

use crate::checks::metric_sum;
use crate::procs::{credentials, http, http_raw, Proc};
use common::messages::{LaunchBatch, LaunchRequest, Placement};
use common::protocol::GmToLm;
use common::{GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use std::path::Path;

/// The LM (heartbeat 50 ms, broker at `amqp`, `--max-broker-backlog-bytes
/// backlog_bytes`) and its worker, logging in `dir`.
pub struct LoneLm {
    pub lm: Proc,
    pub worker: Proc,
}

impl std::fmt::Debug for LoneLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoneLm")
            .field("lm", &self.lm.url)
            .finish_non_exhaustive()
    }
}

impl LoneLm {
    pub fn start(dir: &Path, amqp: &str, backlog_bytes: u64) -> LoneLm {
        let backlog = backlog_bytes.to_string();
        let lm = LoneLm::spawn_lm(dir, amqp, &["--max-broker-backlog-bytes", &backlog]);
        let worker = LoneLm::spawn_worker(dir, &lm.url, &[]);
        LoneLm { lm, worker }
    }

    /// The LM alone, with `extra` flags.
    pub fn spawn_lm(dir: &Path, amqp: &str, extra: &[&str]) -> Proc {
        let mut args = strings(&[
            "--gms",
            "1",
            "--lms",
            "1",
            "--partition-size",
            "2",
            "--workers",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--heartbeat-ms",
            "50",
            "--amqp",
            amqp,
        ]);
        args.extend(strings(extra));
        Proc::spawn("local-master", &args, dir, "lm")
    }

    /// Its worker, reaching it at `lm_url`, with `extra` flags. Its data directory
    /// is `dir/worker-data`: the default one is named after the LM's host:port, and
    /// a free port used again by a later test made that test's worker list the
    /// earlier test's ended runs (job 1's tasks among them) as its own, so the new
    /// job 1 never ran (seen once in scripts/test.sh, services_worker_fence).
    pub fn spawn_worker(dir: &Path, lm_url: &str, extra: &[&str]) -> Proc {
        let data = dir.join("worker-data").display().to_string();
        let mut args = strings(&["--lm-url", lm_url, "--slot", "0", "--listen", "127.0.0.1:0"]);
        args.extend(strings(&["--data-dir", &data]));
        args.extend(crate::procs::task_identity_args());
        args.extend(strings(extra));
        Proc::spawn("worker", &args, dir, "worker")
    }

    /// The sum of metric family `name` on the LM's `/metrics`.
    pub fn metric(&self, name: &str) -> f64 {
        metric_of(&self.lm.url, name)
    }

    /// Posts `message` as GM 0 would: (status, head, body).
    pub fn post(&self, message: &GmToLm) -> (u16, String, String) {
        post_as_gm(&self.lm.url, message)
    }

    pub fn kill(&mut self) {
        self.worker.kill();
        self.lm.kill();
    }
}

/// The sum of metric family `name` on the `/metrics` of the service at `url`.
pub fn metric_of(url: &str, name: &str) -> f64 {
    let (_, _, page) = http("GET", &format!("{url}/metrics"), None).expect("metrics");
    metric_sum(&page, name)
}

/// Posts `message` to the LM at `lm_url` as GM 0 would: (status, head, body).
pub fn post_as_gm(lm_url: &str, message: &GmToLm) -> (u16, String, String) {
    let cluster = service_kit::cluster::Cluster::new(common::ClusterName::default(), "gm");
    let body = cluster.encode(message).expect("encode");
    let (status, head, body) = http_raw(
        "POST",
        &format!("{lm_url}/v1/messages"),
        common::codec::CONTENT_TYPE,
        &body,
        &[
            ("x-megha-cluster-token", credentials().secret.as_str()),
            (service_kit::cluster::CLUSTER_NAME_HEADER, "megha"),
        ],
    )
    .expect("POST /v1/messages");
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

/// Registers a worker with the LM at `lm_url` as the worker service does (shared
/// secret, order key `key`); asserts `200`.
pub fn register_worker(
    lm_url: &str,
    registration: &common::messages::WorkerRegistration,
    key: &str,
) {
    let cluster = service_kit::cluster::Cluster::new(common::ClusterName::default(), "worker");
    let body = cluster.encode(registration).expect("encode");
    let (status, _, body) = http_raw(
        "POST",
        &format!("{lm_url}/v1/register"),
        common::codec::CONTENT_TYPE,
        &body,
        &[
            ("x-megha-cluster-token", credentials().secret.as_str()),
            (service_kit::cluster::CLUSTER_NAME_HEADER, "megha"),
            (service_kit::auth::ORDER_KEY_HEADER, key),
        ],
    )
    .expect("POST /v1/register");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

/// Batch `seq` of GM 0: job `job`'s two 10 ms tasks on nodes 0 and 1.
pub fn two_task_batch(seq: u64, job: u64) -> GmToLm {
    two_task_batch_of(seq, job, Micros::from_millis(10))
}

/// [`two_task_batch`] of tasks lasting `duration`.
pub fn two_task_batch_of(seq: u64, job: u64, duration: Micros) -> GmToLm {
    let requests = (0..2)
        .map(|i| LaunchRequest {
            task: TaskSpec::short(TaskId::new(job, i), Resources::cores(1, 128), duration),
            node: NodeId(i),
            placement: Placement::Internal,
        })
        .collect();
    GmToLm::Launch(LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(0),
        seq,
        resend: false,
        requests,
    })
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}
