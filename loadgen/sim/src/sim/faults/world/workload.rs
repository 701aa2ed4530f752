//! The jobs a fault run replays.

use crate::sim::faults::FaultConfig;
use common::rng::{seeded, Rng};
use common::{JobId, Micros, Resources, TaskId, TaskSpec};

/// Stream of the workload's draws (the faults and the schedule have their own).
const WORKLOAD_STREAM: u64 = 0xFA19;

/// The trace of a run: jobs of 1 to `max_tasks` one-core tasks of 0.2 s to
/// `max_duration` (3 s by default),
/// arriving over the fault horizon, round-robin over the GMs.
pub(super) fn workload(seed: u64, config: &FaultConfig) -> Vec<(Micros, Vec<TaskSpec>)> {
    let mut rng = seeded(seed, WORKLOAD_STREAM);
    (0..config.jobs)
        .map(|j| {
            let arrival = Micros(rng.random_range(0..config.horizon.0.max(1)));
            let n = rng.random_range(1..=config.max_tasks.max(1));
            let tasks = (0..n)
                .map(|i| {
                    let duration =
                        Micros(rng.random_range(200_000..config.max_duration.0.max(200_001)));
                    // As the services stamp it: the GM the job goes to (round
                    // robin, see `arrival`) in the top bits.
                    let gm = u64::from(j % u32::from(config.gms.max(1)));
                    let id = TaskId::new(gm << JobId::SUBMISSION_BITS | u64::from(j), i);
                    TaskSpec::short(id, Resources::cores(1, 256), duration)
                })
                .collect();
            (arrival, tasks)
        })
        .collect()
}
