//! `loadgen simulate`: replay a trace in the deterministic simulator.

use crate::report::{write_run, Summary};
use crate::sim::task_types::{self, TaskTypes};
use crate::sim::workload::{self, ConstraintMode, WorkloadOptions};
use crate::sim::{self, SchedulerKind, SimConfig};
use crate::trace::options::TraceOptionsArgs;
use crate::trace::{open_trace, SourceConfig, TraceFormat, TraceJob};
use anyhow::{bail, Context, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::fairness::FairnessConfig;
use common::{Micros, Resources};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where the simulated cluster comes from: a Megha config file, or generated.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Megha simulator cluster config (JSON), reproduced node for node.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["gms", "lms", "partition_size"])]
    pub cluster: Option<PathBuf>,
    /// Generated cluster: number of Global Masters (= partitions per LM).
    #[arg(long, value_name = "N")]
    pub gms: Option<u16>,
    /// Generated cluster: number of Local Masters.
    #[arg(long, value_name = "M")]
    pub lms: Option<u16>,
    /// Generated cluster: nodes in each partition (nodes = gms x lms x this).
    #[arg(long, value_name = "P")]
    pub partition_size: Option<usize>,
    /// CPU cores per node. The default, 1, runs one task at a time per node as the
    /// Megha simulator does; the paper's nodes have 64.
    #[arg(long, default_value_t = 1, value_name = "CORES")]
    pub node_cpus: u64,
    /// Memory per node in MiB (paper: 16 GB).
    #[arg(long, default_value_t = 16384, value_name = "MIB")]
    pub node_memory_mb: u64,
}

impl ClusterArgs {
    pub fn load(&self, seed: u64) -> Result<ClusterSpec> {
        if self.node_cpus == 0 || self.node_memory_mb == 0 {
            bail!("--node-cpus and --node-memory-mb must be positive");
        }
        let capacity = Resources::cores(self.node_cpus, self.node_memory_mb);
        if let Some(path) = &self.cluster {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read cluster config {}", path.display()))?;
            return ClusterSpec::from_megha_json(&text, capacity)
                .with_context(|| format!("in cluster config {}", path.display()));
        }
        match (self.gms, self.lms, self.partition_size) {
            (Some(g), Some(l), Some(p)) if g > 0 && l > 0 && p > 0 => {
                Ok(ClusterSpec::generate(g, l, p, capacity, seed))
            }
            (Some(_), Some(_), Some(_)) => {
                bail!("--gms, --lms and --partition-size must all be positive")
            }
            _ => bail!("give either --cluster FILE or all of --gms, --lms and --partition-size"),
        }
    }
}

