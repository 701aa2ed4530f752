//! Load generation and evaluation: trace readers, the deterministic data-center
//! simulator that drives the real scheduling cores, and reports.
//!
//! Layout:
//! - [`trace`]: streaming trace readers and the common [`trace::TraceJob`] shape.
//! - [`lra_workload`]: HBase-like long-running applications (MEDEA 7.1).
//! - [`cli`]: subcommand definitions and runners (`lra experiment`, `lra bench`).

pub mod cli;
pub mod lra_workload;
pub mod trace;
