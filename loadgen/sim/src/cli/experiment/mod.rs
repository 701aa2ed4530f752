//! `loadgen experiment NAME`: the project's named experiments, each one command that
//! writes DIR/summary.json and prints a table.
//!
//! - `alsched` ([`alsched`]): soft constraints (utility trees) against ignoring
//!   preferences and making them hard, with placement-dependent run times (issue 36).
//! - `carbyne` ([`carbyne`]): DRF, Tetris, SJF and Carbyne on TPC-H DAG jobs
//!   (issue 35), with its job metrics in [`jobs`].
//! - `fairness` ([`fairness`]): the Megha paper's fairness setup with and without
//!   preemption under the preemption rules (issue 37).
//! - `gangs` ([`gangs`]): gang-aware placement against placing a gang's tasks one
//!   by one (issue 37).
//! - `mercury` ([`mercury`]): GUARANTEED against QUEUEABLE work, Mercury's
//!   policies at two heartbeats (what `scripts/mercury-experiment.sh` ran).
//! - `priorities` ([`priorities`]): two priority classes under overload (issue 37).

pub mod alsched;
pub mod carbyne;
pub mod fairness;
pub mod flags;
pub mod gangs;
pub mod jobs;
pub mod mercury;
pub mod output;
pub mod priorities;
pub mod seeds;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum ExperimentCommand {
    /// Carbyne against DRF, Tetris and SJF on TPC-H DAG jobs (the paper's setup
    /// scaled to this machine): average and p95 JCT, makespan, Jain's index over
    /// windows, jobs slowed against DRF; a P(altruism) sweep; load multiples.
    Carbyne(carbyne::CarbyneArgs),
    /// The Megha paper's fairness setup (4 queues, YH1_sub's first 300 jobs, about
    /// 200, 500 and 1,500 nodes) with and without preemption: Jain's index,
    /// preemptions per task, the most of one task, wasted task-seconds.
    Fairness(fairness::FairnessArgs),
    /// Two priority classes under overload: the high class's allocation time,
    /// unloaded and under load without classes, ordered first, and preempting.
    Priorities(priorities::PrioritiesArgs),
    /// Mercury's GUARANTEED and QUEUEABLE policies (only-G, only-Q, 50%-Q,
    /// <10s-70%-Q) on a short-task and a mixed workload at two heartbeats: task
    /// throughput and its gain over only-G, job latency, QUEUEABLE kills.
    Mercury(mercury::MercuryArgs),
    /// Soft constraints (alsched utility trees) against none and hard on a cluster
    /// with racks and GPU nodes, jobs slower off their preferred nodes, at several
    /// loads: mean and p95 completion, utilisation, preferred share.
    Alsched(alsched::AlschedArgs),
    /// Gangs (20% of jobs, 8 to 64 tasks) placed gang-aware against one by one:
    /// job completion time, idle reserved node-seconds, partial starts.
    Gangs(gangs::GangsArgs),
}

pub fn run(command: ExperimentCommand) -> anyhow::Result<()> {
    match command {
        ExperimentCommand::Carbyne(args) => carbyne::run(args),
        ExperimentCommand::Fairness(args) => fairness::run(args),
        ExperimentCommand::Priorities(args) => priorities::run(args),
        ExperimentCommand::Mercury(args) => mercury::run(args),
        ExperimentCommand::Alsched(args) => alsched::run(args),
        ExperimentCommand::Gangs(args) => gangs::run(args),
    }
}
