//! What outlives a GM process: accepted work on disk ([`journal`]), the keys that
//! make a submission idempotent ([`idempotency`]), a second process that waits for
//! the journal and takes over ([`standby`]), and the drain on SIGTERM with what it
//! says of the work it leaves ([`shutdown`]), the jobs' specs as submitted ([`specs`]).

pub mod idempotency;
pub mod journal;
pub mod shutdown;
pub mod specs;
pub mod standby;
