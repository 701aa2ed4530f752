//! Configuration of the `local-master` binary: flags > environment > TOML file >
//! defaults.

use anyhow::{bail, Context, Result};
use clap::Parser;
use common::cluster::{ClusterSpec, LmSpec};
use common::{Micros, Resources};
use serde::Deserialize;
use service_kit::logging::LogFormat;
use service_kit::merge_options;
use service_kit::settings::load_file;
use std::path::PathBuf;
use std::time::Duration;

/// A Local Master of the Megha federated scheduler.
///
/// Owns one cluster of worker nodes, split into one partition per GM. Validates the
/// launch batches GMs send over HTTP (POST /v1/launch, bincode) against its true
/// state, starts tasks on its workers, and publishes its state to every GM on
/// RabbitMQ each heartbeat and (rate-limited) whenever it changes.
///
/// Every LM of a cluster must be started with the same cluster description: either
/// --cluster FILE (a Megha simulator config) or --lms/--partition-size/--seed (a
/// generated cluster), plus --gms. Workers register themselves (see `worker --help`);
/// the LM publishes no state until --workers of them have.
///
/// Minimal example (LM 0 of 2, 2 GMs, 2 nodes per partition, 2 worker processes):
///   local-master --id 0 --gms 2 --lms 2 --partition-size 2 --workers 2 --listen 127.0.0.1:9100
///
/// Settings also come from environment variables (shown below) or a TOML file
/// (--config; keys are the long flag names with `_`). Flags > env > file > defaults.
#[derive(Parser, Debug, Default, Deserialize)]
#[command(
    name = "local-master",
    version,
    about,
    long_about,
    verbatim_doc_comment
)]
#[serde(default, deny_unknown_fields)]
pub struct LmArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEGHA_LM_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// This LM's number, 0..lms. Default 0.
    #[arg(long, env = "MEGHA_LM_ID")]
    pub id: Option<u16>,
    /// Number of GMs (= partitions per LM). Default 1.
    #[arg(long, env = "MEGHA_GMS")]
    pub gms: Option<u16>,
    /// Megha simulator cluster config (JSON). Overrides the generated-cluster settings.
    #[arg(long, env = "MEGHA_CLUSTER_FILE", value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,
    /// Generated cluster: number of LMs. Default 1.
    #[arg(long, env = "MEGHA_LMS")]
    pub lms: Option<u16>,
    /// Generated cluster: nodes per partition. Default 4.
    #[arg(long, env = "MEGHA_PARTITION_SIZE")]
    pub partition_size: Option<usize>,
    /// CPU cores per node. Default 1.
    #[arg(long, env = "MEGHA_NODE_CPUS")]
    pub node_cpus: Option<u64>,
    /// Memory per node in MiB. Default 16384.
    #[arg(long, env = "MEGHA_NODE_MEMORY_MB")]
    pub node_memory_mb: Option<u64>,
    /// Seed of the generated cluster's machine constraints. Default 42.
    #[arg(long, env = "MEGHA_SEED")]
    pub seed: Option<u64>,
    /// Worker processes expected to register (node n goes to slot n mod workers). Default 1.
    #[arg(long, env = "MEGHA_LM_WORKERS")]
    pub workers: Option<u32>,
    /// Address for the internal HTTP API. Default 127.0.0.1:9100.
    #[arg(long, env = "MEGHA_LM_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// RabbitMQ URL. Default amqp://guest:guest@127.0.0.1:5672/%2f
    #[arg(long, env = "MEGHA_AMQP_URL", value_name = "URL")]
    pub amqp: Option<String>,
    /// Heartbeat period in milliseconds (the paper uses 10000). Default 1000.
    #[arg(long, env = "MEGHA_LM_HEARTBEAT_MS")]
    pub heartbeat_ms: Option<u64>,
    /// Least time between two state publications triggered by changes, ms. Default 5.
    #[arg(long, env = "MEGHA_LM_PUBLISH_MIN_INTERVAL_MS")]
    pub publish_min_interval_ms: Option<u64>,
    /// On SIGTERM, how long to wait for running tasks to finish. Default 10000.
    #[arg(long, env = "MEGHA_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: Option<u64>,
    /// Log format: text or json. Default text.
    #[arg(long, env = "MEGHA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

#[derive(Clone, Debug)]
pub struct LmSettings {
    pub spec: LmSpec,
    pub gms: u16,
    pub workers: u32,
    pub listen: String,
    pub amqp: String,
    pub heartbeat: Micros,
    pub publish_min_interval: Duration,
    pub drain_timeout: Duration,
    pub log_format: LogFormat,
}

impl LmArgs {
    pub fn resolve(mut self) -> Result<LmSettings> {
        let file: LmArgs = load_file(self.config.as_deref())?;
        merge_options!(
            self,
            file,
            id,
            gms,
            cluster_file,
            lms,
            partition_size,
            node_cpus,
            node_memory_mb,
            seed,
            workers,
            listen,
            amqp,
            heartbeat_ms,
            publish_min_interval_ms,
            drain_timeout_ms,
            log_format
        );
        let id = self.id.unwrap_or(0);
        let gms = self.gms.unwrap_or(1);
        let capacity = Resources::cores(
            self.node_cpus.unwrap_or(1),
            self.node_memory_mb.unwrap_or(16384),
        );
        if capacity.any_zero() || gms == 0 {
            bail!("--node-cpus, --node-memory-mb and --gms must be positive");
        }
        let cluster = match &self.cluster_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                ClusterSpec::from_megha_json(&text, capacity)
                    .with_context(|| format!("in cluster config {}", path.display()))?
            }
            None => {
                let (lms, p) = (self.lms.unwrap_or(1), self.partition_size.unwrap_or(4));
                if lms == 0 || p == 0 {
                    bail!("--lms and --partition-size must be positive");
                }
                ClusterSpec::generate(gms, lms, p, capacity, self.seed.unwrap_or(42))
            }
        };
        if cluster.gms != gms {
            bail!(
                "the cluster has {} partitions per LM but --gms is {gms}",
                cluster.gms
            );
        }
        let Some(spec) = cluster.lms.get(id as usize).cloned() else {
            bail!(
                "--id {id} is not an LM of this cluster ({} LMs)",
                cluster.lms.len()
            );
        };
        let workers = self.workers.unwrap_or(1);
        if workers == 0 {
            bail!("--workers must be at least 1");
        }
        Ok(LmSettings {
            spec,
            gms,
            workers,
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:9100".into()),
            amqp: self
                .amqp
                .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into()),
            heartbeat: Micros::from_millis(self.heartbeat_ms.unwrap_or(1000).max(1)),
            publish_min_interval: Duration::from_millis(self.publish_min_interval_ms.unwrap_or(5)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(10_000)),
            log_format: self.log_format.unwrap_or_default(),
        })
    }
}
