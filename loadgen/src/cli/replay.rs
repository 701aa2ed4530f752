//! `loadgen replay` (against running services over HTTP + RabbitMQ) and
//! `loadgen embedded` (every role in this process), sharing the workload options.

use crate::replay::driver::{replay, Gangs, ReplayOptions, ReplayResult};
use crate::replay::finish::{finish_with, ReportOptions};
use crate::replay::{embedded, net, queues};
use anyhow::{bail, Context, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::events::TaskEvent;
use common::fairness::{FairnessConfig, SharePolicy};
use common::gang::GangSpec;
use common::{Micros, Resources};
use megha_sim::cli::simulate::MercuryArgs;
use megha_sim::sim::task_types::{self, TaskTypes};
use megha_sim::sim::workload::{self, ConstraintMode, Job, WorkloadOptions};
use megha_sim::trace::tpch::TpchArgs;
use megha_sim::trace::{open_trace, read_all, SourceConfig, TraceFormat};
use service_kit::links::Sink;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What to replay and how fast.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// The trace (by default in the Sparrow/Megha `.tr` format).
    #[arg(long, value_name = "FILE", default_value = "data/traces/YH_small.tr")]
    pub trace: PathBuf,
    /// The trace's format (`tpch`: DAG jobs drawn from the TPC-H DAGs with the
    /// --tpch-* flags, seeded by --seed unless --tpch-seed).
    #[arg(long, value_enum, default_value = "tr")]
    pub format: TraceFormat,
    #[command(flatten)]
    pub tpch: TpchArgs,
    /// Divide arrival times and task durations by X (10 = ten times faster).
    #[arg(long, value_name = "X")]
    pub speedup: Option<f64>,
    /// Submit at most N tasks per second (jobs wait their turn).
    #[arg(long, value_name = "N")]
    pub rate_cap: Option<f64>,
    /// Seconds to wait after the last arrival for every task to finish.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub timeout_s: f64,
    /// CPU millicores per task.
    #[arg(long, default_value_t = 1000)]
    pub task_cpu_millis: u64,
    /// Memory per task, MiB.
    #[arg(long, default_value_t = 1024)]
    pub task_memory_mb: u64,
    /// Task placement constraints (synthesised from the Megha model, or none).
    #[arg(long, value_enum, default_value_t = ConstraintMode::None)]
    pub constraints: ConstraintMode,
    /// Seed for constraint synthesis (and the embedded cluster).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Every third job (trace order) of two tasks or more, without stages and of
    /// short tasks only, is submitted as a gang (docs/gangs.md): --gang-size of its
    /// tasks (all of them when fewer) start together or none does; the rest start
    /// as ordinary tasks once it started. The run fails if a gang ran apart.
    #[arg(long)]
    pub gangs: bool,
    /// With --gangs: how many tasks of a gang must start together (at most the
    /// job's tasks; keep it within the cluster's nodes, or the gang cannot start).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub gang_size: u32,
    /// With --gangs: how long a gang may wait for room, in trace seconds (divided
    /// by the speed-up like every trace time); then its tasks fail unrun.
    #[arg(long, default_value_t = 600.0, value_name = "SECS")]
    pub gang_timeout_s: f64,
    /// Output directory for tasks.csv and summary.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No progress bar and no table.
    #[arg(long)]
    pub quiet: bool,
    /// A user queue NAME:SHARE:GM (repeatable or comma-separated): the services'
    /// list, in the same order. Trace jobs that name a queue keep it; the others are
    /// spread over the queues round-robin; each job goes to its queue's GM. Without
    /// it, jobs go to the GMs round-robin, in the implicit `default` queue.
    #[arg(
        long = "queue",
        env = "MEGHA_QUEUES",
        value_delimiter = ',',
        value_name = "NAME:SHARE:GM"
    )]
    pub queues: Vec<String>,
    /// How queue shares are measured: drf or cpu (the services' --share-policy).
    #[arg(
        long,
        env = "MEGHA_SHARE_POLICY",
        default_value = "drf",
        value_name = "drf|cpu"
    )]
    pub share_policy: SharePolicy,
    /// With --queue: the window of shares.csv and of Jain's fairness index, in trace
    /// seconds (divided by the speed-up, like every trace time).
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub fairness_window_s: f64,
}

