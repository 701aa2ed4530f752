//! The Local Master's core: the single authority over one cluster of worker nodes.
//! Pure: no I/O, no clocks, no unseeded randomness; `cargo tree -p lm-core -e normal`
//! shows no runtime crate (`scripts/check-core-purity.sh`, run by CI).
//!
//! It splits its nodes into one partition per Global Master, validates every launch
//! and repartition request against its true state, lends resources across partitions
//! (repartition), returns them when tasks end, tracks per-queue usage, and sends its
//! state to every GM periodically and with every response.
//!
//! Layout:
//! - [`step`]: the one entry point, [`LocalMaster::step`]`(now, LmInput) -> LmOutput`.
//! - [`validate`]: the pure check of one request against the authoritative state.
//! - [`core`]: [`LocalMaster`], the state machine.
//! - [`preempt`]: preemption requests, verified against authoritative per-queue usage.
//! - [`restart`]: what a restarted LM takes over from the tasks its workers hold.
//! - [`queueable`]: Mercury's QUEUEABLE work: admission into worker queues, the
//!   per-node cap, queuing-delay estimates, reclaiming for other work, load shedding,
//!   per-job quotas and promotion to GUARANTEED.

pub mod core;
pub mod preempt;
pub mod queueable;
pub mod restart;
pub mod step;
pub mod validate;

pub use crate::core::{Allocation, LmConfig, LmEffects, LmError, LocalMaster};
pub use crate::queueable::QueueableConfig;
pub use crate::step::{LmInput, LmOutput};
