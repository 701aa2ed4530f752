//! Configuration of the `global-master` binary: flags > environment > TOML file >
//! defaults. Every flag's help text says what it is for and its default.

use crate::core::lra_path::LraPathConfig;
use crate::lra::Placer;
use anyhow::{bail, Context as _, Result};
use clap::Parser;
use common::fairness::{FairnessConfig, SharePolicy};
use common::quota::QueueableQuota;
use common::Micros;
use serde::{Deserialize, Serialize};
use service_kit::settings::{load_file, CommonArgs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A Global Master of the Megha federated scheduler.
///
/// Accepts jobs over HTTP (JSON), keeps an eventually consistent view of every Local
/// Master's nodes from the state they publish on RabbitMQ, places tasks (internal
/// partition first, then repartition) and sends batched launch requests to the LMs
/// over HTTP. Task lifecycle events go to the `megha.events` exchange.
///
/// Minimal example (two LMs, this GM is number 0 of 2):
///   global-master --id 0 --gms 2 --lm-urls http://127.0.0.1:9100,http://127.0.0.1:9101
///
/// User queues (fairness, Megha Algorithm 2): give every GM and LM the same
/// `--queue NAME:SHARE:GM` list, e.g. `--queue analytics:0.25:0 --queue batch:0.75:1`.
/// Submissions then name their queue (`"queue": "analytics"`) and must go to the GM
/// that serves it. Without queues there is one queue, `default`, and no preemption.
///
/// QUEUEABLE work (Mercury) is placed by every GM on one of the --queueable-top-k
/// nodes with the least estimated queuing delay; GUARANTEED work goes to the
/// designated GM. Give the LMs --queueable (and the same cap and quota), e.g.
///   global-master ... --queueable-top-k 4 --queueable-cap 0.8 --queueable-quota max:50
///
/// Every setting can also come from an environment variable (shown below) or a TOML
/// file given with --config (keys are the long flag names with `_`, e.g.
/// `lm_urls = ["http://..."]`). Precedence: flags > environment > file > defaults.
#[derive(Parser, Clone, Debug, Default, Serialize, Deserialize)]
#[command(
    name = "global-master",
    version,
    about,
    long_about,
    verbatim_doc_comment
)]
#[serde(default)]
pub struct GmArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEGHA_GM_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// This GM's number, 0..gms (it owns partition `id` of every LM). Default 0.
    #[arg(long, env = "MEGHA_GM_ID")]
    pub id: Option<u16>,
    /// How many GMs the cluster has (= partitions per LM). Default 1.
    #[arg(long, env = "MEGHA_GMS")]
    pub gms: Option<u16>,
    /// Base URLs of the LMs in LM-id order, comma-separated. Required.
    #[arg(
        long,
        env = "MEGHA_LM_URLS",
        value_delimiter = ',',
        value_name = "URL,..."
    )]
    pub lm_urls: Option<Vec<String>>,
    /// Address for the HTTP API. Default 127.0.0.1:8080 (port 0 picks a free port).
    #[arg(long, env = "MEGHA_GM_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// RabbitMQ URL. Default amqp://guest:guest@127.0.0.1:5672/%2f
    #[arg(long, env = "MEGHA_AMQP_URL", value_name = "URL")]
    pub amqp: Option<String>,
    /// Largest launch batch sent to one LM. Default 100.
    #[arg(long, env = "MEGHA_GM_BATCH_SIZE")]
    pub batch_size: Option<usize>,
    /// Tasks the GM holds (queued or awaiting an LM) before answering 429. Default 200000.
    #[arg(long, env = "MEGHA_GM_MAX_QUEUED")]
    pub max_queued: Option<usize>,
    /// Most tasks accepted in one POST /v1/jobs. Default 10000.
    #[arg(long, env = "MEGHA_GM_MAX_JOB_TASKS")]
    pub max_job_tasks: Option<usize>,
    /// Timeout of a launch request to an LM, in milliseconds. Default 5000.
    #[arg(long, env = "MEGHA_GM_LAUNCH_TIMEOUT_MS")]
    pub launch_timeout_ms: Option<u64>,
    /// On SIGTERM, how long to keep placing queued work before exiting. Default 10000.
    /// Tasks still queued then are reported `task.suspended` if the journal resumes
    /// them (`--data-dir`), else `task.failed`.
    #[arg(long, env = "MEGHA_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: Option<u64>,
    /// How long to keep resending a launch batch or preemption request that an LM may
    /// have carried out but did not answer (it crashed or restarts), in seconds,
    /// before requeueing its tasks. A restarted LM answers it from what its workers
    /// hold, so no task runs twice when the LM is back within this time. Default 300.
    /// Keep it well above an LM's restart time: a batch requeued while its LM still
    /// ran it runs twice (`loadgen faults --doubt-timeout-s 5`: 405 of 2,000 seeds).
    #[arg(long, env = "MEGHA_GM_DOUBT_TIMEOUT_S")]
    pub doubt_timeout_s: Option<u64>,
    /// After an LM restarts, how long to wait before asking it which of this GM's
    /// tasks it still holds, in milliseconds (its workers register again meanwhile;
    /// they check their LM every second by default). Tasks it neither holds nor
    /// remembers finished (their worker died while the LM was away) end lost and
    /// run again under their job's retry policy. Default 5000.
    #[arg(long, env = "MEGHA_GM_LM_RECONCILE_DELAY_MS")]
    pub lm_reconcile_delay_ms: Option<u64>,
    /// Directory of the GM's journal (`journal.redb`): every accepted job is written
    /// there before the client hears 202, so it survives the GM being killed; a GM
    /// restarted on the same directory resumes the jobs that had not ended. Without
    /// it, accepted jobs live in memory only (a warning says so). Give each GM its
    /// own directory.
    #[arg(long, env = "MEGHA_GM_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// Start as a standby for this GM id: serve /healthz (503, not ready) and
    /// /metrics, answer the API 503 with Retry-After, and wait for the journal in
    /// --data-dir (required) to be free; when the primary holding it dies, take it
    /// over: start a newer life (the LMs then refuse the old one's requests),
    /// resume its jobs and serve the full API. TOML `standby = true`. Default off.
    #[arg(
        long,
        env = "MEGHA_GM_STANDBY",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub standby: Option<bool>,
    /// How often a standby tries to take the journal, in milliseconds. Default 500.
    #[arg(long, env = "MEGHA_GM_STANDBY_POLL_MS", value_name = "MS")]
    pub standby_poll_ms: Option<u64>,
    /// How long the status API keeps a job after its last task ended, in seconds
    /// (then it is forgotten: 404). Default 3600.
    #[arg(long, env = "MEGHA_GM_JOB_RETENTION_S", value_name = "SECONDS")]
    pub job_retention: Option<u64>,
    /// Most ended jobs kept; beyond, the oldest ends are forgotten first. Default 10000.
    #[arg(long, env = "MEGHA_GM_MAX_FINISHED_JOBS")]
    pub max_finished_jobs: Option<usize>,
    /// Runs of a failed (or lost) task, the first included, for jobs that name no
    /// `retry` policy (1: no retry). Backoff 1 s, doubling, at most 60 s. Default 1.
    #[arg(long, env = "MEGHA_GM_MAX_ATTEMPTS")]
    pub max_attempts: Option<u32>,
    /// A user queue NAME:SHARE:GM (repeatable, or comma-separated; TOML `queues`).
    /// The same list, in the same order, on every GM and LM. Default: none.
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
    /// A priority class NAME:VALUE[:preempting] (repeatable, or comma-separated; TOML
    /// `priority_classes`): jobs name one in `priority_class`; within a queue higher
    /// values go first, and a `preempting` class may preempt lower classes of its
    /// queue. The same list on every GM. Default: one class, `normal` (0).
    #[arg(
        long = "priority-class",
        env = "MEGHA_PRIORITY_CLASSES",
        value_delimiter = ',',
        value_name = "NAME:VALUE[:preempting]"
    )]
    pub priority_classes: Option<Vec<String>>,
    /// The class of a job that names none. Default: the lowest class.
    #[arg(long, env = "MEGHA_DEFAULT_PRIORITY_CLASS", value_name = "NAME")]
    pub default_priority_class: Option<String>,
    /// Aging, the starvation guard of lower classes: submissions to a queue one
    /// point of class value is worth in its order (0: strict priority). Default 1000.
    #[arg(long, env = "MEGHA_PRIORITY_AGING", value_name = "N")]
    pub priority_aging: Option<u64>,
    /// The GM that places LRAs and GUARANTEED tasks; the others forward them. Default 0.
    #[arg(long, env = "MEGHA_DESIGNATED_GM")]
    pub designated_gm: Option<u16>,
    /// Base URL of every GM, in GM-id order (repeat the flag, or comma-separate):
    /// where to forward LRAs and GUARANTEED work (the designated GM's), and requests
    /// naming another GM's job (any GM answers for any job); `URL|URL` for a GM and
    /// its standby (the first that serves).
    /// TOML `gm_urls`, as on the LM.
    #[arg(
        long = "gm-url",
        env = "MEGHA_GM_URLS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub gm_urls: Option<Vec<String>>,
    /// Base URL of the designated GM (overrides --gm-url).
    #[arg(long, env = "MEGHA_DESIGNATED_URL", value_name = "URL")]
    pub designated_url: Option<String>,
    /// LRA scheduling interval in milliseconds: LRAs submitted within one interval are
    /// placed together (MEDEA uses 10 s). Default 10000.
    #[arg(long, env = "MEGHA_LRA_INTERVAL_MS")]
    pub lra_interval_ms: Option<u64>,
    /// LRA placer: ilp, nc, tp or j-kube. Default ilp.
    #[arg(long, env = "MEGHA_LRA_PLACER")]
    pub lra_placer: Option<String>,
    /// Time cap of the ILP solver per interval, in milliseconds (0: heuristic answer
    /// only). Default 200.
    #[arg(long, env = "MEGHA_LRA_ILP_TIME_MS")]
    pub lra_ilp_time_ms: Option<u64>,
    /// Nodes per rack (consecutive node ids within an LM) for the `rack` node group;
    /// 0 makes each LM one rack. Default 0.
    #[arg(long, env = "MEGHA_LRA_NODES_PER_RACK")]
    pub lra_nodes_per_rack: Option<u32>,
    /// Operator placement constraints for LRAs: a JSON file holding a list of
    /// constraints in the POST /v1/lras format. They override application constraints
    /// that are less restrictive (MEDEA section 3). Default none.
    #[arg(long, env = "MEGHA_LRA_OPERATOR_CONSTRAINTS", value_name = "FILE")]
    pub lra_operator_constraints: Option<PathBuf>,
    /// Operator-defined node groups for LRA constraints (fault domains, upgrade
    /// domains, ...): a JSON file holding a list of {"name": ..., "sets": [[node,
    /// ...], ...]}, nodes numbered LM by LM in node-id order. Constraints may then
    /// name them as `node_group`. Default none (only `node` and `rack`).
    #[arg(long, env = "MEGHA_LRA_NODE_GROUPS", value_name = "FILE")]
    pub lra_node_groups: Option<PathBuf>,
    /// The cluster file the LMs take (their --cluster-file): a description with named
    /// node attributes (`gpu`, `rack=r3`; docs/alsched.md) lets jobs name them in
    /// `constraints` and utility trees. Without one, or with a Megha config, jobs name
    /// constraints by number and trees name them `c0` .. `c63`. Default none.
    #[arg(long, env = "MEGHA_CLUSTER_FILE", value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,
    /// The exact solve of soft constraints (docs/alsched.md): at each pass the
    /// designated GM solves the waiting tasks of jobs with utility trees together,
    /// an ILP capped at MS milliseconds (1 to 60000), before its greedy step; a
    /// timeout or a solver fault leaves them to the greedy step. Another GM ignores
    /// it (and says so at start). Default: off, the greedy step alone.
    #[arg(long, env = "MEGHA_GM_SOFT_ILP_MS", value_name = "MS")]
    pub soft_ilp_ms: Option<u64>,
    /// QUEUEABLE work goes to one of the K nodes with the least estimated queuing
    /// delay (Mercury's top-k), round-robin. Default 4.
    #[arg(long, env = "MEGHA_GM_QUEUEABLE_TOP_K", value_name = "K")]
    pub queueable_top_k: Option<usize>,
    /// The LMs' --queueable-cap (share of a node QUEUEABLE work may hold, in (0, 1]),
    /// so that nodes that would refuse a task are skipped. Default 1.
    #[arg(long, env = "MEGHA_QUEUEABLE_CAP", value_name = "FRACTION")]
    pub queueable_cap: Option<f64>,
    /// Per-job limit on outstanding QUEUEABLE containers: none, max:N, ratio:R (per
    /// GUARANTEED container) or max:N,ratio:R. The same on every GM and LM.
    /// Default none.
    #[arg(long, env = "MEGHA_QUEUEABLE_QUOTA", value_name = "max:N|ratio:R|none")]
    pub queueable_quota: Option<String>,
    /// In which order the GM tries its waiting tasks: fifo (user queues in turn, each
    /// in arrival order), drf, tetris, sjf or carbyne (docs/carbyne.md). Default fifo.
    #[arg(long, env = "MEGHA_GM_JOB_ORDER", value_name = "POLICY")]
    pub job_order: Option<String>,
    /// With --job-order carbyne: P(altruism), in [0, 1] (0 = DRF). Default 1.
    #[arg(long, env = "MEGHA_GM_ALTRUISM", value_name = "P")]
    pub altruism: Option<f64>,
    /// Users of the API: a TOML (or .json) file of [[users]] entries with `name`,
    /// `token`, `queues` ("*": any), `priority_classes` (preempting classes the user
    /// may name, "*": any), `preempting_jobs_per_minute` and `admin`; read again on
    /// SIGHUP and when it changes. Without it the API is open (every caller an
    /// admin), allowed only on a loopback --listen.
    #[arg(long, env = "MEGHA_TOKENS_FILE", value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// How long a submission's Idempotency-Key is remembered (a retry with the same
    /// key within it gets the first answer, not a second job). Default 86400 (a day).
    #[arg(long, env = "MEGHA_IDEMPOTENCY_TTL_S", value_name = "SECS")]
    pub idempotency_ttl_s: Option<u64>,
    /// At most this many Idempotency-Keys are remembered (the oldest go first).
    /// Default 100000.
    #[arg(long, env = "MEGHA_IDEMPOTENCY_MAX_KEYS", value_name = "N")]
    pub idempotency_max_keys: Option<usize>,
    /// Largest request body accepted (bytes; 413 beyond). Default 67108864 (64 MiB).
    #[arg(long, env = "MEGHA_GM_MAX_BODY_BYTES", value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Request body bytes handled at once, over all requests; beyond, requests are
    /// answered 503 with Retry-After. Default 268435456 (256 MiB).
    #[arg(long, env = "MEGHA_GM_MAX_TOTAL_BODY_BYTES", value_name = "BYTES")]
    pub max_total_body_bytes: Option<usize>,
    /// Event bytes waiting for the broker (while it is away) past which submissions
    /// are answered 503 with Retry-After instead of buffering more. Default 67108864.
    #[arg(long, env = "MEGHA_GM_MAX_BROKER_BACKLOG_BYTES", value_name = "BYTES")]
    pub max_broker_backlog_bytes: Option<u64>,
    /// The broker user of each LM: a pattern where `{lm}` stands for the LM's number
    /// (e.g. `megha-lm{lm}`: LM 0 publishes as megha-lm0). A state snapshot for LM k is
    /// taken only when its `user_id` (which the broker checks against the publisher's
    /// login) is LM k's user; others are refused and counted
    /// (megha_gm_snapshots_refused_total). Default: none, any broker user may publish
    /// any LM's state (open mode, warned at start).
    #[arg(long, env = "MEGHA_LM_BROKER_USER", value_name = "PATTERN")]
    pub lm_broker_user: Option<String>,
    /// The rules that bound preemption (`--preempt-*`).
    #[command(flatten)]
    #[serde(flatten)]
    pub preempt: service_kit::settings::PreemptArgs,
    /// Logging, the cluster's name and credential, TLS, --print-config.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