/// Workload and model options shared by simulate and bench.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Seed for constraint synthesis, cluster generation and sampling (printed).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// CPU cores a trace task asks for when the trace gives none.
    #[arg(long, default_value_t = 1, value_name = "CORES")]
    pub task_cpus: u64,
    /// Memory a trace task asks for, in MiB, when the trace gives none.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub task_memory_mb: u64,
    /// Settings of a peer simulator, for side-by-side runs: megha3 = the Megha 3.0
    /// Python simulator (per-task constraints, 5 s heartbeat, whole-second task
    /// durations, identical arrivals separated by 0.01 s). A flag given explicitly
    /// wins over the preset.
    #[arg(long, value_enum, value_name = "PEER")]
    pub preset: Option<Preset>,
    /// How task placement constraints are synthesised (Megha / Sharma et al. model)
    /// [default: per-job; megha3: per-task].
    #[arg(long, value_enum)]
    pub constraints: Option<ConstraintMode>,
    /// One-way network delay in milliseconds [default: 0.5, or the cost model's
    /// network_delay_ns].
    #[arg(long, value_name = "MS")]
    pub network_delay_ms: Option<f64>,
    /// Processing costs of every role from a file written by `loadgen calibrate`
    /// (TOML, nanoseconds per event); the default is the built-in model (GM decision
    /// 2 us, LM batch 10 us + 3 us per request, ...; see docs/simulator-performance.md).
    #[arg(long, value_name = "FILE")]
    pub cost_model: Option<PathBuf>,
    /// LM heartbeat period in seconds [default: 10; megha3: 5].
    #[arg(long, value_name = "SECS")]
    pub heartbeat_s: Option<f64>,
    /// Truncate task durations to whole seconds, as the peer reads them
    /// (`int(float(d))`) [default: false; megha3: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub whole_second_durations: Option<bool>,
    /// Move a job arriving at the same time as an earlier one 0.01 s later (0.02 s
    /// for the next, ...), as the peer does [default: false; megha3: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub separate_identical_arrivals: Option<bool>,
    /// Simulate every heartbeat through idle gaps (by default a quiet cluster jumps
    /// to the last heartbeat before the next arrival, keeping the heartbeat phase;
    /// the schedules are the same either way, this only costs time).
    #[arg(long)]
    pub simulate_idle: bool,
    /// Which blocked tasks a GM tries again when its view gains resources: indexed
    /// (only those the grown nodes could host; the cost of an event does not grow
    /// with the backlog) or all (every one, as the paper's simulator does).
    #[arg(long, default_value = "indexed", value_name = "POLICY", value_parser = parse_wake)]
    pub wake: global_master::core::WakePolicy,
    /// When an LM sends its state to every GM: heartbeat (at heartbeats only, as the
    /// Megha simulator does), or changes (also after every answer to a GM and every
    /// task end, at most once per --publish-min-interval-ms, as the services' LM
    /// does). Both piggyback the state on answers.
    #[arg(long, value_enum, default_value_t = LmPublishMode::Heartbeat, value_name = "WHEN")]
    pub lm_publish: LmPublishMode,
    /// With --lm-publish changes: least time between two change-triggered
    /// publications, ms (the services' default: 5).
    #[arg(long, default_value_t = 5.0, value_name = "MS")]
    pub publish_min_interval_ms: f64,
    /// Largest launch batch a GM sends one LM.
    #[arg(long, default_value_t = 100)]
    pub batch_size: usize,
    /// Sparrow probes per task.
    #[arg(long, default_value_t = 2)]
    pub probe_ratio: usize,
    /// User queues as NAME:SHARE:GM,... (e.g. a:0.1:0,b:0.25:1,c:0.15:1,d:0.5:2). Jobs
    /// are spread over the queues round-robin and scheduled by their queue's GM, which
    /// preempts queues over their share under contention (Megha Algorithm 2).
    #[arg(long, value_name = "SPEC")]
    pub queues: Option<String>,
    /// How a queue's share of the cluster is measured: drf (dominant resource) or cpu.
    #[arg(long, default_value = "drf", value_name = "POLICY")]
    pub share_policy: common::fairness::SharePolicy,
    /// With --queues: let GMs preempt queues over their share (off: measure the same
    /// queues without preemption, for comparison).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub preemption: bool,
    /// Window for the fairness index and shares.csv, in seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub fairness_window_s: f64,
}

/// `--lm-publish`: when a simulated LM sends its state (see [`sim::LmPublish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LmPublishMode {
    /// At heartbeats only (and on answers).
    Heartbeat,
    /// Also after every change, rate-limited, as the services' LM.
    Changes,
}

/// A peer simulator whose settings `--preset` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// The Megha 3.0 Python simulator.
    Megha3,
}

impl ModelArgs {
    fn megha3(&self) -> bool {
        self.preset == Some(Preset::Megha3)
    }

    /// The constraint synthesis in effect (flag, else preset, else per-job).
    pub fn constraint_mode(&self) -> ConstraintMode {
        self.constraints.unwrap_or(match self.megha3() {
            true => ConstraintMode::PerTask,
            false => ConstraintMode::PerJob,
        })
    }

    /// The heartbeat period in effect, in seconds.
    pub fn heartbeat_secs(&self) -> f64 {
        self.heartbeat_s
            .unwrap_or(if self.megha3() { 5.0 } else { 10.0 })
    }

    /// Applies the trace adjustments in effect (whole-second durations, separated
    /// identical arrivals) to the jobs read.
    pub fn adjust_trace(&self, jobs: &mut [TraceJob]) {
        if self.whole_second_durations.unwrap_or(self.megha3()) {
            whole_second_durations(jobs);
        }
        if self.separate_identical_arrivals.unwrap_or(self.megha3()) {
            separate_identical_arrivals(jobs);
        }
    }

    /// The cost model in effect: the file given, else the built-in defaults.
    pub fn costs(&self) -> Result<sim::CostModel> {
        match &self.cost_model {
            Some(path) => sim::CostModel::load(path),
            None => Ok(sim::CostModel::default()),
        }
    }

