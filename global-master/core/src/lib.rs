//! The Global Master's scheduling core: an independent scheduler with an eventually
//! consistent view of the whole data center. Pure: no I/O, no clocks, no unseeded
//! randomness; `cargo tree -p gm-core -e normal` shows no runtime crate
//! (`scripts/check-core-purity.sh`, run by CI).
//!
//! Layout:
//! - [`view`]: per LM and partition, free resources and one bit-vector per machine
//!   constraint, refreshed from heartbeats and every LM response.
//! - [`placement`]: the placement pipeline (select -> filter -> fit -> explain) and its
//!   policies (one file and one registry line each; Megha is the default).
//! - [`matcher`]: re-exports of Algorithm 1 (AND the constraint bit-vectors, then scan the
//!   survivors for free resources).
//! - [`opportunistic`]: Mercury's placement of QUEUEABLE work on one of the top-k nodes
//!   by estimated queuing delay.
//! - [`quota`]: per-job quotas on QUEUEABLE containers.
//! - [`dispatch`]: launch batches, and taking back a batch never delivered.
//! - [`queue`]: user queues served round-robin, with requeue semantics.
//! - [`fairness`]: Megha's Algorithm 2 over the view (who is over its share).
//! - [`master`]: [`GlobalMaster`]: internal partitions round-robin, then external ones
//!   (repartition), batched launch requests, requeue on failure.
//! - [`lra_path`]: the designated GM's LRA path (MEDEA 5.4) over the `lra-placer` crate.
//! - [`outputs`]: configuration, decisions, counters.
//! - [`step`]: the one entry point, [`GlobalMaster::step`]`(now, GmInput) -> GmOutput`.

pub mod dispatch;
pub mod fairness;
mod lra_cluster;
pub mod lra_path;
mod lra_types;
pub mod master;
pub mod matcher;
pub mod opportunistic;
pub mod outputs;
pub mod placement;
pub mod queue;
pub mod quota;
pub mod step;
pub mod view;

#[cfg(test)]
mod lra_path_tests;

pub use master::{Decision, DecisionOutcome, GlobalMaster, GmConfig, PassOutput, ResponseOutput};
pub use step::{GmInput, GmOutput, Undelivered};
