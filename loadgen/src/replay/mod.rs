//! Replaying a trace against running schedulers (over HTTP and RabbitMQ, or in one
//! process) and rebuilding the simulator's reports from the event stream.
//!
//! - [`recorder`]: events -> per-task records (pure).
//! - [`driver`]: the replay loop, independent of the transport.
//! - [`net`]: the HTTP submitter and the RabbitMQ event source.
//! - [`embedded`]: every role in one process with in-memory links.
//! - [`finish`]: writing the reports and judging the run.
//! - [`event_log`]: `events.jsonl`, every event received.
//! - [`gangs`]: what became of the replayed gangs.
//! - [`facts`]: what the reports need besides the events, read from the GMs.
//! - [`queues`]: which user queue (and so which GM) each job goes to.

pub mod driver;
pub mod embedded;
pub mod event_log;
pub mod facts;
pub mod finish;
pub mod gangs;
pub mod net;
pub mod queues;
pub mod recorder;