impl WorkloadArgs {
    /// The `--queue` list for a system of `gms` GMs (`None` without queues).
    pub fn fairness(&self, gms: u16) -> Result<Option<Arc<FairnessConfig>>> {
        service_kit::settings::queues(Some(self.queues.as_slice()), Some(self.share_policy), gms)
    }

    /// The trace's jobs, each in its queue (see [`crate::replay::queues`]).
    pub fn jobs(&self, fairness: Option<&FairnessConfig>) -> Result<Vec<Job>> {
        let default_task = Resources::new(self.task_cpu_millis, self.task_memory_mb);
        if default_task.any_zero() {
            bail!("--task-cpu-millis and --task-memory-mb must be positive");
        }
        let source = SourceConfig {
            tpch: megha_sim::cli::trace::tpch_config(self.format, &self.tpch, self.seed)?,
            ..SourceConfig::default()
        };
        let mut reader =
            open_trace(&self.trace, self.format, &source).map_err(|e| e.given_by("--trace"))?;
        let trace = read_all(reader.by_ref())?;
        if self.format != TraceFormat::Tr && !self.quiet {
            eprint!("{}", reader.report());
        }
        let mut jobs = workload::build(
            &trace,
            &WorkloadOptions {
                default_task,
                constraints: self.constraints,
                seed: self.seed,
            },
        );
        if let Some(f) = fairness {
            queues::assign_queues(&mut jobs, &trace, f)?;
        }
        Ok(jobs)
    }

    pub fn options(
        &self,
        gms: usize,
        default_speedup: f64,
        queues: Option<Arc<FairnessConfig>>,
    ) -> Result<ReplayOptions> {
        let speedup = self.speedup.unwrap_or(default_speedup);
        if !(speedup.is_finite() && speedup > 0.0) {
            bail!("--speedup must be a positive number");
        }
        if self.rate_cap.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            bail!("--rate-cap must be a positive number");
        }
        if !(self.fairness_window_s.is_finite() && self.fairness_window_s > 0.0) {
            bail!("--fairness-window-s must be a positive number");
        }
        Ok(ReplayOptions {
            speedup,
            rate_cap: self.rate_cap,
            timeout: Duration::from_secs_f64(self.timeout_s.max(0.0)),
            quiet: self.quiet,
            gms,
            queues,
            gangs: None,
        })
    }

    /// With `--gangs`: the jobs of `jobs` submitted as gangs (see the flag).
    pub fn gangs(&self, jobs: &[Job]) -> Result<Option<Arc<Gangs>>> {
        if !self.gangs {
            return Ok(None);
        }
        if !(self.gang_timeout_s.is_finite() && self.gang_timeout_s > 0.0) {
            bail!("--gang-timeout-s must be a positive number");
        }
        if self.gang_size < 2 {
            bail!("--gang-size must be 2 or more");
        }
        let timeout = Micros((self.gang_timeout_s * 1e6).round() as u64);
        let gangs = jobs
            .iter()
            .enumerate()
            .filter(|(k, j)| {
                k % 3 == 0
                    && j.tasks.len() >= 2
                    && j.dag.is_none()
                    && j.tasks.iter().all(|t| t.kind == common::TaskKind::Short)
            })
            .map(|(_, j)| {
                let members = (j.tasks.len() as u32).min(self.gang_size);
                (j.id, GangSpec::all(members, timeout))
            })
            .collect();
        Ok(Some(Arc::new(gangs)))
    }
}

