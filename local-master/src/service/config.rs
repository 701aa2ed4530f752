//! Configuration of the `local-master` binary: flags > environment > TOML file >
//! defaults.

use crate::queueable::{PromotionPolicy, QueueableConfig};
use anyhow::{bail, Context, Result};
use clap::Parser;
use common::cluster::{ClusterSpec, LmSpec};
use common::fairness::{FairnessConfig, SharePolicy};
use common::{Micros, Resources};
use serde::{Deserialize, Serialize};
use service_kit::settings::{load_file, CommonArgs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A Local Master of the Megha federated scheduler.
///
/// Owns one cluster of worker nodes, split into one partition per GM. Validates the
/// launch batches GMs send over HTTP (`GmToLm::Launch` on POST /v1/messages, bincode) against its true
/// state, starts tasks on its workers, and publishes its state to every GM on
/// RabbitMQ each heartbeat and (rate-limited) whenever it changes.
///
/// Every LM of a cluster must be started with the same cluster description: either
/// --cluster-file FILE (a Megha simulator config) or --lms/--partition-size/--seed (a
/// generated cluster), plus --gms. Workers register themselves (see `worker --help`);
/// the LM publishes no state until --workers of them have.
///
/// Minimal example (LM 0 of 2, 2 GMs, 2 nodes per partition, 2 worker processes):
///   local-master --id 0 --gms 2 --lms 2 --partition-size 2 --workers 2 --listen 127.0.0.1:9100
///
/// Fairness: give every LM and GM the same --queue list; the LM then verifies each
/// preemption a GM asks for (`GmToLm::Preempt` on POST /v1/messages) against its own per-queue usage, kills
/// the victims on their workers and hands them back to the GM that serves their
/// queue, which it reaches at --gm-url (one per GM, in GM-id order).
///
/// QUEUEABLE work (Mercury): with --queueable the LM accepts QUEUEABLE tasks into
/// worker queues, kills running QUEUEABLE work to make room for other tasks and hands
/// it back to its GM at --gm-url (required), and may shed, cap, limit and promote:
///   local-master ... --queueable --queueable-cap 0.8 --shed-k 1.5 \
///     --queueable-quota max:50,ratio:2 --promote-after-ms 30000 --gm-url http://g0,http://g1
///
/// Settings also come from environment variables (shown below) or a TOML file
/// (--config; keys are the long flag names with `_`). Flags > env > file > defaults.
#[derive(Parser, Clone, Debug, Default, Serialize, Deserialize)]
#[command(
    name = "local-master",
    version,
    about,
    long_about,
    verbatim_doc_comment
)]
#[serde(default)]
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
    /// Cluster file (JSON): a Megha simulator config, or a description with named node
    /// attributes (docs/alsched.md; give the GMs the same file). Overrides the
    /// generated-cluster settings.
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
    /// A worker that sends nothing (no report, no liveness check; workers check every
    /// --lm-check-ms, default 1000) for this long is declared lost: its nodes are down
    /// and its tasks end `lost` at their GMs, which may retry them. A slot no worker
    /// registered for within this time after the LM started is down too, so the LM
    /// gets ready with the workers it has. Milliseconds; default 10000.
    #[arg(long, env = "MEGHA_LM_WORKER_TIMEOUT_MS", value_name = "MS")]
    pub worker_timeout_ms: Option<u64>,
    /// Workers fence themselves: a worker this LM has not confirmed for 3/5 of
    /// --worker-timeout-ms (cut off, or this LM down) stops its tasks and reports them
    /// lost, so that no task the GM retries after the timeout still runs there too.
    /// The price: an LM down for longer than that costs its workers their running
    /// tasks (retried). `false` keeps tasks running through any LM outage, at the
    /// risk of a task running twice after a partition. Default true.
    #[arg(
        long,
        env = "MEGHA_LM_WORKER_FENCE",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub worker_fence: Option<bool>,
    /// Address for the internal HTTP API. Default 127.0.0.1:9100.
    #[arg(long, env = "MEGHA_LM_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Directory for the LM's life counter (`life`): each start takes a life above
    /// the previous one even if this host's clock went back. The LM keeps no other
    /// state: its tasks are its workers'. Default: none (the life is the start
    /// time in microseconds).
    #[arg(long, env = "MEGHA_LM_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
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
    /// Memory for task events while the broker is away or slow, in bytes: events are
    /// never dropped, they wait in memory; past this many, the LM answers launch
    /// batches and preemption requests 503 with Retry-After (the GMs send them again
    /// later) instead of taking work whose events it could only buffer. Running
    /// tasks still report and cancellations still apply. Default 67108864 (64 MiB).
    #[arg(long, env = "MEGHA_LM_MAX_BROKER_BACKLOG_BYTES", value_name = "BYTES")]
    pub max_broker_backlog_bytes: Option<u64>,
    /// A user queue NAME:SHARE:GM (repeatable, or comma-separated; TOML `queues`).
    /// The same list, in the same order, as the GMs'. Default: none (no preemption).
    #[arg(
        long = "queue",
        env = "MEGHA_QUEUES",
        value_delimiter = ',',
        value_name = "NAME:SHARE:GM"
    )]
    pub queues: Option<Vec<String>>,
    /// How a queue's share is measured: drf (dominant of CPU and memory) or cpu.
    /// Default drf.
    #[arg(long, env = "MEGHA_SHARE_POLICY", value_name = "drf|cpu")]
    pub share_policy: Option<SharePolicy>,
    /// Base URL of a GM (repeatable or comma-separated, in GM-id order; TOML
    /// `gm_urls`): where task ends are reported and preempted tasks go back to their
    /// queue. Required with --queue; without it GMs learn task ends only from the
    /// event stream. A GM with a standby (`global-master --standby`): both URLs,
    /// `|`-separated (`http://gm-0:8080|http://gm-0-standby:8080`); whichever
    /// serves gets the messages.
    #[arg(
        long = "gm-url",
        env = "MEGHA_GM_URLS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub gm_urls: Option<Vec<String>>,
    /// Accept QUEUEABLE tasks (Mercury): worker queues, reclaim by killing them for
    /// other work, handing them back to their GM (needs --gm-url). Default off.
    #[arg(
        long,
        env = "MEGHA_LM_QUEUEABLE",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub queueable: Option<bool>,
    /// Share of each node's capacity running QUEUEABLE work may hold, in (0, 1].
    /// Give workers the same --queueable-cap. Default 1 (no cap).
    #[arg(long, env = "MEGHA_QUEUEABLE_CAP", value_name = "FRACTION")]
    pub queueable_cap: Option<f64>,
    /// T_l of the queuing-delay estimate R = T_q + T_r + T_l, in ms. Default 10.
    #[arg(long, env = "MEGHA_LM_LAUNCH_OVERHEAD_MS", value_name = "MS")]
    pub launch_overhead_ms: Option<u64>,
    /// Load shedding: at every heartbeat, drop queued QUEUEABLE work from nodes whose
    /// estimate exceeds mean + K·sigma (it goes back to its GM). Default off.
    #[arg(long, env = "MEGHA_LM_SHED_K", value_name = "K")]
    pub shed_k: Option<f64>,
    /// Per-job limit on outstanding QUEUEABLE containers: none, max:N, ratio:R
    /// (per GUARANTEED container) or max:N,ratio:R. The same as the GMs'. Default none.
    #[arg(long, env = "MEGHA_QUEUEABLE_QUOTA", value_name = "max:N|ratio:R|none")]
    pub queueable_quota: Option<String>,
    /// Promote QUEUEABLE tasks that have run this long to GUARANTEED (never killed
    /// again), at every heartbeat. Milliseconds; default off.
    #[arg(long, env = "MEGHA_LM_PROMOTE_AFTER_MS", value_name = "MS")]
    pub promote_after_ms: Option<u64>,
    /// Most promotions per heartbeat (with --promote-after-ms). Default 16.
    #[arg(long, env = "MEGHA_LM_PROMOTE_PER_TICK", value_name = "N")]
    pub promote_per_tick: Option<usize>,
    /// Networks (CIDR, comma-separated) a registering worker's callback URL must lie
    /// in. Default: loopback, plus the /24 (IPv6: /64) of --listen when it names one
    /// address.
    #[arg(
        long,
        env = "MEGHA_WORKER_NETWORKS",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub worker_networks: Option<Vec<String>>,
    /// The rules that bound preemption (`--preempt-*`).
    #[command(flatten)]
    #[serde(flatten)]
    pub preempt: service_kit::settings::PreemptArgs,
    /// Logging, the cluster's name and credential, TLS, --print-config.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

