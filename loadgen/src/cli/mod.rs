//! Command-line front ends. Each subcommand lives in its own file.

pub mod bench;
pub mod bench_alsched;
pub mod bench_carbyne;
pub mod bench_e2e;
pub mod bench_exec;
pub mod bench_targets;
pub mod bench_topk;
pub mod bench_wake;
pub mod calibrate;
pub mod calibrate_embedded;
pub mod certs;
pub mod dev;
pub mod experiment;
pub mod faults;
pub mod lra;
pub mod replay;
pub mod report;
pub mod simulate;
pub mod trace;
pub mod validate;
