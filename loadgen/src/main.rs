//! `loadgen`: simulate, benchmark and (later) replay workloads against the scheduler.

use clap::{Parser, Subcommand};
use loadgen::cli;

/// Load generator and data-center simulator for the Megha federated scheduler.
///
/// Start with `loadgen simulate --help`: it replays a trace on a simulated cluster
/// with the real scheduling cores and writes per-task timings and a summary.
#[derive(Parser, Debug)]
#[command(name = "loadgen", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a trace in the deterministic simulator (Megha, Sparrow or centralized)
    /// and write DIR/tasks.csv and DIR/summary.json.
    Simulate(Box<cli::simulate::SimulateArgs>),
    /// Measure simulator speed and memory on 10,000 and 50,000 nodes (prints figures).
    Bench(cli::bench::BenchArgs),
    /// Trace tools: statistics, conversion to `.tr`, streaming benchmark.
    #[command(subcommand)]
    Trace(cli::trace::TraceCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => cli::simulate::run(*args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Trace(cmd) => cli::trace::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn every_subcommand_has_consistent_arguments() {
        Cli::command().debug_assert();
    }
}
