//! Load generation and evaluation: trace readers, the deterministic data-center
//! simulator that drives the real scheduling cores, and reports.
//!
//! Layout:
//! - [`trace`]: streaming trace readers and the common [`trace::TraceJob`] shape.
//! - [`cli`]: command-line front ends (`loadgen trace ...`).

pub mod cli;
pub mod trace;
