//! loadgen: a minimal entry point exposing the `lra` subcommands (the full binary
//! is assembled by the lead).

use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "loadgen", about = "Load generation and evaluation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Long-running applications (MEDEA): experiment and benchmark.
    #[command(subcommand)]
    Lra(loadgen::cli::lra::LraCommand),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Lra(cmd) => loadgen::cli::lra::run(cmd),
    }
}
