//! Mercury's quotas and promotion in the simulator (section 4.1): a job never has
//! more QUEUEABLE containers running at once than its quota, under random arrivals,
//! several GMs and LMs and stale views; a task held back by its quota waits and runs
//! exactly once in the end; a promoted container is never killed afterwards; no node
//! is over-committed.

use common::cluster::ClusterSpec;
use common::quota::QueueableQuota;
use common::{Micros, Resources, TaskKind};
use loadgen::sim::ledger::Decision;
use loadgen::sim::task_types::{self, TaskTypes};
use loadgen::sim::workload::{self, ConstraintMode, Job, WorkloadOptions};
use loadgen::sim::{self, MercuryOptions, SimConfig, SimOutcome};
use proptest::prelude::*;
use std::collections::HashMap;
use tests::trace;

/// Per job, the most QUEUEABLE runs alive at once (a run stops counting when it
/// ends or when the worker learns of its promotion).
fn peak_queueable_per_job(outcome: &SimOutcome) -> HashMap<u64, usize> {
    let mut edges: HashMap<u64, Vec<(Micros, i32)>> = HashMap::new();
    for run in outcome
        .runs
        .iter()
        .filter(|r| r.kind == TaskKind::Queueable)
    {
        let end = match (run.end, run.promoted_at) {
            (Some(e), Some(p)) => e.min(p),
            (e, p) => e.or(p).unwrap_or(Micros::MAX),
        };
        let e = edges.entry(run.task.job.0).or_default();
        e.push((run.start, 1));
        e.push((end, -1));
    }
    edges
        .into_iter()
        .map(|(job, mut e)| {
            // Ends before starts at the same instant: a finish frees its slot first.
            e.sort();
            let (mut now, mut peak) = (0i32, 0i32);
            for (_, d) in e {
                now += d;
                peak = peak.max(now);
            }
            (job, peak as usize)
        })
        .collect()
}

fn check(outcome: &SimOutcome, quota: &QueueableQuota) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        outcome.counters.over_commits,
        0,
        "a node was over-committed"
    );
    prop_assert!(outcome.drained, "resources did not all return");
    for r in &outcome.records {
        if r.decision == Decision::Unplaceable {
            prop_assert_eq!(r.starts, 0);
            continue;
        }
        prop_assert!(
            r.finish.is_some(),
            "task {}.{} never finished",
            r.job,
            r.index
        );
        prop_assert!(r.starts >= 1 && r.starts <= r.preemptions + 1);
    }
    if let Some(max) = quota.max {
        for (job, peak) in peak_queueable_per_job(outcome) {
            prop_assert!(
                peak <= max as usize,
                "job {} ran {} QUEUEABLE at once, quota {}",
                job,
                peak,
                max
            );
        }
    }
    // A promoted run is never killed: it ends with its task's finish.
    let finish: HashMap<(u64, u32), Option<Micros>> = outcome
        .records
        .iter()
        .map(|r| ((r.job, r.index), r.finish))
        .collect();
    for run in outcome.runs.iter().filter(|r| r.promoted_at.is_some()) {
        let f = finish
            .get(&(run.task.job.0, run.task.index))
            .copied()
            .flatten();
        prop_assert_eq!(run.end, f, "promoted task {} was killed", run.task);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn quotas_hold_and_every_task_runs_exactly_once(
        gms in 1u16..4,
        lms in 1u16..3,
        per_partition in 1usize..5,
        node_cores in 1u64..4,
        heartbeat_ms in prop::sample::select(vec![1u64, 100, 3_000, 30_000]),
        jobs in prop::collection::vec((0u32..5_000, prop::collection::vec(1u32..4_000, 1..12)), 1..15),
        policy in prop::sample::select(vec!["only-q", "hybrid:inf:0.5", "hybrid:2:0.7"]),
        quota in prop::sample::select(vec!["max:1", "max:2", "max:3", "ratio:1", "max:2,ratio:2"]),
        promote_after_ms in prop::sample::select(vec![None, Some(0u64), Some(500), Some(2_000)]),
        shed in prop::sample::select(vec![None, Some(0.0)]),
        seed in any::<u64>(),
    ) {
        let cluster = ClusterSpec::generate(gms, lms, per_partition, Resources::cores(node_cores, 4096), seed);
        let mut jobs = workload::build(&trace(&jobs), &WorkloadOptions {
            default_task: Resources::cores(1, 512),
            constraints: ConstraintMode::PerJob,
            seed,
        });
        let policy: TaskTypes = policy.parse().map_err(TestCaseError::fail)?;
        task_types::assign(&mut jobs, policy, seed);
        let quota: QueueableQuota = quota.parse().map_err(TestCaseError::fail)?;
        let config = SimConfig {
            heartbeat: Micros::from_millis(heartbeat_ms),
            seed,
            mercury: MercuryOptions {
                quota,
                promote_after: promote_after_ms.map(Micros::from_millis),
                shed_sigma: shed,
                ..MercuryOptions::default()
            },
            ..SimConfig::default()
        };
        let outcome = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
        check(&outcome, &quota)?;
    }
}