/// Replay a trace against running GMs over HTTP, observing events on RabbitMQ.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Base URLs of the GMs, comma-separated; jobs go round-robin. A GM with a
    /// standby: `URL|URL` (each job goes to whichever serves, with an
    /// Idempotency-Key, so one sent again after its GM died is not run twice).
    #[arg(long, value_delimiter = ',', required = true, value_name = "URL,...")]
    pub gm: Vec<String>,
    /// RabbitMQ URL (events are read from the megha.events exchange); the password
    /// may come from MEGHA_AMQP_PASSWORD_FILE instead.
    #[arg(
        long,
        env = "MEGHA_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    pub amqp: String,
    /// The cluster whose events to read (its exchanges are NAME.events; the same
    /// --cluster-name as the services). Default megha.
    #[arg(
        long,
        env = "MEGHA_CLUSTER_NAME",
        default_value = "megha",
        value_name = "NAME"
    )]
    pub cluster_name: common::ClusterName,
    /// Nodes in the cluster (for the summary only).
    #[arg(long, default_value_t = 0)]
    pub nodes: usize,
    /// Container types given to the trace's tasks (Mercury hybrid-GQ, seeded by
    /// --seed): short (the Megha path), only-g, only-q or hybrid:TD_S:PQ (tasks
    /// shorter than TD_S seconds are QUEUEABLE with probability PQ). GUARANTEED work
    /// is forwarded to the designated GM; the LMs need --queueable for QUEUEABLE work.
    #[arg(
        long,
        env = "MEGHA_TASK_TYPES",
        default_value = "short",
        value_name = "TYPES"
    )]
    pub task_types: String,
    /// File holding the API token sent to the GMs (or the token itself in
    /// MEGHA_TOKEN); the GMs' --tokens-file maps it to a user and queues.
    #[arg(long, env = "MEGHA_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// A CA (PEM) to trust for https:// GMs and amqps:// brokers, besides the
    /// system roots.
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE")]
    pub tls_ca_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

