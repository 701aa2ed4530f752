//! The deterministic data-center simulators and what they read and write: trace
//! readers, the simulators that drive the real scheduling cores (`gm-core`,
//! `lra-placer`, `lm-core`, `worker-core`) over a modelled network, and the reports and
//! plots of their runs. It depends on the cores and `common` only: no service crate,
//! no async runtime, HTTP or broker client (`scripts/check-core-purity.sh` checks it),
//! so a simulator build compiles and links no service code. Its command line is the
//! `megha-sim` binary ([`cli`]); `loadgen` takes the same subcommands and adds those
//! that need the services (`replay`, `embedded`, ...), which reuse its trace readers
//! and reports.
//!
//! Layout:
//! - [`trace`]: streaming trace readers (`.tr`, Alibaba 2018, Google 2019), the
//!   TPC-H DAG workload, options (window, sampling, speed-up, scaling) and statistics.
//! - [`sim`]: the discrete-event simulators: Megha (`sim/megha`), Sparrow
//!   (`sim/sparrow.rs`), centralized, and the fault-injection simulator (`sim/faults`).
//! - [`report`]: `tasks.csv` and `summary.json`.
//! - [`plots`]: `loadgen report`: SVG figures and an HTML page from runs.
//! - [`lra_workload`]: HBase-like long-running applications for the MEDEA experiments.
//! - [`fairness`]: Jain's index and per-queue shares of a run.
//! - [`cli`]: the subcommands (`simulate`, `bench*`, `trace`, `lra`, `faults`,
//!   `experiment`, `report`), one file each.

pub mod cli;
pub mod fairness;
pub mod lra_workload;
pub mod plots;
pub mod report;
pub mod sim;
pub mod trace;