fn queueable_jobs(jobs: &[(u32, Vec<u32>)]) -> Vec<Job> {
    let mut jobs = workload::build(
        &trace(jobs),
        &WorkloadOptions {
            default_task: Resources::cores(1, 512),
            constraints: ConstraintMode::None,
            seed: 1,
        },
    );
    task_types::assign(&mut jobs, TaskTypes::OnlyQ, 1);
    jobs
}

#[test]
fn a_quota_binds_exactly_and_held_tasks_wait_instead_of_being_lost() {
    // One job of 20 one-second tasks on 16 idle cores.
    let cluster = ClusterSpec::generate(2, 2, 4, Resources::cores(1, 4096), 1);
    let jobs = queueable_jobs(&[(0, vec![1_000; 20])]);
    let run = |quota: &str| {
        let config = SimConfig {
            heartbeat: Micros::from_millis(500),
            mercury: MercuryOptions {
                quota: quota.parse().expect("quota"),
                ..MercuryOptions::default()
            },
            ..SimConfig::default()
        };
        sim::run(&cluster, &jobs, &config, &mut |_, _| {})
    };
    let free = run("none");
    assert!(peak_queueable_per_job(&free)[&0] > 3);
    let held = run("max:3");
    assert_eq!(
        peak_queueable_per_job(&held)[&0],
        3,
        "the quota is reached, never passed"
    );
    assert!(held.counters.quota_held > 0);
    assert!(held
        .records
        .iter()
        .all(|r| r.finish.is_some() && r.starts == 1));
    assert!(held.drained);
}

#[test]
fn promoted_containers_are_not_killed_for_guaranteed_work() {
    // Two 60 s QUEUEABLE tasks fill both cores; two GUARANTEED tasks arrive at 20 s.
    let cluster = ClusterSpec::generate(1, 1, 2, Resources::cores(1, 4096), 1);
    let mut jobs = queueable_jobs(&[(0, vec![60_000; 2]), (20_000, vec![1_000; 2])]);
    for t in &mut jobs[1].tasks {
        t.kind = TaskKind::Guaranteed;
    }
    let run = |promote_after: Option<Micros>| {
        let config = SimConfig {
            heartbeat: Micros::from_secs(1),
            mercury: MercuryOptions {
                // The least-loaded node only: one QUEUEABLE task per core.
                top_k: 1,
                promote_after,
                ..MercuryOptions::default()
            },
            ..SimConfig::default()
        };
        sim::run(&cluster, &jobs, &config, &mut |_, _| {})
    };
    let plain = run(None);
    assert_eq!(
        plain.counters.queueable_kills, 2,
        "GUARANTEED work reclaims both"
    );
    assert_eq!(plain.counters.promoted, 0);
    let promoted = run(Some(Micros::from_secs(5)));
    assert_eq!(promoted.counters.promoted, 2);
    assert_eq!(promoted.counters.queueable_kills, 0);
    assert!(promoted
        .runs
        .iter()
        .filter(|r| r.task.job.0 == 0)
        .all(|r| r.promoted_at.is_some()));
    // The GUARANTEED tasks wait for the promoted ones to finish, then run.
    let g_start = promoted
        .records
        .iter()
        .filter(|r| r.job == 1)
        .filter_map(|r| r.start)
        .min();
    assert!(g_start >= Some(Micros::from_secs(60)));
    assert!(promoted.records.iter().all(|r| r.finish.is_some()));
    assert_eq!(promoted.counters.over_commits, 0);
    assert!(promoted.drained);
}