/// Resolved settings.
#[derive(Clone, Debug)]
pub struct GmSettings {
    pub id: u16,
    pub gms: u16,
    pub lm_urls: Vec<String>,
    pub listen: String,
    pub amqp: String,
    pub batch_size: usize,
    pub max_queued: usize,
    pub max_job_tasks: usize,
    pub launch_timeout: Duration,
    pub drain_timeout: Duration,
    pub doubt_timeout: Duration,
    /// See `--lm-reconcile-delay-ms`.
    pub lm_reconcile_delay: Duration,
    /// See `--data-dir`.
    pub data_dir: Option<std::path::PathBuf>,
    /// See `--standby`: `Some(poll period)` for a standby.
    pub standby: Option<Duration>,
    /// How long and how many ended jobs the status API keeps.
    pub retention: super::status::Retention,
    /// The retry policy of jobs that name none.
    pub retry: common::retry::RetryPolicy,
    /// User queues; `None`: the implicit `default` queue, no preemption.
    pub fairness: Option<Arc<FairnessConfig>>,
    /// Priority classes (`--priority-class`).
    pub priorities: Arc<common::priority::PriorityClasses>,
    pub process: service_kit::runtime::ProcessSettings,
    pub designated_gm: u16,
    /// Base URL of the designated GM, when this GM knows it.
    pub designated_url: Option<String>,
    /// Base URL of every GM by id (`--gm-url`): where requests naming another GM's
    /// job are forwarded. Empty: this GM answers for its own jobs only.
    pub gm_urls: Vec<String>,
    pub lra: crate::core::lra_path::LraPathConfig,
    pub lra_operator_constraints: Vec<crate::lra::PlacementConstraint>,
    pub queueable_top_k: usize,
    pub queueable_cap: f64,
    pub queueable_quota: QueueableQuota,
    /// See `--job-order`, `--altruism`.
    pub order: crate::core::carbyne::OrderConfig,
    /// `None`: open mode for internal calls (loopback only; checked when serving).
    pub cluster_secret: Option<service_kit::auth::ClusterSecret>,
    /// The users' tokens file; `None`: open API (loopback only).
    pub tokens_file: Option<PathBuf>,
    /// HTTPS and the extra CA clients trust.
    pub tls: service_kit::tls::TlsSettings,
    /// See `--cluster-name`.
    pub cluster_name: common::ClusterName,
    /// See `--idempotency-ttl-s`, `--idempotency-max-keys`.
    pub idempotency: super::idempotency::Limits,
    /// See `--max-body-bytes`, `--max-total-body-bytes`.
    pub max_body_bytes: usize,
    pub max_total_body_bytes: usize,
    /// See `--max-broker-backlog-bytes`.
    pub max_broker_backlog_bytes: u64,
    /// See `--lm-broker-user` (validated: contains `{lm}`).
    pub lm_broker_user: Option<String>,
    /// The attribute names jobs may use (`--cluster-file`; else `c0` .. `c63`).
    pub attributes: Arc<common::attributes::Attributes>,
    /// See `--soft-ilp-ms` (checked; used on the designated GM only).
    pub soft_ilp_ms: Option<u64>,
}

