//! The Local Master service: the runtime shell around the pure [`lm_core`] (actix
//! actor, internal HTTP API, broker) and the binary's configuration; `main.rs` only
//! parses flags.
//!
//! Layout:
//! - [`lm_core`] (re-exported as [`core`], [`validate`], [`preempt`], [`restart`],
//!   [`queueable`]): the state machine, in a crate of its own with no I/O dependency.
//! - [`service`]: the actor, the HTTP API, metrics and configuration.

pub use lm_core::{core, gate, preempt, queueable, restart, validate};
pub mod service;

pub use lm_core::{LmConfig, LmEffects, LmError, LmInput, LmOutput, LocalMaster, QueueableConfig};
