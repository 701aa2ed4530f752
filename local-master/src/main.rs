//! `local-master`: see `local-master --help`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    local_master::service::main_with(local_master::service::config::LmArgs::parse())
}
