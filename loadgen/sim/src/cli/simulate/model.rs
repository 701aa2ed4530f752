//! The workload and model flags shared by simulate and bench ([`ModelArgs`]): task
//! sizes, constraints, costs, heartbeats, publication, fairness, and the `megha3`
//! preset with the trace adjustments it implies.

use crate::sim::workload::{ConstraintMode, WorkloadOptions};
use crate::sim::{self, SchedulerKind, SimConfig};
use crate::trace::TraceJob;
use anyhow::{bail, Context, Result};
use clap::Args;
use common::fairness::FairnessConfig;
use common::{Micros, Resources};
use std::path::PathBuf;

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
    /// durations, identical arrivals separated by 0.01 s, every blocked task retried
    /// at every gain: `--wake all`). A flag given explicitly wins over the preset.
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
    /// with the backlog) or all (every one, as the paper's simulator does)
    /// [default: indexed; megha3: all].
    #[arg(long, value_name = "POLICY", value_parser = parse_wake)]
    pub wake: Option<gm_core::WakePolicy>,
    /// In which order a GM tries its waiting tasks: fifo (user queues in turn, each
    /// in arrival order: the default), drf (fairness between jobs), tetris (packing),
    /// sjf (shortest remaining critical path), or carbyne (altruistic: DRF shares,
    /// leftover to the jobs closest to completion, then packed; docs/carbyne.md).
    #[arg(long, default_value = "fifo", value_name = "POLICY", value_parser = parse_order)]
    pub order: gm_core::carbyne::JobOrder,
    /// With --order carbyne: P(altruism), the probability that a job gives away
    /// what it need not run now (0 = DRF, 1 = every job).
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub altruism: f64,
    /// With --order other than fifo: least time between two replans triggered by
    /// task ends, in ms (job arrivals and ends always replan).
    #[arg(long, default_value_t = 500.0, value_name = "MS")]
    pub replan_ms: f64,
    /// When an LM sends its state to every GM: heartbeat (at heartbeats only, as the
    /// Megha simulator does), or changes (also after every answer to a GM and every
    /// task end, at most once per --publish-min-interval-ms, as the services' LM
    /// does). Both piggyback the state on answers [default: heartbeat; with
    /// --cost-model: changes, since a calibrated model stands for the services;
    /// megha3: heartbeat].
    #[arg(long, value_enum, value_name = "WHEN")]
    pub lm_publish: Option<LmPublishMode>,
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
    /// The rules that bound preemption (docs/fairness.md).
    #[command(flatten)]
    pub preempt: super::preempt::PreemptArgs,
    /// Soft constraints: the designated GM solves the waiting tasks of jobs with
    /// utility trees exactly at each pass, an ILP capped at MS ms (1 to 60000), as
    /// the GM's --soft-ilp-ms (docs/alsched.md). Traces carry no trees; `loadgen
    /// experiment alsched` has it as its `soft_ilp` policy. Default: off.
    #[arg(long, value_name = "MS", value_parser = parse_soft_ilp_ms)]
    pub soft_ilp_ms: Option<u64>,
}

/// `--soft-ilp-ms`, checked as the GM checks it.
pub fn parse_soft_ilp_ms(text: &str) -> Result<u64, String> {
    let ms = text
        .parse::<u64>()
        .map_err(|e| format!("{text:?} is not a number of ms: {e}"))?;
    gm_core::check_soft_ilp_ms(ms)
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

    /// The wake rule in effect (flag, else preset, else indexed).
    pub fn wake_policy(&self) -> gm_core::WakePolicy {
        use gm_core::WakePolicy;
        self.wake.unwrap_or(match self.megha3() {
            true => WakePolicy::All,
            false => WakePolicy::Indexed,
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
                    FairnessConfig::parse(spec, self.share_policy, gms)
                        .context("in --queues")?
                        .with_rules(self.preempt.rules()?),
                )),
                None => None,
            },
            preemption: self.preemption,
            skip_idle: !self.simulate_idle,
            wake: self.wake_policy(),
            order: self.order_config()?,
            lm_publish,
            soft_ilp_ms: self.soft_ilp_ms,
            ..SimConfig::default()
        })
    }

    /// The job-ordering policy (`--order`, `--altruism`, `--replan-ms`).
    pub fn order_config(&self) -> Result<gm_core::carbyne::OrderConfig> {
        let ms = self.replan_ms;
        if !(ms.is_finite() && ms >= 0.0) {
            bail!("--replan-ms must be a non-negative number of ms, not {ms}");
        }
        let config = gm_core::carbyne::OrderConfig {
            order: self.order,
            altruism: self.altruism,
            seed: self.seed,
            replan_every: Micros::from_secs_f64(ms / 1000.0),
        };
        config.check().map_err(|e| anyhow::anyhow!("--{e}"))?;
        Ok(config)
    }

    /// When LMs publish their state: the flag, else heartbeats under the megha3
    /// preset (the peer's rule), else on change with a cost model (the services'
    /// rule: a calibrated model predicts the services only with it; measured in
    /// docs/simulator-performance.md), else heartbeats.
    pub fn lm_publish_mode(&self) -> LmPublishMode {
        self.lm_publish
            .unwrap_or(match (self.megha3(), self.cost_model.is_some()) {
                (false, true) => LmPublishMode::Changes,
                _ => LmPublishMode::Heartbeat,
            })
    }

    /// The LM publication rule in effect (`--lm-publish`, `--publish-min-interval-ms`).
    pub fn lm_publish(&self) -> Result<sim::LmPublish> {
        let ms = self.publish_min_interval_ms;
        if !(ms.is_finite() && ms >= 0.0) {
            bail!("--publish-min-interval-ms must be a non-negative number of ms, not {ms}");
        }
        Ok(match self.lm_publish_mode() {
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

fn parse_wake(name: &str) -> Result<gm_core::WakePolicy, String> {
    gm_core::WakePolicy::parse(name).ok_or_else(|| {
        format!(
            "unknown wake policy {name:?}; expected one of: {}",
            gm_core::WakePolicy::NAMES.join(", ")
        )
    })
}

fn parse_order(name: &str) -> Result<gm_core::carbyne::JobOrder, String> {
    gm_core::carbyne::JobOrder::parse(name).ok_or_else(|| {
        format!(
            "unknown job order {name:?}; expected one of: {}",
            gm_core::carbyne::JobOrder::NAMES.join(", ")
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

#[cfg(test)]
mod tests;
