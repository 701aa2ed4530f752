//! Load generation and evaluation: trace readers, the deterministic data-center
//! simulator that drives the real scheduling cores, and reports.
//!
//! Layout:
//! - [`trace`]: streaming trace readers and the common [`trace::TraceJob`] shape.
//! - [`sim`]: the deterministic simulator; [`report`]: tasks.csv / summary.json.
//! - [`replay`]: replaying a trace against running services (HTTP + RabbitMQ) or an
//!   embedded cluster, and rebuilding the same reports from the event stream.
//! - [`cli`]: the subcommands.

pub mod cli;
pub mod replay;
pub mod report;
pub mod sim;
pub mod trace;