    /// The one-way network delay in effect: the flag, else the cost model's, else
    /// 0.5 ms.
    fn network_delay(&self, costs: &sim::CostModel) -> Result<Micros> {
        match (self.network_delay_ms, costs.network_delay_ns) {
            (Some(ms), _) if !(ms.is_finite() && ms >= 0.0) => {
                bail!("--network-delay-ms must be a non-negative number, not {ms}")
            }
            (Some(ms), _) => Ok(Micros::from_secs_f64(ms / 1000.0)),
            (None, Some(ns)) => Ok(sim::CostModel::micros(ns)),
            (None, None) => Ok(Micros(500)),
        }
    }

    pub fn sim_config(&self, scheduler: SchedulerKind, gms: u16) -> Result<SimConfig> {
        let costs = self.costs()?;
        let network_delay = self.network_delay(&costs)?;
        let heartbeat_s = self.heartbeat_secs();
        if !(heartbeat_s.is_finite() && heartbeat_s > 0.0) {
            bail!("--heartbeat-s must be a positive number, not {heartbeat_s}");
        }
        if self.batch_size == 0 || self.probe_ratio == 0 {
            bail!("--batch-size and --probe-ratio must be at least 1");
        }
        let lm_publish = self.lm_publish()?;
        Ok(SimConfig {
            scheduler,
            network_delay,
            costs,
            heartbeat: Micros::from_secs_f64(heartbeat_s),
            batch_size: self.batch_size,
            probe_ratio: self.probe_ratio,
            seed: self.seed,
            fairness: match &self.queues {
                Some(spec) => Some(std::sync::Arc::new(
                    FairnessConfig::parse(spec, self.share_policy, gms).context("in --queues")?,
                )),
                None => None,
            },
            preemption: self.preemption,
            skip_idle: !self.simulate_idle,
            wake: self.wake,
            lm_publish,
            ..SimConfig::default()
        })
    }

    /// The LM publication rule in effect (`--lm-publish`, `--publish-min-interval-ms`).
    pub fn lm_publish(&self) -> Result<sim::LmPublish> {
        let ms = self.publish_min_interval_ms;
        if !(ms.is_finite() && ms >= 0.0) {
            bail!("--publish-min-interval-ms must be a non-negative number of ms, not {ms}");
        }
        Ok(match self.lm_publish {
            LmPublishMode::Heartbeat => sim::LmPublish::Heartbeat,
            LmPublishMode::Changes => sim::LmPublish::Changes {
                min_interval: Micros::from_secs_f64(ms / 1000.0),
            },
        })
    }

    pub fn workload(&self) -> Result<WorkloadOptions> {
        if self.task_cpus == 0 || self.task_memory_mb == 0 {
            bail!("--task-cpus and --task-memory-mb must be positive");
        }
        Ok(WorkloadOptions {
            default_task: Resources::cores(self.task_cpus, self.task_memory_mb),
            constraints: self.constraint_mode(),
            seed: self.seed,
        })
    }
}

fn parse_wake(name: &str) -> Result<global_master::core::WakePolicy, String> {
    global_master::core::WakePolicy::parse(name).ok_or_else(|| {
        format!(
            "unknown wake policy {name:?}; expected one of: {}",
            global_master::core::WakePolicy::NAMES.join(", ")
        )
    })
}

/// Task durations truncated to whole seconds (the Megha 3.0 simulator reads a
/// duration with `int(float(d))`).
pub fn whole_second_durations(jobs: &mut [TraceJob]) {
    for task in jobs.iter_mut().flat_map(|j| j.tasks.iter_mut()) {
        task.duration = Micros::from_secs(task.duration.0 / 1_000_000);
    }
}

/// A job arriving at exactly the time of an earlier one moves 0.01 s after the last
/// job moved from that time (the Megha 3.0 simulator's separation of identical
/// arrivals, keyed by the original time).
pub fn separate_identical_arrivals(jobs: &mut [TraceJob]) {
    let mut last: std::collections::HashMap<Micros, Micros> = std::collections::HashMap::new();
    for job in jobs.iter_mut() {
        match last.get_mut(&job.arrival) {
            None => {
                last.insert(job.arrival, job.arrival);
            }
            Some(at) => {
                *at += Micros(10_000);
                job.arrival = *at;
            }
        }
    }
}

