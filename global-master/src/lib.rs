//! The Global Master: an independent scheduler with an eventually consistent view of
//! the whole data center.
//!
//! Layout (the scheduling logic lives in two crates with no I/O dependency, re-exported
//! here: `gm-core` as [`core`], `lra-placer` as [`lra`]):
//! - [`core::view`]: per LM and partition, free resources and one bit-vector per
//!   machine constraint, refreshed from heartbeats and every LM response.
//! - [`core::matcher`]: Megha's Algorithm 1 (AND the constraint bit-vectors, then scan
//!   the survivors for free resources).
//! - [`core::opportunistic`]: Mercury's distributed placement of QUEUEABLE work on
//!   one of the top-k nodes by estimated queuing delay (a sorted index per LM view).
//! - [`core::quota`]: per-job quotas on QUEUEABLE containers: counts and held tasks.
//! - [`core::dispatch`]: launch batches, and taking back a batch never delivered.
//! - [`core::queue`]: user queues served round-robin, with requeue semantics.
//! - [`core::master`]: [`core::GlobalMaster`], the `(now, input) -> effects` state
//!   machine: internal partitions round-robin, then external ones (repartition),
//!   batched launch requests, requeue on failure.
//! - [`core::lra_path`]: the designated GM's LRA path (MEDEA 5.4): LRAs wait for the
//!   scheduling interval, the placer runs over the GM's view, placed LRAs become
//!   launch requests the LMs validate, refused containers are resubmitted.
//! - [`lra`]: long-running applications (MEDEA): tag constraints, the constraint
//!   manager, the ILP placer and its heuristics, for the designated GM.
//! - [`service`]: the runtime shell, in parts that import only downward:
//!   [`service::actor`] (the actix actor around the core: deliver, outbox to the LMs,
//!   queries), [`service::observe`] (status, metrics table, events, overview, nodes),
//!   [`service::durable`] (journal, idempotency, standby, shutdown),
//!   [`service::admission`] (request formats, users and queues, routing to the
//!   designated GM), [`service::http`] (router and handlers), and the binary's
//!   configuration ([`service::config`]); `main.rs` only parses flags and calls
//!   [`service::main_with`].

pub use gm_core as core;
pub use lra_placer as lra;
pub mod service;

pub use crate::core::{GlobalMaster, GmConfig};
