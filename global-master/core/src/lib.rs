//! The Global Master's scheduling core: an independent scheduler with an eventually
//! consistent view of the whole data center. Pure: no I/O, no clocks, no unseeded
//! randomness; `cargo tree -p gm-core -e normal` shows no runtime crate
//! (`scripts/check-core-purity.sh`, run by CI).
//!
//! [`GlobalMaster`] composes parts, each a type with private state and its own
//! methods; a part takes the other parts it needs as arguments. No two files import
//! each other (`scripts/check-module-cycles.sh`, run by CI).
//!
//! Layout, leaves first:
//! - [`outputs`]: decisions, pass and response outputs, counters (a leaf);
//!   [`config`]: [`GmConfig`].
//! - [`queue`]: a waiting task ([`queue::Pending`]) and the user queues served
//!   round-robin, with requeue semantics.
//! - [`view`]: one LM's view: per partition, free resources and one bit-vector per
//!   machine constraint, refreshed from heartbeats and every LM response;
//!   [`cluster_view`]: every LM's view and applying a snapshot.
//! - [`backlog`]: the queues, the known-miss cache of task shapes, and which blocked
//!   tasks a gain of resources wakes (the wake index); [`grown`]: the nodes that grew
//!   since the last wake, asked during a pass whether a blocked shape fits.
//! - [`placement`]: the placement pipeline (select -> filter -> fit -> explain) and its
//!   policies (one file and one registry line each; Megha is the default);
//!   [`matcher`]: re-exports of Algorithm 1 under its historical name.
//! - [`alsched`]: soft constraints: the jobs with a utility tree, the greedy step
//!   over their branches (before the pipeline, which stays the fallback), and the
//!   branch chosen for each task and why better ones were not taken.
//! - [`opportunistic`]: Mercury's placement of QUEUEABLE work on one of the top-k nodes
//!   by estimated queuing delay.
//! - [`quota`]: per-job quotas on QUEUEABLE containers.
//! - [`dispatch`]: launch batches, in-flight deductions, tasks awaiting an answer, and
//!   taking back a batch never delivered.
//! - [`dag`]: DAG jobs: the tasks of a stage held until its parent stages ended,
//!   then released to their queues (or never run when a parent failed).
//! - [`carbyne`]: job ordering policies (DRF, Tetris, SJF, Carbyne's altruistic
//!   scheduling) that reorder the waiting tasks before a pass.
//! - [`gang`]: gangs: the reserve / commit / release transaction with the LMs, its
//!   generations and timers, and where the members go ([`gang::plan`]).
//! - [`lifecycle`]: retries of failed and lost tasks under their job's policy, and
//!   cancelled jobs.
//! - [`fairness`]: Megha's Algorithm 2 over the view (who is over its share), and the
//!   preemption slots and refusals.
//! - [`lra_path`]: the designated GM's LRA path (MEDEA 5.4) over the `lra-placer` crate.
//! - [`master`]: [`GlobalMaster`], the composition: a scheduling pass, the LMs'
//!   answers, the LRA path, and [`step`], the one entry point,
//!   [`GlobalMaster::step`]`(now, GmInput) -> GmOutput`.

pub mod alsched;
pub mod backlog;
pub mod carbyne;
pub mod cluster_view;
pub mod config;
pub mod dag;
pub mod dispatch;
pub mod fairness;
pub mod gang;
pub mod grown;
pub mod lifecycle;
pub mod lra_path;
pub mod master;
pub mod matcher;
pub mod opportunistic;
pub mod outputs;
pub mod placement;
pub mod queue;
pub mod quota;
pub mod view;

pub use config::{check_soft_ilp_ms, WakePolicy, MAX_SOFT_ILP_MS};
pub use master::step;

pub use master::{
    Decision, DecisionOutcome, GlobalMaster, GmConfig, KnownMisses, PassOutput, ResponseOutput,
};
pub use step::{GmInput, GmOutput, Resumed, ResumedDag, Undelivered};
