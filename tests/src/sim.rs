//! Workloads for simulator scenarios (the oracle, the LRA scenarios).

use common::{Micros, Resources, TaskId, TaskKind, TaskSpec};
use global_master::core::lra_path::LraPathConfig;
use global_master::lra::{PlacementConstraint, Placer, TagSet};
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
        dag: None,
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

/// The designated GM's LRA path for the scenarios: `placer` every `interval_s`
/// seconds, 3 nodes per rack.
pub fn lra_path(placer: Placer, interval_s: u64) -> LraPathConfig {
    LraPathConfig {
        interval: Micros::from_secs(interval_s),
        placer,
        nodes_per_rack: 3,
        groups: Default::default(),
    }
}

/// The operator constraint of the scenarios: containers tagged `w` never share a
/// node (hard).
pub fn w_anti_affinity() -> Vec<PlacementConstraint> {
    vec![PlacementConstraint::anti_affinity(TagSet::one("w"), TagSet::one("w"), "node").hard()]
}
