//! The pure GM core: no I/O, no clocks, no unseeded randomness.

pub mod dispatch;
pub mod fairness;
mod lra_cluster;
pub mod lra_path;
mod lra_types;
pub mod master;
pub mod matcher;
pub mod opportunistic;
pub mod outputs;
pub mod queue;
pub mod quota;
pub mod view;

#[cfg(test)]
mod lra_path_tests;

pub use master::{Decision, DecisionOutcome, GlobalMaster, GmConfig, PassOutput, ResponseOutput};
