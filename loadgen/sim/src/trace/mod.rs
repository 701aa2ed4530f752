//! Workload traces: a common in-memory shape ([`TraceJob`]) and streaming readers
//! that produce it one job at a time, so that a multi-gigabyte trace is never loaded
//! whole.
//!
//! - [`tr`]: the Sparrow / Eagle / Megha simulator format (durations only).
//! - [`alibaba`]: Alibaba cluster-trace-v2018 `batch_task.csv` / `batch_instance.csv`.
//! - [`google`]: Google cluster-usage traces v3 (2019) instance events (CSV / JSON).
//! - [`tpch`]: DAG jobs drawn from the TPC-H query DAGs measured on Spark.
//! - [`topo`]: the order of a job's DAG stages, cycles, critical paths.
//! - [`options`]: window, sampling, first-N, speed-up and scaling as an adapter.
//! - [`stats`]: counts, arrival rate, duration percentiles, demand over time.
//! - [`source`]: [`open_trace`], any format behind one [`TraceSource`] interface.
//! - [`synth`], [`bench`]: synthetic files and the streaming benchmark.
//! - [`report`]: [`ReadReport`], what a reader dropped or patched and why.

pub mod alibaba;
pub mod bench;
pub mod google;
mod job;
pub mod options;
pub mod report;
pub mod source;
pub mod stats;
pub mod synth;
pub mod topo;
pub mod tpch;
pub mod tr;

pub use job::{read_all, DagStage, TraceError, TraceJob, TraceTask};
pub use report::ReadReport;
pub use source::{open_trace, SourceConfig, TraceFormat, TraceSource};
