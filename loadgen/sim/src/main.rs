//! `megha-sim`: the simulators' command line, built without any service code
//! (`cargo build -p megha-sim`). `loadgen` takes the same subcommands.

use clap::Parser;

// mimalloc: the simulator allocates and frees a message or an output vector per event;
// glibc malloc and free were 12% of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The deterministic data-center simulators of the Megha federated scheduler, over
/// the real scheduling cores: simulate, benchmark, inject faults, run experiments.
///
/// Start with `megha-sim simulate --help`: it replays a trace on a simulated cluster
/// and writes per-task timings and a summary. `loadgen` has the same subcommands, and
/// those that need the services (replay, embedded, dev, calibrate, ...).
#[derive(Parser, Debug)]
#[command(name = "megha-sim", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: megha_sim::cli::Command,
}

fn main() -> std::process::ExitCode {
    megha_sim::cli::exit_code(megha_sim::cli::run(Cli::parse().command))
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
