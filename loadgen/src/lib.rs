//! Load generation and evaluation: trace readers, the deterministic data-center
//! simulator that drives the real scheduling cores, and reports.
//!
//! Layout:
//! - [`trace`]: streaming trace readers (`.tr`, Alibaba 2018, Google 2019), options
//!   (window, sampling, speed-up, scaling) and statistics.
//! - [`sim`]: the discrete-event simulator (Megha, Sparrow, centralized).
//! - [`report`]: `tasks.csv` and `summary.json`.
//! - [`plots`]: `loadgen report`: SVG figures and an HTML page from runs.
//! - [`lra_workload`]: HBase-like long-running applications for the MEDEA experiments.
//! - [`fairness`]: Jain's index and per-queue shares of a run.
//! - [`replay`]: replaying a trace against running services (HTTP + RabbitMQ) or an
//!   embedded cluster, and rebuilding the same reports from the event stream.
//! - [`cli`]: command-line front ends; [`client`]: `megha`, the cluster's
//!   command-line client (binary `src/bin/megha.rs`).

pub mod cli;
pub mod client;
pub mod fairness;
pub mod lra_workload;
pub mod plots;
pub mod replay;
pub mod report;
pub mod sim;
pub mod trace;
