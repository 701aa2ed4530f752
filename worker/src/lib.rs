//! The worker: runs the tasks its Local Master sends and reports when each starts and
//! how it ends (finished, failed with its exit code or reason, killed).
//!
//! Layout:
//! - [`core`] (the `worker-core` crate, no I/O dependency): [`core::Worker`], the
//!   pure `(now, input) -> reports` state machine. It decides what starts, queues,
//!   is refused or killed; a synthetic task "runs" by holding its resources for its
//!   duration (the simulator runs only those), others are launched and stopped by
//!   the service's executors, which tell the core when they end.
//! - [`exec`]: the real executors (burn, exec) the service runs tasks with, their
//!   limits (cgroups or rlimits) and logs.
//! - [`service`]: the runtime shell (actix actor, HTTP API, reports to the LM) and
//!   the binary's configuration; `main.rs` only parses flags.

pub use worker_core as core;
pub mod exec;
pub mod service;

pub use crate::core::{Worker, WorkerError};
