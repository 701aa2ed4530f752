//! Change-triggered LM state publication in the simulator (`LmPublish::Changes`, the
//! services' rule): a GM learns of a freed node one hop after the LM does, not at the
//! next heartbeat; publications after changes are at most one per minimum interval.
//! The default (`LmPublish::Heartbeat`) publishes nothing but heartbeats.

use common::{Micros, Resources};
use loadgen::sim::workload::{self, ConstraintMode, WorkloadOptions};
use loadgen::sim::{run, CostModel, LmPublish, SimConfig, SimOutcome};
use tests::{trace, ClusterBuilder};

const DELAY: Micros = Micros(500);

fn simulate(nodes: usize, jobs: &[(u32, Vec<u32>)], lm_publish: LmPublish) -> SimOutcome {
    let cluster = ClusterBuilder::new(1, 1, nodes).build();
    let jobs = workload::build(
        &trace(jobs),
        &WorkloadOptions {
            default_task: Resources::cores(1, 256),
            constraints: ConstraintMode::None,
            seed: 1,
        },
    );
    let config = SimConfig {
        network_delay: DELAY,
        costs: CostModel::zero(),
        heartbeat: Micros::from_secs(10),
        lm_publish,
        ..SimConfig::default()
    };
    let outcome = run(&cluster, &jobs, &config, &mut |_, _| {});
    assert!(outcome.drained, "resources leaked");
    assert!(outcome.records.iter().all(|r| r.finish.is_some()));
    outcome
}

const CHANGES: LmPublish = LmPublish::Changes {
    min_interval: LmPublish::SERVICES_MIN_INTERVAL,
};

#[test]
fn a_freed_node_reaches_the_gm_at_once_with_changes_and_at_the_heartbeat_without() {
    // One node: the second task waits for the first (2 s from t = 1 s) to end.
    let jobs = [(1_000, vec![2_000]), (1_500, vec![1_000])];
    let heartbeat = simulate(1, &jobs, LmPublish::Heartbeat);
    let changes = simulate(1, &jobs, CHANGES);
    let first_end = changes.records[0].finish.expect("first task finished");
    assert_eq!(heartbeat.records[0].finish, Some(first_end));
    // Report to the LM, its state to the GM, the launch to the LM, the start to the
    // worker: four hops after the end.
    assert_eq!(
        changes.records[1].start,
        Some(first_end + Micros(4 * DELAY.0))
    );
    // Without: the GM learns of the node at the heartbeat at 10 s (three hops to the
    // start).
    assert_eq!(
        heartbeat.records[1].start,
        Some(Micros::from_secs(10) + Micros(3 * DELAY.0))
    );
    assert_eq!(heartbeat.counters.state_publications, 0);
    assert!(changes.counters.state_publications > 0);
}

#[test]
fn changes_within_the_minimum_interval_are_published_once_at_its_end() {
    // Three tasks launched in one batch, ending 1 ms apart; a later job keeps the
    // run going past the deferred publication.
    let jobs = [(1_000, vec![1_000, 1_001, 1_002]), (5_000, vec![1_000])];
    let limited = simulate(3, &jobs, CHANGES);
    let unlimited = simulate(
        3,
        &jobs,
        LmPublish::Changes {
            min_interval: Micros::ZERO,
        },
    );
    // The first batch's answer, each of its ends, the second batch's answer and its
    // end: 1 + 3 + 2 without a limit; with 5 ms, the first end is published at once
    // and the next two together 5 ms later (1 + 2 + 2).
    assert_eq!(unlimited.counters.state_publications, 6);
    assert_eq!(limited.counters.state_publications, 5);
}