impl GmArgs {
    pub fn resolve(mut self) -> Result<GmSettings> {
        let file: GmArgs = load_file(self.config.as_deref())?;
        let config = self.config.take();
        self = service_kit::settings::layer(&self, &file)?;
        self.config = config;
        let node_groups = match &self.lra_node_groups {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read(path)
                    .with_context(|| format!("cannot read --lra-node-groups {}", path.display()))?;
                super::lra_api::parse_node_groups(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "--lra-node-groups {}: field `{}`: {}",
                        path.display(),
                        e.field,
                        e.error
                    )
                })?
            }
        };
        let queueable_quota =
            service_kit::settings::queueable_quota(self.queueable_quota.as_deref())?;
        let queueable_cap = service_kit::settings::queueable_cap(self.queueable_cap)?;
        let lra_operator_constraints = match &self.lra_operator_constraints {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read(path).with_context(|| {
                    format!("cannot read --lra-operator-constraints {}", path.display())
                })?;
                super::lra_api::parse_operator_constraints(&text, &node_groups).map_err(|e| {
                    anyhow::anyhow!(
                        "--lra-operator-constraints {}: field `{}`: {}",
                        path.display(),
                        e.field,
                        e.error
                    )
                })?
            }
        };
        let designated_gm = self.designated_gm.unwrap_or(0);
        let designated_url = self.designated_url.clone().or_else(|| {
            self.gm_urls
                .as_ref()
                .and_then(|urls| urls.get(designated_gm as usize).cloned())
        });
        let lra = LraPathConfig {
            groups: std::sync::Arc::new(node_groups),
            ..lra_config(
                self.lra_interval_ms,
                self.lra_placer.as_deref(),
                self.lra_ilp_time_ms,
                self.lra_nodes_per_rack,
            )?
        };
        let gms = self.gms.unwrap_or(1);
        let attributes = Arc::new(alsched::attribute_names(self.cluster_file.as_deref(), gms)?);
        let fairness = service_kit::settings::queues_with_rules(
            self.queues.as_deref(),
            self.share_policy,
            gms,
            &self.preempt,
        )?;
        let s = GmSettings {
            tls: self.common.tls()?,
            cluster_secret: self.common.cluster_secret()?,
            tokens_file: self.tokens_file.clone(),
            cluster_name: self.common.cluster_name()?,
            idempotency: super::idempotency::Limits {
                ttl: Duration::from_secs(self.idempotency_ttl_s.unwrap_or(86_400)),
                max_keys: match self.idempotency_max_keys.unwrap_or(100_000) {
                    0 => bail!("--idempotency-max-keys must be positive"),
                    n => n,
                },
            },
            max_body_bytes: self.max_body_bytes.unwrap_or(64 << 20),
            max_total_body_bytes: self.max_total_body_bytes.unwrap_or(256 << 20),
            max_broker_backlog_bytes: self.max_broker_backlog_bytes.unwrap_or(64 << 20),
            lm_broker_user: match self.lm_broker_user.clone() {
                Some(p) if !p.contains("{lm}") => bail!(
                    "--lm-broker-user `{p}`: the pattern must contain {{lm}} (each LM its own broker user, e.g. megha-lm{{lm}})"
                ),
                p => p,
            },
            id: self.id.unwrap_or(0),
            gms,
            lm_urls: self.lm_urls.unwrap_or_default(),
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:8080".into()),
            amqp: service_kit::amqp::resolve_url(self.amqp.unwrap_or_else(|| DEFAULT_AMQP.into()))?,
            batch_size: self.batch_size.unwrap_or(100),
            max_queued: self.max_queued.unwrap_or(200_000),
            max_job_tasks: self.max_job_tasks.unwrap_or(10_000),
            launch_timeout: Duration::from_millis(self.launch_timeout_ms.unwrap_or(5000)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(10_000)),
            doubt_timeout: Duration::from_secs(self.doubt_timeout_s.unwrap_or(300)),
            lm_reconcile_delay: Duration::from_millis(self.lm_reconcile_delay_ms.unwrap_or(5000)),
            data_dir: self.data_dir.clone(),
            standby: match (self.standby.unwrap_or(false), self.standby_poll_ms) {
                (false, _) => None,
                (true, Some(0)) => bail!("--standby-poll-ms must be at least 1"),
                (true, poll) => Some(Duration::from_millis(poll.unwrap_or(500))),
            },
            retention: super::status::Retention {
                keep: Duration::from_secs(self.job_retention.unwrap_or(3600)),
                max_jobs: self.max_finished_jobs.unwrap_or(10_000),
            },
            retry: common::retry::RetryPolicy {
                max_attempts: self.max_attempts.unwrap_or(1),
                ..common::retry::RetryPolicy::NONE
            },
            fairness,
            priorities: Arc::new(
                common::priority::PriorityClasses::parse(
                    self.priority_classes.as_deref().unwrap_or_default(),
                    self.default_priority_class.as_deref(),
                    self.priority_aging
                        .unwrap_or(common::priority::DEFAULT_AGING),
                )
                .map_err(|e| anyhow::anyhow!("--priority-class: {e}"))?,
            ),
            process: self.common.process()?,
            designated_gm,
            designated_url,
            gm_urls: self.gm_urls.clone().unwrap_or_default(),
            lra,
            lra_operator_constraints,
            queueable_top_k: self.queueable_top_k.unwrap_or(4),
            queueable_cap,
            queueable_quota,
            order: order_config(self.job_order.as_deref(), self.altruism)?,
            attributes,
            soft_ilp_ms: alsched::soft_ilp_ms(self.soft_ilp_ms)?,
        };
        if s.standby.is_some() && s.data_dir.is_none() {
            bail!("--standby needs --data-dir: the primary's journal, which it waits to take over");
        }
        if s.queueable_top_k == 0 {
            bail!("--queueable-top-k must be at least 1");
        }
        if s.designated_gm >= s.gms {
            bail!(
                "--designated-gm must be below --gms (got {} of {} GMs)",
                s.designated_gm,
                s.gms
            );
        }
        if s.gms == 0 || s.id >= s.gms {
            bail!(
                "--id must be below --gms (got id {} of {} GMs)",
                s.id,
                s.gms
            );
        }
        if s.lm_urls.is_empty() {
            bail!("--lm-urls is required: the base URL of every LM, in LM-id order");
        }
        if !(1..=common::retry::RetryPolicy::MAX_ATTEMPTS).contains(&s.retry.max_attempts) {
            bail!(
                "--max-attempts must be between 1 (no retry) and {}",
                common::retry::RetryPolicy::MAX_ATTEMPTS
            );
        }
        if s.batch_size == 0 || s.max_queued == 0 || s.max_job_tasks == 0 {
            bail!("--batch-size, --max-queued and --max-job-tasks must be at least 1");
        }
        Ok(s)
    }
}

