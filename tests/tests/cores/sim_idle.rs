//! Idle gaps are skipped, not simulated, and schedules do not change: a workload of
//! bursts separated by long quiet gaps (the first burst long after time 0) gives
//! byte-identical `tasks.csv` with and without `skip_idle`, for every Megha-core
//! scheduler, with queues and preemption, while the skipping run handles far fewer
//! events.

use common::fairness::{FairnessConfig, SharePolicy};
use common::{Micros, Resources, TaskId, TaskSpec};
use loadgen::report::write_tasks_csv;
use loadgen::sim::workload::Job;
use loadgen::sim::{run, SchedulerKind, SimConfig, SimOutcome};
use std::sync::Arc;
use tests::ClusterBuilder;

/// Bursts of jobs: a burst every 100,000 s from 1,000,000 s, each burst six jobs
/// 0.3 s apart, heavy enough to queue and preempt on the small cluster.
fn bursts() -> Vec<Job> {
    let mut jobs = Vec::new();
    for burst in 0..5u64 {
        for k in 0..6u64 {
            let id = burst * 6 + k;
            let arrival = Micros::from_secs(1_000_000 + burst * 100_000) + Micros(k * 300_000);
            jobs.push(Job {
                id,
                dag: None,
                arrival,
                tasks: (0..4)
                    .map(|j| {
                        TaskSpec::short(
                            TaskId::new(id, j),
                            Resources::cores(1 + u64::from(j % 2), 256),
                            Micros::from_secs(5 + (id + u64::from(j)) % 7),
                        )
                    })
                    .collect(),
            });
        }
    }
    jobs
}

fn csv(outcome: &SimOutcome) -> Vec<u8> {
    let mut out = Vec::new();
    write_tasks_csv(&mut out, &outcome.records, &outcome.branches).expect("write tasks.csv");
    out
}

#[test]
fn skipping_idle_gaps_changes_no_schedule() {
    let cluster = ClusterBuilder::new(2, 2, 2).capacity(2, 1024).build();
    let jobs = bursts();
    let queues = FairnessConfig::parse("a:0.5:0,b:0.5:1", SharePolicy::Drf, 2).expect("queues");
    for scheduler in [SchedulerKind::Megha, SchedulerKind::Centralized] {
        for fairness in [None, Some(Arc::new(queues.clone()))] {
            let label = format!("{scheduler:?}, queues {}", fairness.is_some());
            let config = |skip_idle| SimConfig {
                scheduler,
                fairness: fairness.clone(),
                skip_idle,
                ..SimConfig::default()
            };
            let every = run(&cluster, &jobs, &config(false), &mut |_, _| {});
            let skipped = run(&cluster, &jobs, &config(true), &mut |_, _| {});
            assert!(
                every.drained && skipped.drained,
                "{label}: resources leaked"
            );
            assert!(
                every.records.iter().all(|r| r.finish.is_some()),
                "{label}: a task never finished"
            );
            assert_eq!(every.counters.idle_ticks_skipped, 0, "{label}");
            assert!(
                skipped.counters.idle_ticks_skipped > 1000,
                "{label}: only {} ticks skipped",
                skipped.counters.idle_ticks_skipped
            );
            assert!(
                skipped.counters.events * 10 < every.counters.events,
                "{label}: {} events skipping vs {} not",
                skipped.counters.events,
                every.counters.events
            );
            assert_eq!(
                String::from_utf8_lossy(&csv(&skipped)),
                String::from_utf8_lossy(&csv(&every)),
                "{label}: schedules differ"
            );
        }
    }
}
