//! Deterministic fault injection: a small seeded cluster (GMs, LMs, one worker core
//! per node) driven through the very cores the services run, over a modelled network
//! that loses, duplicates, delays and reorders messages, with partitions, crashes and
//! restarts, refusing workers, broker outages and clock skew as seeded events. The
//! invariants ([`check`]) are checked after every event; a broken one stops the run
//! with the seed, the event index and the events before it, and the same seed replays
//! it exactly.
//!
//! Separate from [`super::megha`] (the costed simulator the oracle pins byte for
//! byte): nothing here runs unless asked for, so `loadgen simulate` is unchanged.
//!
//! How the network mirrors the services' transport (service-kit `links.rs`, the LM
//! and GM drivers):
//! - GM -> LM requests are calls: a lost request or answer is a timeout, retried 50 ms
//!   apart doubling to 2 s until the doubt timeout (the LM answers a repeat from its
//!   record); a peer unreachable at the first attempt settles it at once as
//!   [`GmInput::Undelivered`](gm_core::GmInput::Undelivered). An LM answers
//!   once its orders reached the workers, and not before every worker registered
//!   after its start (503).
//! - LM -> worker orders, worker -> LM reports and LM -> GM `Requeue`/`Ended` are
//!   ordered streams retried until delivered: a loss is a later resend, a duplicate a
//!   resend whose first copy arrived; their content dies with the sender. When an
//!   LM declares a worker lost it abandons the stream, but the start order in flight
//!   may still arrive, late ([`FaultConfig::late_orders`]); a worker takes a start
//!   order only through worker-core's `OrderFilter` (each dispatch once, none of a
//!   replaced LM life or numbered below its registration's first order), as the
//!   worker service does.
//! - State updates (heartbeats) go over the broker: lost while it is down or the
//!   sides are cut, and may be lost, duplicated, delayed or reordered.
//!
//! What a restart keeps mirrors the services: a worker comes back empty and registers
//! again; a restarted LM takes the tasks its workers still hold and those they
//! finished (lm-core `restart.rs`); a GM keeps nothing (its first batch number is its
//! clock, `GmConfig::first_batch_seq`) but its journal ([`FaultConfig::journal`], as
//! the GM service has it since issue 14): it resubmits every accepted task whose end
//! it had not heard. Workers silent for the worker timeout are lost at their LM
//! ([`FaultConfig::worker_timeout`], the LM service's worker liveness). Both can be
//! turned off to check the invariants against the roles before issue 14.
//!
//! Layout: [`plan`] (fault kinds, random and scripted schedules), [`check`] (the
//! invariants), `config` ([`FaultConfig`], [`RunReport`]), `runner` (one seed: [`run`],
//! [`shrink`]), `world` (the driver), `search` (many seeds on threads).

pub mod check;
mod config;
pub mod plan;
mod runner;
mod search;
mod world;

pub use check::{Invariant, Known, Violation};
pub use config::{FaultConfig, RunReport};
pub use plan::{Fault, FaultRates, Link, LinkRates, Role, Schedule};
pub use runner::{run, shrink};
pub use search::{search, SearchReport};
