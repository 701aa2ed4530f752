//! Command-line front ends. Each subcommand lives in its own file.

pub mod bench;
pub mod lra;
pub mod simulate;
pub mod trace;
