//! `loadgen`: the command line of the simulators, and what needs the running services:
//! HTTP replay, the embedded cluster, the end-to-end benches and the calibration.
//!
//! The simulators, trace readers, reports and plots live in the `megha-sim` crate
//! (`loadgen/sim`, which links no service code); they are re-exported here under their
//! old paths (`loadgen::sim`, `loadgen::trace`, ...). The cluster's client `megha` is the
//! `megha-client` crate (`loadgen/client`).
//!
//! Layout:
//! - [`cli`]: the subcommands that need the services, one file each (`replay`,
//!   `embedded`, `dev`, `bench-e2e`, `bench-exec`, `calibrate`). The credential tools (`certs`, ...) are `service_kit::admin`. The
//!   simulators' subcommands are `megha_sim::cli`; `loadgen` takes them too.
//! - [`replay`]: replaying a trace against running services (HTTP + RabbitMQ) or an
//!   embedded cluster, and rebuilding the same reports from the event stream.
//! - re-exported from `megha-sim`: [`trace`], [`sim`], [`report`], [`plots`],
//!   [`lra_workload`], [`fairness`].

pub mod cli;
pub mod replay;

pub use megha_sim::{fairness, lra_workload, plots, report, sim, trace};
