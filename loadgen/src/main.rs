//! Temporary entry point with only the `trace` subcommands; to be merged into the
//! real `loadgen` main.

use clap::Parser;
use loadgen::cli::trace::TraceCommand;

#[derive(Debug, Parser)]
#[command(name = "loadgen", about = "Trace tools for the Megha scheduler")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Trace statistics, conversion and the streaming benchmark.
    #[command(subcommand)]
    Trace(TraceCommand),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Trace(cmd) => loadgen::cli::trace::run(cmd),
    }
}