/// Mercury's task types and their placement and load-shaping knobs.
#[derive(Args, Debug, Clone)]
pub struct MercuryArgs {
    /// Container types (Mercury hybrid-GQ): short (the Megha path, default), only-g,
    /// only-q, hybrid (with --hybrid-td-s and --hybrid-pq) or hybrid:TD_S:PQ. Several
    /// (comma-separated) are run on the same trace and written to DIR/<types>/.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "short",
        value_name = "TYPES"
    )]
    pub task_types: Vec<String>,
    /// hybrid: tasks shorter than this many seconds may be QUEUEABLE (inf: all).
    #[arg(long, default_value_t = f64::INFINITY, value_name = "SECS")]
    pub hybrid_td_s: f64,
    /// hybrid: probability that an eligible task is QUEUEABLE.
    #[arg(long, default_value_t = 0.5, value_name = "P")]
    pub hybrid_pq: f64,
    /// The GM that schedules GUARANTEED tasks.
    #[arg(long, default_value_t = 0, value_name = "GM")]
    pub designated_gm: u16,
    /// QUEUEABLE tasks go to one of the k nodes with the least estimated queuing delay.
    #[arg(long, default_value_t = 4, value_name = "K")]
    pub top_k: usize,
    /// Share of each node running QUEUEABLE work may hold (0 < cap <= 1).
    #[arg(long, default_value_t = 1.0, value_name = "FRACTION")]
    pub queueable_cap: f64,
    /// Order of worker queues: job (earlier-submitted jobs first) or fifo.
    #[arg(long, default_value = "job", value_name = "ORDER")]
    pub queue_order: String,
    /// Shed queued QUEUEABLE work from nodes above mean + K sigma (off if absent).
    #[arg(long, value_name = "K")]
    pub shed_sigma: Option<f64>,
    /// Per-job quota on outstanding QUEUEABLE containers: none, max:N (absolute),
    /// ratio:R (R per GUARANTEED container of the job, at least 1) or max:N,ratio:R.
    #[arg(long, default_value = "none", value_name = "QUOTA")]
    pub queueable_quota: String,
    /// Promote QUEUEABLE containers that have run this many seconds to GUARANTEED
    /// at every LM heartbeat (off if absent).
    #[arg(long, value_name = "SECONDS")]
    pub promote_after_s: Option<f64>,
    /// Most promotions per LM heartbeat.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub promote_per_tick: usize,
}

impl MercuryArgs {
    /// The task-type policies to run, in order.
    pub fn policies(&self) -> Result<Vec<TaskTypes>> {
        let mut out = Vec::new();
        for spec in &self.task_types {
            let policy = if spec == "hybrid" {
                let td = if self.hybrid_td_s == f64::INFINITY {
                    "inf".to_owned()
                } else {
                    self.hybrid_td_s.to_string()
                };
                format!("hybrid:{td}:{}", self.hybrid_pq).parse()
            } else {
                spec.parse()
            };
            out.push(policy.map_err(anyhow::Error::msg)?);
        }
        if out.is_empty() {
            out.push(TaskTypes::Short);
        }
        Ok(out)
    }

    pub fn apply(&self, config: &mut SimConfig) -> Result<()> {
        config.designated_gm = common::GmId(self.designated_gm);
        config.mercury = self.options()?;
        Ok(())
    }

    /// The QUEUEABLE knobs, checked (simulator and embedded services alike).
    pub fn options(&self) -> Result<crate::sim::MercuryOptions> {
        if !(self.queueable_cap > 0.0 && self.queueable_cap <= 1.0) {
            bail!("--queueable-cap must be in (0, 1]");
        }
        if self.top_k == 0 {
            bail!("--top-k must be at least 1");
        }
        if self.shed_sigma.is_some_and(|k| !k.is_finite()) {
            bail!("--shed-sigma must be a number");
        }
        let quota = self
            .queueable_quota
            .parse()
            .map_err(|e| anyhow::anyhow!("--queueable-quota: {e}"))?;
        let promote_after = match self.promote_after_s {
            Some(s) if s.is_finite() && s >= 0.0 => Some(Micros::from_secs_f64(s)),
            Some(_) => bail!("--promote-after-s must be a number of seconds >= 0"),
            None => None,
        };
        if self.promote_per_tick == 0 {
            bail!("--promote-per-tick must be at least 1");
        }
        Ok(crate::sim::MercuryOptions {
            top_k: self.top_k,
            cap: self.queueable_cap,
            queue_order: match self.queue_order.as_str() {
                "job" => worker::core::QueueOrder::JobSubmission,
                "fifo" => worker::core::QueueOrder::Fifo,
                other => bail!("--queue-order {other:?}: expected job or fifo"),
            },
            shed_sigma: self.shed_sigma,
            quota,
            promote_after,
            promote_per_tick: self.promote_per_tick,
            ..crate::sim::MercuryOptions::default()
        })
    }
}

