//! The subcommands that need the services, one file each. The simulators'
//! subcommands are `megha_sim::cli`.

pub mod bench_e2e;
pub mod bench_exec;
pub mod calibrate;
pub mod calibrate_embedded;
pub mod dev;
pub mod replay;
