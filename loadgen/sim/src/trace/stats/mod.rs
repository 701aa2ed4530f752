//! Trace statistics, gathered while streaming: job and task counts, arrivals per time
//! bucket, the task-duration distribution, and the resources demanded over time
//! against a cluster size (the Megha paper's Figure 5: worker slots required over
//! time, where a task holds one slot from its arrival for its duration, as if it
//! started at once), and for jobs with DAG stages, their DAG facts ([`DagStats`]).
//!
//! Memory grows with the trace's time span divided by the bucket length, not with the
//! number of jobs or tasks.

mod dag;
mod gather;
mod histogram;
mod render;

pub use dag::{Counts, DagStats};
pub use gather::{Bucket, TooManyBuckets, TraceStats, MAX_BUCKETS};
pub use histogram::LogHistogram;
pub use render::{write_csv, write_table};
