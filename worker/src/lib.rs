//! The worker: runs the tasks its Local Master sends and reports when each starts and
//! finishes.
//!
//! Layout:
//! - [`core`]: [`core::Worker`], the pure `(now, input) -> reports` state machine. A
//!   synthetic task "runs" by holding its resources for its duration; the services'
//!   executor and the simulator both drive this same core.

pub mod core;

pub use crate::core::{Worker, WorkerError};
