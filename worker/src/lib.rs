//! The worker: runs the tasks its Local Master sends and reports when each starts and
//! finishes.
//!
//! Layout:
//! - [`core`] (the `worker-core` crate, no I/O dependency): [`core::Worker`], the pure `(now, input) -> reports` state machine. A
//!   synthetic task "runs" by holding its resources for its duration; the services'
//!   executor and the simulator both drive this same core.
//! - [`service`]: the runtime shell (actix actor, HTTP API, reports to the LM) and
//!   the binary's configuration; `main.rs` only parses flags.

pub use worker_core as core;
pub mod service;

pub use crate::core::{Worker, WorkerError};
