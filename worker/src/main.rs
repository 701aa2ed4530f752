//! `worker`: see `worker --help`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    worker::service::main_with(worker::service::config::WorkerArgs::parse())
}