pub fn run_replay(args: ReplayArgs) -> Result<()> {
    let token = service_kit::auth::user_token(args.token_file.as_deref())?;
    if let Some(ca) = &args.tls_ca_file {
        service_kit::tls::trust_ca(ca)?;
    }
    let amqp = service_kit::amqp::resolve_url(args.amqp.clone())?;
    let fairness = args.workload.fairness(args.gm.len() as u16)?;
    let mut jobs = args.workload.jobs(fairness.as_deref())?;
    let policy: TaskTypes = args
        .task_types
        .parse()
        .map_err(|e| anyhow::anyhow!("--task-types: {e}"))?;
    task_types::assign(&mut jobs, policy, args.workload.seed);
    let mut opts = args
        .workload
        .options(args.gm.len(), 1.0, fairness.clone())?;
    opts.gangs = args.workload.gangs(&jobs)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        // The GMs first: a wrong URL or another cluster's GMs are named in the
        // first line, before anything is subscribed.
        let client =
            service_kit::auth::user_client(Some(Duration::from_secs(30)), token.as_deref());
        net::check_gms_reachable(
            &client,
            &args.gm,
            &args.cluster_name,
            Duration::from_secs(10),
        )
        .await?;
        let queue = format!(
            "replay.{}.{}",
            std::process::id(),
            service_kit::clock::now().0
        );
        let cluster = service_kit::cluster::Cluster::new(args.cluster_name.clone(), "loadgen");
        let (events, status, subscription) = net::amqp_events(amqp.clone(), cluster, queue.clone());
        let mut waited = 0;
        while !status.is_connected() {
            if waited > 100 {
                bail!(
                    "cannot subscribe to events at {} (is RabbitMQ running?)",
                    service_kit::amqp::redact(&amqp)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited += 1;
        }
        let before = net::gm_facts(&client, &args.gm).await;
        let submit = net::http_submitter(
            args.gm.clone(),
            client.clone(),
            fairness.clone(),
            &args.cluster_name,
        );
        let mut result = replay(&jobs, submit, events, &opts).await;
        result.facts = net::gm_facts(&client, &args.gm).await.since(&before);
        subscription.close().await;
        if let Err(e) = service_kit::amqp::delete_queue(&amqp, &args.cluster_name, &queue).await {
            tracing::warn!(error = %e, queue, "cannot delete the replay queue");
        }
        Ok::<ReplayResult, anyhow::Error>(result)
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    judge(
        &result,
        "megha-services",
        policy,
        &opts,
        &args.workload,
        args.nodes,
    )
}

fn judge(
    result: &ReplayResult,
    scheduler: &str,
    policy: TaskTypes,
    opts: &ReplayOptions,
    w: &WorkloadArgs,
    nodes: usize,
) -> Result<()> {
    let task_types = policy.to_string();
    let window = Micros::from_secs_f64(w.fairness_window_s / opts.speedup);
    let report = ReportOptions {
        scheduler,
        task_types: &task_types,
        seed: w.seed,
        nodes,
        out: &w.out,
        quiet: w.quiet,
        queues: opts.queues.as_deref().map(|q| (q, window)),
    };
    let mut ok = finish_with(result, &report)?;
    if let Some(gangs) = &opts.gangs {
        let figures = crate::replay::gangs::figures(&result.outcome.records, gangs);
        println!("{figures}");
        if !figures.apart.is_empty() {
            eprintln!(
                "gangs whose members did not run together (trace job ids): {:?}",
                figures.apart
            );
            ok = false;
        }
    }
    if ok {
        Ok(())
    } else {
        bail!(
            "the run lost tasks (see {})",
            w.out.join("problems.txt").display()
        )
    }
}

/// Run N GMs, M LMs and K workers per LM in this process and replay a trace.
#[derive(Args, Debug)]
pub struct EmbeddedArgs {
    /// Number of GMs (= partitions per LM).
    #[arg(long, default_value_t = 2)]
    pub gms: u16,
    /// Number of LMs.
    #[arg(long, default_value_t = 2)]
    pub lms: u16,
    /// Nodes per partition (nodes = gms x lms x this).
    #[arg(long, default_value_t = 2)]
    pub partition_size: usize,
    /// Worker actors per LM.
    #[arg(long, default_value_t = 2)]
    pub workers_per_lm: u32,
    /// CPU cores per node.
    #[arg(long, default_value_t = 1)]
    pub node_cpus: u64,
    /// Memory per node, MiB.
    #[arg(long, default_value_t = 16384)]
    pub node_memory_mb: u64,
    /// LM heartbeat period, ms.
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// Least time between two change-triggered state publications, ms.
    #[arg(long, default_value_t = 5)]
    pub publish_min_interval_ms: u64,
    /// Largest launch batch per LM.
    #[arg(long, default_value_t = 100)]
    pub batch_size: usize,
    /// Run burn and exec tasks for real, each worker keeping its task directories
    /// and logs under DIR/lm<L>-w<S>/ (cgroup limits where the host allows). Without
    /// it only synthetic tasks run (a trace's tasks are synthetic).
    #[arg(long, value_name = "DIR")]
    pub exec_dir: Option<std::path::PathBuf>,
    /// With --exec-dir: exec tasks run each as a uid of its own from this range
    /// (as the worker's --task-uids; needs root).
    #[arg(long, value_name = "FIRST-LAST", value_parser = worker::exec::identity::IdentityConfig::parse_range)]
    pub task_uids: Option<(u32, u32)>,
    /// With --exec-dir: run exec tasks as this process's own user (as the worker's
    /// --allow-run-as-self). Without it or --task-uids, exec tasks are refused.
    #[arg(long)]
    pub allow_run_as_self: bool,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Container types and QUEUEABLE knobs, as for `loadgen simulate` (one
    /// --task-types policy here). Any policy but `short` turns QUEUEABLE work on.
    #[command(flatten)]
    pub mercury: MercuryArgs,
}

impl EmbeddedArgs {
    /// The one task-type policy of this run.
    pub fn task_types(&self) -> Result<TaskTypes> {
        match self.mercury.policies()?.as_slice() {
            [one] => Ok(*one),
            more => bail!(
                "--task-types: embedded mode runs one policy, got {}",
                more.len()
            ),
        }
    }

    pub fn config(&self) -> Result<embedded::EmbeddedConfig> {
        let capacity = Resources::cores(self.node_cpus, self.node_memory_mb);
        if capacity.any_zero() || self.gms == 0 || self.lms == 0 || self.partition_size == 0 {
            bail!(
                "--gms, --lms, --partition-size, --node-cpus and --node-memory-mb must be positive"
            );
        }
        Ok(embedded::EmbeddedConfig {
            cluster: ClusterSpec::generate(
                self.gms,
                self.lms,
                self.partition_size,
                capacity,
                self.workload.seed,
            ),
            workers_per_lm: self.workers_per_lm.max(1),
            heartbeat: Micros::from_millis(self.heartbeat_ms.max(1)),
            publish_min_interval: Duration::from_millis(self.publish_min_interval_ms),
            batch_size: self.batch_size.max(1),
            max_queued: 10_000_000,
            fairness: self.workload.fairness(self.gms)?,
            mercury: match self.task_types()? {
                TaskTypes::Short => None,
                _ => Some(self.mercury.options()?),
            },
            designated_gm: match self.mercury.designated_gm {
                g if g < self.gms => common::GmId(g),
                g => bail!("--designated-gm {g} is not a GM of {}", self.gms),
            },
            exec: self
                .exec_dir
                .as_ref()
                .map(|dir| worker::exec::ExecSettings {
                    identity: worker::exec::identity::IdentityConfig {
                        task_uids: self.task_uids,
                        task_user: None,
                        allow_run_as_self: self.allow_run_as_self,
                    },
                    ..worker::exec::ExecSettings::as_self(dir.clone())
                }),
        })
    }
}

/// Starts the embedded cluster and replays `jobs` on it (inside an actix System).
pub async fn replay_embedded(
    cfg: &embedded::EmbeddedConfig,
    jobs: &[Job],
    opts: &ReplayOptions,
) -> Result<ReplayResult> {
    let (tx, events) = tokio::sync::mpsc::unbounded_channel::<TaskEvent>();
    let sink: Sink<Vec<TaskEvent>> = Arc::new(move |evs: Vec<TaskEvent>| {
        for e in evs {
            let _ = tx.send(e);
        }
    });
    let cluster = embedded::start(cfg, sink)
        .await
        .context("cannot start the embedded cluster")?;
    let submit = embedded::submitter_routed(cluster.gms.clone(), Some(cfg.designated_gm.index()));
    let mut result = replay(jobs, submit, events, opts).await;
    result.facts = embedded::gm_facts(&cluster.gms).await;
    Ok(result)
}

/// Runs `fut` on an actix System over a multi-thread tokio runtime.
pub fn in_actix_system<F: std::future::Future>(fut: F) -> F::Output {
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("the tokio runtime must start")
    });
    system.block_on(fut)
}

pub fn run_embedded(args: EmbeddedArgs) -> Result<()> {
    let cfg = args.config()?;
    let mut jobs = args.workload.jobs(cfg.fairness.as_deref())?;
    let policy = args.task_types()?;
    task_types::assign(&mut jobs, policy, args.workload.seed);
    let mut opts = args
        .workload
        .options(args.gms as usize, 50.0, cfg.fairness.clone())?;
    opts.gangs = args.workload.gangs(&jobs)?;
    if !args.workload.quiet {
        eprintln!(
            "embedded: {} GMs, {} LMs, {} workers, {} nodes; {} jobs ({policy} tasks) at speedup {}",
            args.gms,
            args.lms,
            args.workers_per_lm as usize * args.lms as usize,
            cfg.cluster.node_count(),
            jobs.len(),
            opts.speedup
        );
    }
    let result = in_actix_system(replay_embedded(&cfg, &jobs, &opts))?;
    judge(
        &result,
        "megha-embedded",
        policy,
        &opts,
        &args.workload,
        cfg.cluster.node_count(),
    )
}
