//! `loadgen experiment NAME`: the project's named experiments, each one command that
//! writes DIR/summary.json and prints a table.
//!
//! - `alsched` ([`alsched`]): soft constraints (utility trees) against ignoring
//!   preferences and making them hard, with placement-dependent run times (issue 36).
//! - `carbyne` ([`carbyne`]): DRF, Tetris, SJF and Carbyne on TPC-H DAG jobs
//!   (issue 35), with its job metrics in [`jobs`].

pub mod alsched;
pub mod carbyne;
pub mod jobs;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum ExperimentCommand {
    /// Carbyne against DRF, Tetris and SJF on TPC-H DAG jobs (the paper's setup
    /// scaled to this machine): average and p95 JCT, makespan, Jain's index over
    /// windows, jobs slowed against DRF; a P(altruism) sweep; load multiples.
    Carbyne(carbyne::CarbyneArgs),
    /// Soft constraints (alsched utility trees) against none and hard on a cluster
    /// with racks and GPU nodes, jobs slower off their preferred nodes, at several
    /// loads: mean and p95 completion, utilisation, preferred share.
    Alsched(alsched::AlschedArgs),
}

pub fn run(command: ExperimentCommand) -> anyhow::Result<()> {
    match command {
        ExperimentCommand::Carbyne(args) => carbyne::run(args),
        ExperimentCommand::Alsched(args) => alsched::run(args),
    }
}
