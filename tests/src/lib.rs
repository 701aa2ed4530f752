//! Shared helpers for the cross-crate tests (the tests themselves live in `tests/`).
//!
//! - [`ClusterBuilder`], [`task`] and [`Harness`] (here): fluent builders for clusters
//!   and tasks, and GM and LM cores wired by hand (no simulator, no network) so a test
//!   controls exactly which messages are delivered and when.
//! - [`procs`]: building and locating the service binaries, running a loopback
//!   cluster of processes, stopping them.
//! - [`broker`]: the RabbitMQ precondition (fails loudly when the broker is away).
//! - [`browser`]: headless Chromium for the dashboard test (DOM dump, screenshot).
//! - [`tls_broker`]: a TLS-only RabbitMQ node of a test's own (`amqps://`).
//! - [`pki`]: a private CA, a server certificate for localhost and the worker issuer.
//! - [`checks`]: reading `tasks.csv` back and checking safety invariants; [`dag`]:
//!   diamond DAG jobs and the check that stages ran in order.
//! - [`compose`]: the docker-compose.yml cluster of the compose tests (a project of
//!   their own, every port 0, removed on drop).
//! - [`gm_http`]: an embedded cluster's GMs behind their HTTP APIs on loopback.
//! - [`observer`]: a cluster's task events as seen on the broker.
//! - [`relay`]: a TCP relay a test cuts and restores (a broker that goes away).
//! - [`embedded_config`] (here): the settings of the embedded clusters the tests start.

pub mod broker;
pub mod browser;
pub mod checks;
pub mod compose;
pub mod dag;
pub mod gm_http;
pub mod lone_lm;
pub mod observer;
pub mod pki;
pub mod procs;
pub mod relay;
pub mod sim;
pub mod tls_broker;

use common::cluster::{ClusterSpec, LmSpec, NodeSpec};
use common::messages::LaunchBatch;
use common::{ConstraintSet, GmId, LmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{GlobalMaster, GmConfig};
use loadgen::replay::embedded::EmbeddedConfig;
use loadgen::trace::{TraceJob, TraceTask};
use local_master::{LmConfig, LocalMaster};

/// Builds a cluster: `ClusterBuilder::new(gms, lms, nodes_per_partition).cores(2)...`.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    spec: ClusterSpec,
}

impl ClusterBuilder {
    pub fn new(gms: u16, lms: u16, nodes_per_partition: usize) -> Self {
        let node = NodeSpec {
            capacity: Resources::cores(1, 1024),
            constraints: ConstraintSet::EMPTY,
        };
        ClusterBuilder {
            spec: ClusterSpec {
                gms,
                lms: (0..lms)
                    .map(|l| LmSpec {
                        id: LmId(l),
                        partitions: vec![vec![node; nodes_per_partition]; gms as usize],
                    })
                    .collect(),
            },
        }
    }

    /// Every node gets `cores` cores and `memory_mb` MiB.
    pub fn capacity(mut self, cores: u64, memory_mb: u64) -> Self {
        for lm in &mut self.spec.lms {
            for p in &mut lm.partitions {
                for n in p.iter_mut() {
                    n.capacity = Resources::cores(cores, memory_mb);
                }
            }
        }
        self
    }

    /// Gives node `slot` of partition `gm` in LM `lm` these constraints.
    pub fn node_constraints(mut self, lm: u16, gm: u16, slot: usize, ids: &[u64]) -> Self {
        self.spec.lms[lm as usize].partitions[gm as usize][slot].constraints =
            ConstraintSet::from_ids(ids.iter().copied()).expect("test constraint ids are < 64");
        self
    }

    pub fn build(self) -> ClusterSpec {
        self.spec
    }
}

/// A short task of job `job`, index 0, asking for `cores` cores and 1 MiB.
pub fn task(job: u64, cores: u64, constraints: &[u64]) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, 0),
        Resources::cores(cores, 1),
        Micros::from_secs(1),
    )
    .with_constraints(ConstraintSet::from_ids(constraints.iter().copied()).expect("ids are < 64"))
}

/// GMs and LMs of a cluster wired by hand.
#[derive(Debug)]
pub struct Harness {
    pub gms: Vec<GlobalMaster>,
    pub lms: Vec<LocalMaster>,
}

impl Harness {
    pub fn new(cluster: &ClusterSpec) -> Self {
        let lms: Vec<LocalMaster> = cluster
            .lms
            .iter()
            .map(|spec| LocalMaster::new(spec, cluster.gms, LmConfig::default(), Micros::ZERO))
            .collect();
        let gms = (0..cluster.gms)
            .map(|g| GlobalMaster::new(GmConfig::new(GmId(g), cluster.gms, lms.len() as u16)))
            .collect();
        Harness { gms, lms }
    }

    /// Delivers every LM's current state to every GM (a heartbeat round).
    pub fn heartbeat(&mut self, now: Micros) {
        for lm in &mut self.lms {
            let snapshot = lm.snapshot(now);
            for gm in &mut self.gms {
                gm.apply_snapshot(now, &snapshot);
            }
        }
    }

    /// Hands a batch to its LM and the response back to the GM that sent it.
    pub fn deliver(&mut self, now: Micros, batch: LaunchBatch) -> local_master::LmEffects {
        let gm = batch.gm.index();
        let mut effects = self.lms[batch.lm.index()]
            .handle_launch_batch(now, batch)
            .expect("batch addressed to an existing LM");
        if let Some(response) = &effects.response {
            self.gms[gm].handle_response(now, response);
        }
        effects.response.take();
        effects
    }
}

/// Trace jobs from (arrival in ms, task durations in ms) pairs, numbered in order.
pub fn trace(jobs: &[(u32, Vec<u32>)]) -> Vec<TraceJob> {
    jobs.iter()
        .enumerate()
        .map(|(i, (arrival_ms, durations))| TraceJob {
            id: i as u64,
            arrival: Micros(*arrival_ms as u64 * 1000),
            queue: None,
            stages: Vec::new(),
            tasks: durations
                .iter()
                .map(|d| TraceTask::with_duration(Micros(*d as u64 * 1000)))
                .collect(),
        })
        .collect()
}

/// Settings of an embedded cluster for a test: `cluster`, 2 workers per LM, 200 ms
/// heartbeats, at least 5 ms between change-triggered publications, launch batches of
/// up to 100, room for 1,000,000 queued tasks, no user queues, no QUEUEABLE work,
/// GM 0 designated. Tests change what they need with `..embedded_config(c)`.
pub fn embedded_config(cluster: ClusterSpec) -> EmbeddedConfig {
    EmbeddedConfig {
        cluster,
        workers_per_lm: 2,
        heartbeat: Micros::from_millis(200),
        publish_min_interval: std::time::Duration::from_millis(5),
        batch_size: 100,
        max_queued: 1_000_000,
        fairness: None,
        mercury: None,
        designated_gm: GmId(0),
        exec: None,
    }
}
