//! Workloads for simulator scenarios (the oracle, the LRA scenarios).

use common::{Micros, Resources, TaskId, TaskKind, TaskSpec};
use loadgen::sim::workload::Job;
use std::sync::Arc;

/// A long-running application: `containers` one-core containers tagged `tag`, the
/// `j`-th running `seconds(j)` seconds.
pub fn lra_job(
    job: u64,
    arrival_s: u64,
    containers: u32,
    tag: &str,
    seconds: impl Fn(u32) -> u64,
) -> Job {
    Job {
        id: job,
        arrival: Micros::from_secs(arrival_s),
        tasks: (0..containers)
            .map(|j| TaskSpec {
                tags: vec![Arc::from(tag)],
                ..TaskSpec::short(
                    TaskId::new(job, j),
                    Resources::cores(1, 512),
                    Micros::from_secs(seconds(j)),
                )
                .with_kind(TaskKind::LongRunning)
            })
            .collect(),
    }
}
