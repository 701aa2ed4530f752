//! Change-triggered publication in virtual time: a change reaches the GMs at once
//! when the LM's last publication is at least the minimum interval old, else at the
//! end of the interval (one publication for every change in between); with the
//! default rule (heartbeats) no change is published.

use crate::sim::workload::{self, ConstraintMode, WorkloadOptions};
use crate::sim::{run, CostModel, LmPublish, SimConfig, SimOutcome};
use crate::trace::{TraceJob, TraceTask};
use common::cluster::ClusterSpec;
use common::{Micros, Resources};

const HOP: Micros = Micros(500);

/// One GM, one LM of `nodes` one-core nodes, 10 s heartbeats, free processing, 0.5 ms
/// hops; `jobs` as (arrival ms, task durations ms), one core per task.
fn simulate(nodes: usize, jobs: &[(u64, Vec<u64>)], lm_publish: LmPublish) -> SimOutcome {
    let cluster = ClusterSpec::generate(1, 1, nodes, Resources::cores(1, 1024), 3);
    let trace: Vec<TraceJob> = jobs
        .iter()
        .enumerate()
        .map(|(i, (arrival_ms, durations))| TraceJob {
            id: i as u64,
            arrival: Micros::from_millis(*arrival_ms),
            queue: None,
            stages: Vec::new(),
            tasks: durations
                .iter()
                .map(|d| TraceTask::with_duration(Micros::from_millis(*d)))
                .collect(),
        })
        .collect();
    let jobs = workload::build(
        &trace,
        &WorkloadOptions {
            default_task: Resources::cores(1, 256),
            constraints: ConstraintMode::None,
            seed: 1,
        },
    );
    let config = SimConfig {
        network_delay: HOP,
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

fn changes(ms: u64) -> LmPublish {
    LmPublish::Changes {
        min_interval: Micros::from_millis(ms),
    }
}

fn hops(n: u64) -> Micros {
    Micros(n * HOP.0)
}

/// One node: A (2 s from 5 s) holds it, B (from 5.1 s) waits for A's end.
const WAIT_FOR_THE_NODE: [(u64, [u64; 1]); 2] = [(5_000, [2_000]), (5_100, [1_000])];

fn wait_for_the_node(lm_publish: LmPublish) -> SimOutcome {
    let jobs: Vec<(u64, Vec<u64>)> = WAIT_FOR_THE_NODE
        .iter()
        .map(|(a, d)| (*a, d.to_vec()))
        .collect();
    simulate(1, &jobs, lm_publish)
}

#[test]
fn by_default_no_change_is_published_and_the_gm_learns_at_the_heartbeat() {
    let o = wait_for_the_node(LmPublish::Heartbeat);
    assert_eq!(o.counters.state_publications, 0);
    // The heartbeat leaves at 10 s: its hop to the GM, then GM -> LM -> worker.
    assert_eq!(o.records[1].start, Some(Micros::from_secs(10) + hops(3)));
}

#[test]
fn a_change_after_the_interval_is_published_at_once() {
    let o = wait_for_the_node(changes(5));
    let a_end = o.records[0].finish.expect("A finished");
    // Report to the LM, its state to the GM, the launch to the LM, the start.
    assert_eq!(o.records[1].start, Some(a_end + hops(4)));
    // A's answer, A's end, B's answer, B's end.
    assert_eq!(o.counters.state_publications, 4);
}

#[test]
fn a_change_within_the_interval_waits_for_its_end_in_virtual_time() {
    // 3 s between publications: A's answer is published when the LM launched it
    // (its last publication, the heartbeat at 0, is 5 s old); A's end, 2 s later,
    // waits until 3 s after that publication.
    let o = wait_for_the_node(changes(3_000));
    let a_launch = o.records[0].launch.expect("A launched");
    let a_end = o.records[0].finish.expect("A finished");
    assert!(a_end + hops(1) < a_launch + Micros::from_secs(3));
    // The publication reaches the GM one hop later: then GM -> LM -> worker.
    assert_eq!(
        o.records[1].start,
        Some(a_launch + Micros::from_secs(3) + hops(3))
    );
    // Deferred by 1.2 s instead of 2: the wait follows the interval.
    let o = wait_for_the_node(changes(2_200));
    assert_eq!(
        o.records[1].start,
        Some(a_launch + Micros::from_millis(2_200) + hops(3))
    );
}

#[test]
fn changes_within_an_interval_share_one_publication() {
    // 20 nodes, one batch of 20 tasks ending 7 ms apart (0, 7, ..., 133 ms after the
    // first end); a later job keeps the run going past the last publication.
    let durations: Vec<u64> = (0..20).map(|k| 1_000 + 7 * k).collect();
    let jobs = vec![(1_000, durations), (5_000, vec![1_000])];
    // With no interval: the batch's answer, 20 ends, the later job's answer and end.
    assert_eq!(
        simulate(20, &jobs, changes(0)).counters.state_publications,
        23
    );
    // 50 ms: the answer; the first end at once (p); the ends at 7..49 ms at p + 50,
    // 56..98 at p + 100, 105..133 at p + 150; the later job's answer and end.
    assert_eq!(
        simulate(20, &jobs, changes(50)).counters.state_publications,
        7
    );
    // 1 s: the answer; the first end at once; all the others at p + 1 s; the later
    // job's answer (4 s after its end) and end.
    assert_eq!(
        simulate(20, &jobs, changes(1_000))
            .counters
            .state_publications,
        5
    );
    assert_eq!(
        simulate(20, &jobs, LmPublish::Heartbeat)
            .counters
            .state_publications,
        0
    );
}
