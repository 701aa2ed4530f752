//! The Local Master's core: the single authority over one cluster of worker nodes.
//! Pure: no I/O, no clocks, no unseeded randomness; `cargo tree -p lm-core -e normal`
//! shows no runtime crate (`scripts/check-core-purity.sh`, run by CI).
//!
//! It splits its nodes into one partition per Global Master, validates every launch
//! and repartition request against its true state, lends resources across partitions
//! (repartition), returns them when tasks end, tracks per-queue usage, and sends its
//! state to every GM periodically and with every response.
//!
//! Layout, leaves first (no two files import each other:
//! `scripts/check-module-cycles.sh`, run by CI):
//! - [`config`]: [`LmConfig`], [`QueueableConfig`]; [`effects`]: [`LmEffects`] (what
//!   the LM wants done) and [`LmError`]; [`allocation`]: what the LM holds per task.
//! - [`gate`]: what the LM takes into its core at all (readiness, late copies of
//!   batches answered busy), asked by the services and the fault simulator alike.
//! - [`gang_holds`]: gang parts held until commit, release or expiry.
//! - [`preempt_log`]: preemptions made per victim queue, for the rate limit.
//! - [`validate`]: the pure check of one request against the authoritative state.
//! - [`answers`]: launch batches already answered (a resent batch gets the same
//!   answer); [`restarted`]: what a restarted LM remembers of its previous life.
//! - [`core`]: [`LocalMaster`], the state machine, its state private to it; its
//!   methods by concern in its submodules, re-exported here:
//!   - [`step`]: the one entry point, [`LocalMaster::step`]`(now, LmInput) -> LmOutput`;
//!   - [`preempt`]: preemption requests, verified against authoritative per-queue usage;
//!   - [`restart`]: what a restarted LM takes over from the tasks its workers hold;
//!   - [`queueable`]: Mercury's QUEUEABLE work: admission into worker queues, the
//!     per-node cap, queuing-delay estimates, reclaiming for other work, load
//!     shedding, per-job quotas and promotion to GUARANTEED.

pub mod allocation;
pub mod answers;
pub mod config;
pub mod core;
pub mod effects;
pub mod gang_holds;
pub mod gate;
pub mod preempt_holds;
pub mod preempt_log;
pub mod restarted;
pub mod validate;

pub use crate::core::{preempt, queueable, restart, step};

pub use crate::allocation::Allocation;
pub use crate::config::{LmConfig, QueueableConfig};
pub use crate::core::LocalMaster;
pub use crate::effects::{LmEffects, LmError};
pub use crate::step::{LmInput, LmOutput};
