//! `loadgen experiment NAME`: the project's named experiments, each one command that
//! writes DIR/summary.json and prints a table.
//!
//! - `carbyne` ([`carbyne`]): DRF, Tetris, SJF and Carbyne on TPC-H DAG jobs
//!   (issue 35), with its job metrics in [`jobs`].

pub mod carbyne;
pub mod jobs;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum ExperimentCommand {
    /// Carbyne against DRF, Tetris and SJF on TPC-H DAG jobs (the paper's setup
    /// scaled to this machine): average and p95 JCT, makespan, Jain's index over
    /// windows, jobs slowed against DRF; a P(altruism) sweep; load multiples.
    Carbyne(carbyne::CarbyneArgs),
}

pub fn run(command: ExperimentCommand) -> anyhow::Result<()> {
    match command {
        ExperimentCommand::Carbyne(args) => carbyne::run(args),
    }
}