/// The LRA placer settings, with their defaults.
fn lra_config(
    interval_ms: Option<u64>,
    placer: Option<&str>,
    ilp_time_ms: Option<u64>,
    nodes_per_rack: Option<u32>,
) -> Result<LraPathConfig> {
    let interval_ms = interval_ms.unwrap_or(10_000);
    if interval_ms == 0 {
        bail!("--lra-interval-ms must be at least 1");
    }
    let name = placer.unwrap_or("ilp");
    let placer = match Placer::parse(name) {
        Some(Placer::Ilp(mut ilp)) => {
            ilp.time_limit_ms = ilp_time_ms.unwrap_or(ilp.time_limit_ms);
            Placer::Ilp(ilp)
        }
        Some(other) => other,
        None => bail!("--lra-placer `{name}` is unknown: use ilp, nc, tp or j-kube"),
    };
    Ok(LraPathConfig {
        interval: Micros::from_millis(interval_ms),
        placer,
        nodes_per_rack: nodes_per_rack.unwrap_or(0),
        groups: Default::default(),
    })
}

mod alsched;
#[cfg(test)]
mod tests;

/// `--job-order` and `--altruism`, checked (an error names the flag).
fn order_config(
    name: Option<&str>,
    altruism: Option<f64>,
) -> Result<crate::core::carbyne::OrderConfig> {
    use crate::core::carbyne::{JobOrder, OrderConfig};
    let order = match name {
        None => JobOrder::default(),
        Some(n) => JobOrder::parse(n).with_context(|| {
            format!(
                "--job-order: unknown policy {n:?}; expected one of: {}",
                JobOrder::NAMES.join(", ")
            )
        })?,
    };
    let config = OrderConfig {
        order,
        altruism: altruism.unwrap_or(1.0),
        ..OrderConfig::default()
    };
    config.check().map_err(|e| anyhow::anyhow!("--{e}"))?;
    Ok(config)
}