#[test]
fn the_gm_holds_tasks_over_quota_with_a_reason_and_releases_them_as_tasks_end() {
    use common::messages::WorkerReport;
    use common::reasons::PendingReason;
    use common::{GmId, TaskId, TaskSpec};
    use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
    use local_master::{LmConfig, LocalMaster, QueueableConfig};

    let quota: QueueableQuota = "max:2".parse().expect("quota");
    let cluster = tests::ClusterBuilder::new(1, 1, 4)
        .capacity(1, 1024)
        .build();
    let mut lm = LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(0))
        .with_queueable(QueueableConfig {
            quota,
            ..QueueableConfig::default()
        });
    let mut gm = GlobalMaster::new(GmConfig {
        queueable_quota: quota,
        ..GmConfig::new(GmId(0), 1, 1)
    });
    gm.apply_snapshot(Micros(0), &lm.snapshot(Micros(0)));
    for i in 0..5 {
        let t = TaskSpec::short(TaskId::new(7, i), Resources::cores(1, 1), Micros(100))
            .with_kind(TaskKind::Queueable);
        gm.submit(Micros(0), t);
    }
    let out = gm.schedule(Micros(0));
    let held = |out: &global_master::core::PassOutput| {
        out.decisions
            .iter()
            .filter(|d| {
                d.outcome
                    == DecisionOutcome::Requeued(PendingReason::OverQueueableQuota { limit: 2 })
            })
            .count()
    };
    assert_eq!(held(&out), 3);
    assert_eq!(
        gm.pending().count(),
        3,
        "held tasks stay pending, with their reason"
    );
    assert!(gm
        .pending()
        .all(|p| p.reason == Some(PendingReason::OverQueueableQuota { limit: 2 })));
    let task = TaskId::new(7, 0);
    let node = out
        .batches
        .iter()
        .flat_map(|b| &b.requests)
        .find(|r| r.task.id == task)
        .map(|r| r.node)
        .expect("task 7.0 dispatched");
    for batch in out.batches {
        let fx = lm.handle_launch_batch(Micros(1), batch).expect("batch");
        gm.handle_response(Micros(1), &fx.response.expect("response"));
    }
    // Still two outstanding at the LM: nothing is released.
    assert!(gm.schedule(Micros(2)).decisions.is_empty());
    // One task starts and finishes; the next snapshot frees one slot.
    for report in [
        WorkerReport::Started {
            attempt: 1,
            node,
            task,
            at: Micros(3),
        },
        WorkerReport::Finished {
            used: None,
            attempt: 1,
            node,
            task,
            at: Micros(103),
        },
    ] {
        lm.handle_worker_report(Micros(103), report)
            .expect("report");
    }
    gm.apply_snapshot(Micros(104), &lm.snapshot(Micros(104)));
    let out = gm.schedule(Micros(104));
    let sent: usize = out.batches.iter().map(|b| b.requests.len()).sum();
    assert_eq!(sent, 1, "exactly the freed slot is used");
    assert_eq!(gm.pending().count(), 2);
}
