//! Cross-crate integration tests live in `tests/`; this library only holds shared
//! helpers.
//!
//! - [`procs`]: building and locating the service binaries, running a loopback
//!   cluster of processes, stopping them.
//! - [`broker`]: the RabbitMQ precondition (fails loudly when the broker is away).
//! - [`checks`]: reading `tasks.csv` back and checking safety invariants.

pub mod broker;
pub mod checks;
pub mod procs;
