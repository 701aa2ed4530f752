//! Safety and liveness properties of the simulated system over random clusters,
//! traces and heartbeat periods. Long heartbeat periods make GM views stale on
//! purpose; several GMs per LM make them race for the same nodes.

use common::cluster::ClusterSpec;
use common::{Micros, Resources};
use loadgen::sim::ledger::Decision;
use loadgen::sim::workload::{self, ConstraintMode, WorkloadOptions};
use loadgen::sim::{self, LmPublish, SchedulerKind, SimConfig};
use proptest::prelude::*;
use tests::trace;

fn check(
    cluster: &ClusterSpec,
    jobs: &[workload::Job],
    config: &SimConfig,
) -> Result<(), TestCaseError> {
    let outcome = sim::run(cluster, jobs, config, &mut |_, _| {});
    let delay = config.network_delay;
    prop_assert_eq!(
        outcome.counters.over_commits,
        0,
        "a node was over-committed"
    );
    prop_assert!(
        outcome.drained,
        "{:?}: resources did not all return after the tasks ended",
        config.scheduler
    );
    for r in &outcome.records {
        if r.decision == Decision::Unplaceable {
            prop_assert_eq!(r.starts, 0);
            continue;
        }
        prop_assert_eq!(
            r.starts,
            1,
            "task {}.{} started {} times",
            r.job,
            r.index,
            r.starts
        );
        prop_assert!(r.finish.is_some());
        let alloc = r.allocation().unwrap_or(Micros::MAX);
        // GM -> LM -> worker (Megha) or probe + get-task round trip (Sparrow).
        let hops = if config.scheduler == SchedulerKind::Sparrow {
            3
        } else {
            2
        };
        prop_assert!(
            alloc.0 >= hops * delay.0,
            "allocation {alloc} below the modelled delay"
        );
        let sum = r.framework_queuing + r.processing + r.worker_queuing + r.communication;
        prop_assert_eq!(sum, alloc, "components must add up to the allocation time");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn every_eligible_task_runs_exactly_once_and_nothing_leaks(
        gms in 1u16..4,
        lms in 1u16..4,
        per_partition in 1usize..6,
        node_cores in 1u64..4,
        heartbeat_ms in prop::sample::select(vec![1u64, 50, 1_000, 10_000, 60_000]),
        jobs in prop::collection::vec((0u32..5_000, prop::collection::vec(1u32..3_000, 1..12)), 1..25),
        constraints in prop::sample::select(vec![ConstraintMode::None, ConstraintMode::PerJob, ConstraintMode::PerTask]),
        seed in any::<u64>(),
        scheduler in prop::sample::select(vec![SchedulerKind::Megha, SchedulerKind::Sparrow, SchedulerKind::Centralized]),
        publish_ms in prop::option::of(prop::sample::select(vec![0u64, 5, 100])),
    ) {
        let cluster = ClusterSpec::generate(gms, lms, per_partition, Resources::cores(node_cores, 4096), seed);
        let jobs = workload::build(&trace(&jobs), &WorkloadOptions {
            default_task: Resources::cores(1, 512),
            constraints,
            seed,
        });
        let config = SimConfig {
            scheduler,
            heartbeat: Micros::from_millis(heartbeat_ms),
            lm_publish: match publish_ms {
                None => LmPublish::Heartbeat,
                Some(ms) => LmPublish::Changes { min_interval: Micros::from_millis(ms) },
            },
            seed,
            ..SimConfig::default()
        };
        check(&cluster, &jobs, &config)?;
    }
}

#[test]
fn one_task_on_an_empty_cluster_costs_exactly_the_modelled_delays() {
    let cluster = ClusterSpec::generate(2, 2, 4, Resources::cores(1, 1024), 1);
    let jobs = workload::build(
        &trace(&[(1000, vec![500])]),
        &WorkloadOptions {
            default_task: Resources::cores(1, 1),
            constraints: ConstraintMode::None,
            seed: 1,
        },
    );
    let zero_cost = sim::CostModel::zero();
    let d = Micros(500);
    for (scheduler, hops) in [
        (SchedulerKind::Megha, 2),
        (SchedulerKind::Centralized, 2),
        (SchedulerKind::Sparrow, 3),
    ] {
        let config = SimConfig {
            scheduler,
            network_delay: d,
            costs: zero_cost.clone(),
            ..SimConfig::default()
        };
        let out = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
        let r = &out.records[0];
        assert_eq!(r.allocation(), Some(Micros(hops * d.0)), "{scheduler:?}");
        assert_eq!(r.communication, Micros(hops * d.0), "{scheduler:?}");
        assert_eq!(
            r.framework_queuing + r.processing + r.worker_queuing,
            Micros(0)
        );
    }
    // With the default costs Megha adds exactly one GM decision and one LM batch.
    let config = SimConfig::default();
    let out = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
    let r = &out.records[0];
    assert_eq!(r.communication, Micros(2 * d.0));
    assert!(r.processing > Micros(0));
    assert_eq!(
        r.allocation(),
        Some(r.communication + r.processing + r.framework_queuing)
    );
}
