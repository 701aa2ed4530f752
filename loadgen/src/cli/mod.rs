//! Command-line front ends of loadgen subcommands.

pub mod lra;