#[derive(Clone, Debug)]
pub struct LmSettings {
    pub spec: LmSpec,
    pub gms: u16,
    pub workers: u32,
    /// See `--worker-timeout-ms`.
    pub worker_timeout: Duration,
    /// See `--worker-fence`.
    pub worker_fence: bool,
    pub listen: String,
    /// See `--data-dir`.
    pub data_dir: Option<std::path::PathBuf>,
    pub amqp: String,
    pub heartbeat: Micros,
    pub publish_min_interval: Duration,
    pub drain_timeout: Duration,
    /// See `--max-broker-backlog-bytes`.
    pub max_broker_backlog_bytes: u64,
    /// User queues; `None`: no fairness (preemption requests are refused).
    pub fairness: Option<Arc<FairnessConfig>>,
    /// GM base URLs by GM id (empty without queues or QUEUEABLE work).
    pub gm_urls: Vec<String>,
    /// QUEUEABLE work (Mercury); `None`: QUEUEABLE requests are refused.
    pub queueable: Option<QueueableConfig>,
    pub process: service_kit::runtime::ProcessSettings,
    /// `None`: open mode (loopback only; checked when serving).
    pub cluster_secret: Option<service_kit::auth::ClusterSecret>,
    /// See `--cluster-name`.
    pub cluster_name: common::ClusterName,
    pub worker_networks: service_kit::auth::WorkerNetworks,
    /// HTTPS and the extra CA clients trust.
    pub tls: service_kit::tls::TlsSettings,
}