/// Simulate a trace on a cluster and write tasks.csv and summary.json.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The trace to replay (by default in the Sparrow/Megha `.tr` format:
    /// `arrival_s n_tasks mean_s d1 .. dn`, one job per line).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's format.
    #[arg(long, value_enum, default_value = "tr")]
    pub format: TraceFormat,
    #[command(flatten)]
    pub selection: TraceOptionsArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Scheduler(s) to run on the same inputs; several (comma-separated) are run one
    /// after the other and written to DIR/<scheduler>/.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "megha")]
    pub scheduler: Vec<SchedulerKind>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub mercury: MercuryArgs,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No progress bar and no table on stdout (summary.json is still written).
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: SimulateArgs) -> Result<()> {
    let seed = args.model.seed;
    eprintln!("seed: {seed}");
    let cluster = args.cluster.load(seed)?;
    let mut trace = read_trace(&args.trace, args.format, args.selection.clone(), seed)?;
    args.model.adjust_trace(&mut trace);
    if let Some(preset) = args.model.preset {
        eprintln!(
            "preset {preset:?}: constraints {:?}, heartbeat {} s, whole-second durations {}, separated identical arrivals {}",
            args.model.constraint_mode(),
            args.model.heartbeat_secs(),
            args.model.whole_second_durations.unwrap_or(true),
            args.model.separate_identical_arrivals.unwrap_or(true)
        );
    }
    let base_jobs = workload::build(&trace, &args.model.workload()?);
    let policies = args.mercury.policies()?;
    let mut schedulers = args.scheduler.clone();
    schedulers.dedup();
    let mut summaries = Vec::new();
    for &scheduler in &schedulers {
        for &policy in &policies {
            let mut dir = args.out.clone();
            if schedulers.len() > 1 {
                dir = dir.join(scheduler.name());
            }
            if policies.len() > 1 {
                dir = dir.join(policy.dir_name());
            }
            let mut jobs = base_jobs.clone();
            task_types::assign(&mut jobs, policy, seed);
            let mut config = args.model.sim_config(scheduler, cluster.gms)?;
            args.mercury.apply(&mut config)?;
            let window = Micros::from_secs_f64(args.model.fairness_window_s);
            let mut summary = run_one(&cluster, &jobs, &config, &dir, args.quiet, window)?;
            summary.task_types = policy.to_string();
            // Rewrite the summary with the policy's name.
            let json = serde_json::to_string_pretty(&summary)?;
            std::fs::write(dir.join("summary.json"), json + "\n")?;
            summaries.push(summary);
        }
    }
    if !args.quiet {
        print_table(&summaries);
        if policies.len() > 1 {
            print_task_types(&summaries);
        }
        println!("written to {}", args.out.display());
    }
    Ok(())
}

/// Reads a whole trace with the selection options applied, reporting what the reader
/// dropped or repaired on stderr.
pub fn read_trace(
    path: &Path,
    format: TraceFormat,
    selection: TraceOptionsArgs,
    seed: u64,
) -> Result<Vec<TraceJob>> {
    let options = selection.into_options(seed)?;
    let mut source =
        open_trace(path, format, &SourceConfig::default()).map_err(|e| e.given_by("--trace"))?;
    let jobs = options
        .apply(source.by_ref())?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let report = source.report().to_string();
    if format != TraceFormat::Tr && !report.is_empty() {
        eprint!("{report}");
    }
    if jobs.is_empty() {
        bail!("trace {} selects no jobs", path.display());
    }
    Ok(jobs)
}

