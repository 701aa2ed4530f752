//! A deterministic discrete-event simulator of the data center.
//!
//! Single-threaded, virtual time, seeded. It drives the very same GM, LM and worker
//! cores the services run, over a modelled network (a constant one-way delay) with a
//! processing-cost model for every role. Baselines run on the same inputs: Sparrow
//! (batch sampling, late binding) and the centralized configuration (1 GM x 1 LM).
//!
//! - `config.rs`: what a run takes ([`SimConfig`], [`SchedulerKind`]); `outcome.rs`:
//!   what it gives ([`SimOutcome`], [`SimCounters`], [`Run`]); leaves, re-exported here.
//! - [`costs`]: the processing-cost model (defaults, or a calibrated file).
//! - [`events`]: the event queue.
//! - [`ledger`]: per-task timing split into the four allocation-time components.
//! - [`workload`]: trace jobs to task specifications.
//! - [`probe`]: wall-clock timing of the cores' steps (`loadgen calibrate`).
//! - [`megha`]: the Megha driver (also the centralized baseline).
//! - [`sparrow`]: the Sparrow baseline.
//! - [`soft`]: soft constraints (alsched): per job, its utility tree and its
//!   placement-dependent run time.
//! - [`task_types`]: Mercury's hybrid-GQ policy (GUARANTEED vs QUEUEABLE tasks).
//! - [`faults`]: seeded fault injection over small clusters, invariants checked after
//!   every event (`loadgen faults`); separate from the costed drivers above.

mod config;
pub mod costs;
pub mod events;
pub mod faults;
pub mod ledger;
pub mod megha;
mod outcome;
pub mod probe;
pub mod soft;
pub mod sparrow;
pub mod task_types;
pub mod workload;

use common::cluster::{ClusterSpec, LmSpec};
use common::LmId;
pub use config::{LmPublish, MercuryOptions, SchedulerKind, SimConfig};
pub use costs::CostModel;
pub use outcome::{Branches, Progress, Run, SimCounters, SimOutcome};

/// Runs one scheduler over the jobs on the cluster.
pub fn run(
    cluster: &ClusterSpec,
    jobs: &[workload::Job],
    config: &SimConfig,
    progress: Progress<'_>,
) -> SimOutcome {
    match config.scheduler {
        SchedulerKind::Megha => megha::simulate(cluster, jobs, config, progress),
        SchedulerKind::Centralized => megha::simulate(&centralize(cluster), jobs, config, progress),
        SchedulerKind::Sparrow => sparrow::simulate(cluster, jobs, config, progress),
    }
}

/// The same nodes in one LM with one partition.
pub fn centralize(cluster: &ClusterSpec) -> ClusterSpec {
    let nodes = cluster
        .lms
        .iter()
        .flat_map(|lm| lm.nodes().map(|(_, _, n)| *n))
        .collect();
    ClusterSpec {
        gms: 1,
        lms: vec![LmSpec {
            id: LmId(0),
            partitions: vec![nodes],
        }],
    }
}
