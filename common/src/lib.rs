//! The shared vocabulary of the scheduler.
//!
//! Every other crate speaks in these types, so that the pure scheduling cores, the
//! simulator and the networked services agree on what a task, a node or a message is.
//!
//! Layout:
//! - [`ids`]: newtype identifiers (GM, LM, node, job, task, queue).
//! - [`time`]: [`Micros`], the one unit of time used by the cores (virtual or wall).
//! - [`resources`]: multi-dimensional [`Resources`] (CPU millicores, memory MiB).
//! - [`constraints`]: machine/task placement constraints as a bit set;
//!   [`attributes`]: names for those bits (`gpu`, `rack=r3`).
//! - [`task`]: task and job specifications, task kinds.
//! - [`dag`]: a job's stages and the edges between them (DAG jobs).
//! - [`cluster`]: cluster descriptions: Megha config files and generated clusters;
//!   [`cluster_described`]: node groups with named attributes.
//! - [`protocol`]: one message enum per direction (GM -> LM, LM -> GM, LM -> worker,
//!   worker -> LM, client -> GM): what every core's `step` takes and sends.
//! - [`messages`]: the payloads those enums carry.
//! - [`gang`]: gangs (tasks that start together or not at all) and their
//!   reserve / commit / release transaction.
//! - [`preemption`]: the rules that keep preemption from churning.
//! - [`priority`]: priority classes and the order they give a queue.
//! - [`quota`]: per-job quotas on QUEUEABLE containers (Mercury 4.1).
//! - [`events`]: task lifecycle events, the input of every allocation-time report.
//! - [`cluster_name`]: the name that keeps clusters sharing a broker apart.
//! - [`codec`]: the one place that knows how internal messages are encoded.
//! - [`rng`]: seeded, portable randomness.
//! - [`utility`]: alsched's utility trees (soft constraints), their JSON form,
//!   validation and evaluation.

pub mod attributes;
pub mod bounded;
pub mod cluster;
pub mod cluster_described;
pub mod cluster_name;
pub mod codec;
pub mod constraint_model;
pub mod constraints;
pub mod dag;
pub mod events;
pub mod fairness;
pub mod gang;
pub mod ids;
pub mod messages;
pub mod preemption;
pub mod priority;
pub mod protocol;
pub mod quota;
pub mod reasons;
pub mod resources;
pub mod retry;
pub mod rng;
pub mod task;
pub mod time;
pub mod utility;

pub use cluster_name::ClusterName;
pub use constraints::ConstraintSet;
pub use ids::{GmId, JobId, LmId, NodeId, QueueId, TaskId};
pub use resources::Resources;
pub use task::{BurnByPlacement, ExecCommand, Executor, TaskKind, TaskSpec};
pub use time::Micros;
