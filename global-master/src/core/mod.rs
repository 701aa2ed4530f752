//! The pure GM core: no I/O, no clocks, no unseeded randomness.

pub mod fairness;
pub mod master;
pub mod matcher;
pub mod opportunistic;
pub mod outputs;
pub mod queue;
pub mod view;

pub use master::{Decision, DecisionOutcome, GlobalMaster, GmConfig, PassOutput, ResponseOutput};