impl LmArgs {
    pub fn resolve(mut self) -> Result<LmSettings> {
        let file: LmArgs = load_file(self.config.as_deref())?;
        let config = self.config.take();
        self = service_kit::settings::layer(&self, &file)?;
        self.config = config;
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
                common::cluster_described::read_cluster_file(&text, capacity)
                    .map(|(cluster, _names)| cluster)
                    .with_context(|| format!("in cluster file {}", path.display()))?
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
        let worker_timeout_ms = self.worker_timeout_ms.unwrap_or(10_000);
        if worker_timeout_ms < 100 {
            bail!("--worker-timeout-ms must be at least 100 (workers check in every --lm-check-ms, default 1000); got {worker_timeout_ms}");
        }
        let fairness = service_kit::settings::queues_with_rules(
            self.queues.as_deref(),
            self.share_policy,
            gms,
            &self.preempt,
        )?;
        let queueable = self.queueable_config()?;
        let gm_urls = self.gm_urls.unwrap_or_default();
        if (fairness.is_some() || queueable.is_some()) && gm_urls.len() != gms as usize {
            bail!(
                "--gm-url: with --queue or --queueable the LM needs the URL of every GM ({gms}), in GM-id order, to hand killed tasks back; got {}",
                gm_urls.len()
            );
        }
        if !gm_urls.is_empty() && gm_urls.len() != gms as usize {
            bail!(
                "--gm-url: give the URL of every GM ({gms}), in GM-id order, or none; got {}",
                gm_urls.len()
            );
        }
        let listen = self.listen.unwrap_or_else(|| "127.0.0.1:9100".into());
        let max_broker_backlog_bytes = match self.max_broker_backlog_bytes.unwrap_or(64 << 20) {
            0 => bail!("--max-broker-backlog-bytes must be positive (bytes of task events the LM may hold while the broker is away; default 67108864)"),
            n => n,
        };
        let worker_networks = match &self.worker_networks {
            Some(items) => service_kit::auth::WorkerNetworks::parse(items)?,
            None => service_kit::auth::WorkerNetworks::default_for(&listen),
        };
        Ok(LmSettings {
            tls: self.common.tls()?,
            cluster_secret: self.common.cluster_secret()?,
            cluster_name: self.common.cluster_name()?,
            worker_networks,
            spec,
            gms,
            workers,
            worker_timeout: Duration::from_millis(worker_timeout_ms),
            worker_fence: self.worker_fence.unwrap_or(true),
            listen,
            data_dir: self.data_dir,
            amqp: service_kit::amqp::resolve_url(
                self.amqp
                    .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into()),
            )?,
            heartbeat: Micros::from_millis(self.heartbeat_ms.unwrap_or(1000).max(1)),
            publish_min_interval: Duration::from_millis(self.publish_min_interval_ms.unwrap_or(5)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(10_000)),
            max_broker_backlog_bytes,
            fairness,
            gm_urls,
            queueable,
            process: self.common.process()?,
        })
    }

    /// The QUEUEABLE settings, checked; `None` without --queueable (then none of its
    /// knobs may be set).
    fn queueable_config(&self) -> Result<Option<QueueableConfig>> {
        if !self.queueable.unwrap_or(false) {
            let knobs = [
                ("--queueable-cap", self.queueable_cap.is_some()),
                ("--launch-overhead-ms", self.launch_overhead_ms.is_some()),
                ("--shed-k", self.shed_k.is_some()),
                ("--queueable-quota", self.queueable_quota.is_some()),
                ("--promote-after-ms", self.promote_after_ms.is_some()),
                ("--promote-per-tick", self.promote_per_tick.is_some()),
            ];
            if let Some((flag, _)) = knobs.iter().find(|(_, set)| *set) {
                bail!("{flag} applies to QUEUEABLE work: add --queueable");
            }
            return Ok(None);
        }
        let cap = service_kit::settings::queueable_cap(self.queueable_cap)?;
        if let Some(k) = self.shed_k {
            if !(k.is_finite() && k >= 0.0) {
                bail!("--shed-k must be a non-negative number, got {k}");
            }
        }
        let quota = service_kit::settings::queueable_quota(self.queueable_quota.as_deref())?;
        let per_tick = self.promote_per_tick.unwrap_or(16);
        if per_tick == 0 {
            bail!("--promote-per-tick must be at least 1");
        }
        Ok(Some(QueueableConfig {
            cap,
            launch_overhead: Micros::from_millis(self.launch_overhead_ms.unwrap_or(10)),
            shed_sigma: self.shed_k,
            quota,
            promotion: self.promote_after_ms.map(|ms| PromotionPolicy {
                after: Micros::from_millis(ms),
                per_tick,
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &[&str]) -> Result<LmSettings> {
        let mut all = vec!["local-master", "--gms", "2", "--lms", "1"];
        all.extend_from_slice(args);
        LmArgs::try_parse_from(all).expect("parse").resolve()
    }

    #[test]
    fn queues_need_every_gm_url() {
        let s = resolve(&[]).expect("no queues");
        assert!(s.fairness.is_none() && s.gm_urls.is_empty());
        let q = ["--queue", "a:0.5:0", "--queue", "b:0.5:1"];
        let err = resolve(&q).expect_err("no GM URLs");
        assert!(format!("{err:#}").contains("--gm-url"), "{err:#}");
        let mut one = q.to_vec();
        one.extend(["--gm-url", "http://g0"]);
        assert!(resolve(&one).is_err(), "one URL for two GMs");
        let mut both = q.to_vec();
        both.extend([
            "--gm-url",
            "http://g0",
            "--gm-url",
            "http://g1",
            "--share-policy",
            "cpu",
        ]);
        let s = resolve(&both).expect("valid");
        assert_eq!(
            s.gm_urls,
            vec!["http://g0".to_owned(), "http://g1".to_owned()]
        );
        let f = s.fairness.expect("queues");
        assert_eq!((f.queues.len(), f.policy), (2, SharePolicy::Cpu));
        assert!(resolve(&["--queue", "a:2:0"]).is_err(), "share above 1");
    }

    #[test]
    fn queueable_flags_resolve_and_are_checked() {
        let urls = ["--gm-url", "http://g0", "--gm-url", "http://g1"];
        let err = resolve(&["--queueable"]).expect_err("no GM URLs");
        assert!(format!("{err:#}").contains("--gm-url"), "{err:#}");
        let err = resolve(&["--shed-k", "2"]).expect_err("knob without --queueable");
        assert!(format!("{err:#}").contains("--queueable"), "{err:#}");
        let mut all = vec![
            "--queueable",
            "--queueable-cap",
            "0.5",
            "--shed-k",
            "1.5",
            "--queueable-quota",
            "max:3",
            "--promote-after-ms",
            "2000",
        ];
        all.extend(urls);
        let q = resolve(&all).expect("valid").queueable.expect("enabled");
        assert_eq!((q.cap, q.shed_sigma), (0.5, Some(1.5)));
        assert_eq!(q.quota.max, Some(3));
        let p = q.promotion.expect("promotion");
        assert_eq!((p.after, p.per_tick), (Micros::from_secs(2), 16));
        for (flag, value) in [
            ("--queueable-cap", "1.5"),
            ("--queueable-cap", "0"),
            ("--shed-k", "nan"),
            ("--queueable-quota", "most:3"),
            ("--promote-per-tick", "0"),
        ] {
            let mut bad = vec!["--queueable", flag, value];
            bad.extend(urls);
            let err = resolve(&bad).expect_err(value);
            assert!(format!("{err:#}").contains(flag), "{flag}: {err:#}");
        }
        assert!(resolve(&[]).expect("default").queueable.is_none());
    }

    #[test]
    fn the_broker_backlog_limit_has_a_default_a_flag_and_must_be_positive() {
        let s = resolve(&[]).expect("default");
        assert_eq!(s.max_broker_backlog_bytes, 64 << 20);
        let s = resolve(&["--max-broker-backlog-bytes", "4096"]).expect("flag");
        assert_eq!(s.max_broker_backlog_bytes, 4096);
        let err = resolve(&["--max-broker-backlog-bytes", "0"]).expect_err("zero");
        assert!(
            format!("{err:#}").contains("--max-broker-backlog-bytes"),
            "{err:#}"
        );
    }
}
