//! `global-master`: see `global-master --help`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    global_master::service::main_with(global_master::service::config::GmArgs::parse())
}