/// Runs one scheduler and writes its reports into `dir`.
pub fn run_one(
    cluster: &ClusterSpec,
    jobs: &[workload::Job],
    config: &SimConfig,
    dir: &Path,
    quiet: bool,
    fairness_window: Micros,
) -> Result<Summary> {
    let started = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let name = config.scheduler.name();
    let mut progress = |done: u64, total: u64| {
        if quiet {
            return;
        }
        if bar.is_none() && started.elapsed().as_secs_f64() > 1.0 {
            let b = indicatif::ProgressBar::new(total);
            b.set_message(name);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg:>12} [{elapsed_precise}] {wide_bar} {pos}/{len} tasks done",
            ) {
                b.set_style(style);
            }
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(done);
        }
    };
    let cpu_before = crate::report::cpu_seconds();
    let outcome = sim::run(cluster, jobs, config, &mut progress);
    let cpu = crate::report::cpu_seconds()
        .zip(cpu_before)
        .map_or(0.0, |(after, before)| after - before);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let wall = started.elapsed().as_secs_f64();
    let mut summary = Summary::new(name, config.seed, cluster.node_count(), &outcome, wall);
    summary.wake = config.wake.name().to_owned();
    summary.lm_publish = config.lm_publish.describe();
    summary.cpu_time_s = cpu;
    if let Some(f) = &config.fairness {
        let total = cluster.total_capacity();
        let fair = crate::fairness::report(dir, f, total, &outcome, fairness_window)
            .with_context(|| format!("cannot write {}", dir.join("shares.csv").display()))?;
        summary.fairness = Some(fair);
    }
    write_run(dir, &outcome.records, &summary)
        .with_context(|| format!("cannot write reports to {}", dir.display()))?;
    Ok(summary)
}

/// Task throughput, job latency and QUEUEABLE kills per task-type policy, with the
/// throughput gain over the first policy of the same scheduler.
pub fn print_task_types(summaries: &[Summary]) {
    println!(
        "{:<12} {:<16} {:>10} {:>8} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8}",
        "scheduler",
        "task types",
        "tasks/s",
        "gain",
        "job mean s",
        "job p50 s",
        "job p99 s",
        "Q kills",
        "shed",
        "promoted"
    );
    let mut base: Option<(&str, f64)> = None;
    for s in summaries {
        if base.is_none_or(|(name, _)| name != s.scheduler) {
            base = Some((&s.scheduler, s.task_throughput_per_s));
        }
        let gain = match base {
            Some((_, b)) if b > 0.0 => {
                format!("{:+.1}%", (s.task_throughput_per_s / b - 1.0) * 100.0)
            }
            _ => "-".to_owned(),
        };
        let j = &s.job_latency_s;
        println!(
            "{:<12} {:<16} {:>10.2} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>8} {:>6} {:>8}",
            s.scheduler,
            s.task_types,
            s.task_throughput_per_s,
            gain,
            j.mean,
            j.p50,
            j.p99,
            s.queueable_kills,
            s.shed,
            s.promoted
        );
    }
}

pub fn print_table(summaries: &[Summary]) {
    println!(
        "{:<12} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "scheduler",
        "tasks",
        "unpl.",
        "mean s",
        "p50 s",
        "p99 s",
        "p99.9 s",
        "max s",
        "rejects",
        "repart.",
        "wall s"
    );
    for s in summaries {
        let a = &s.allocation_s;
        println!(
            "{:<12} {:>8} {:>6} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.3} {:>8} {:>8} {:>8.2}",
            s.scheduler,
            s.tasks,
            s.unplaceable,
            a.mean,
            a.p50,
            a.p99,
            a.p99_9,
            a.max,
            s.lm_rejections,
            s.repartitions,
            s.wall_time_s
        );
        if let Some(f) = &s.fairness {
            println!(
                "  fairness: Jain mean {:.3}, min {:.3} over {} windows; preemptions {} (attempts {}, refused {}), wasted {:.0} task-s",
                f.jain_mean, f.jain_min, f.windows, s.preemptions, s.preempt_attempts, s.preempt_refused, s.wasted_task_seconds
            );
        }
        if s.never_finished > 0 || s.over_commits > 0 {
            println!(
                "  WARNING: {} tasks never finished, {} over-commits",
                s.never_finished, s.over_commits
            );
        }
    }
}

#[cfg(test)]
mod tests;
