//! Mercury's GUARANTEED and QUEUEABLE work inside the federation: GUARANTEED work is
//! never queued and never over-commits a node, it reclaims the room of QUEUEABLE work
//! by killing the fewest tasks, killed and shed work is requeued and runs to the end
//! exactly once, QUEUEABLE placement spreads over the least-loaded nodes.

use common::cluster::ClusterSpec;
use common::messages::LaunchOutcome;
use common::{GmId, Micros, NodeId, Resources, TaskId, TaskKind, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig};
use loadgen::sim::ledger::Decision;
use loadgen::sim::task_types::{self, TaskTypes};
use loadgen::sim::workload::{self, ConstraintMode, WorkloadOptions};
use loadgen::sim::{self, MercuryOptions, SimConfig};
use local_master::{LmConfig, LocalMaster, QueueableConfig};
use proptest::prelude::*;
use std::collections::HashMap;
use tests::{trace, ClusterBuilder};
use worker::Worker;

fn task(job: u64, cores: u64, secs: u64, kind: TaskKind) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(job, 0),
        Resources::cores(cores, 1),
        Micros::from_secs(secs),
    )
    .with_kind(kind)
}

/// One GM, one LM with QUEUEABLE support, `nodes` nodes of `cores` cores.
fn pair(
    nodes: usize,
    cores: u64,
    config: QueueableConfig,
    top_k: usize,
) -> (GlobalMaster, LocalMaster) {
    let cluster = ClusterBuilder::new(1, 1, nodes)
        .capacity(cores, 1024)
        .build();
    let lm =
        LocalMaster::new(&cluster.lms[0], 1, LmConfig::default(), Micros(0)).with_queueable(config);
    let gm = GlobalMaster::new(GmConfig {
        queueable_top_k: top_k,
        ..GmConfig::new(GmId(0), 1, 1)
    });
    (gm, lm)
}

#[test]
fn queueable_work_is_placed_on_the_least_loaded_nodes_even_without_free_resources() {
    let (mut gm, mut lm) = pair(4, 1, QueueableConfig::default(), 2);
    // Fill every node with GUARANTEED work: the view shows nothing free.
    let snapshot = lm.snapshot(Micros(0));
    gm.apply_snapshot(Micros(0), &snapshot);
    for j in 0..4 {
        gm.submit(Micros(0), task(j, 1, 100, TaskKind::Guaranteed));
    }
    for batch in gm.schedule(Micros(0)).batches {
        let fx = lm.handle_launch_batch(Micros(1), batch).unwrap();
        gm.handle_response(Micros(1), &fx.response.unwrap());
    }
    for j in 10..18 {
        gm.submit(Micros(2), task(j, 1, 10, TaskKind::Queueable));
    }
    let out = gm.schedule(Micros(2));
    let mut per_node: HashMap<NodeId, usize> = HashMap::new();
    for d in &out.decisions {
        match d.outcome {
            DecisionOutcome::Dispatched { node, .. } => *per_node.entry(node).or_default() += 1,
            ref other => panic!("QUEUEABLE task not dispatched: {other:?}"),
        }
    }
    assert_eq!(per_node.len(), 4, "{per_node:?}");
    // Round-robin over the top 2 by estimate: spread, never piled on one node.
    assert!(per_node.values().all(|&n| n <= 3), "{per_node:?}");
    for batch in out.batches {
        let fx = lm.handle_launch_batch(Micros(3), batch).unwrap();
        assert!(fx
            .response
            .unwrap()
            .outcomes
            .iter()
            .all(|(_, o)| matches!(o, LaunchOutcome::Launched { .. })));
        assert!(fx.kills.is_empty(), "QUEUEABLE work never kills");
    }
    assert_eq!(lm.queued_len(), 8);
}

#[test]
fn a_guaranteed_arrival_kills_the_minimum_queueable_work_which_runs_again_once() {
    let (mut gm, mut lm) = pair(1, 4, QueueableConfig::default(), 1);
    let mut worker = Worker::new(NodeId(0), Resources::cores(4, 1024));
    let snapshot = lm.snapshot(Micros(0));
    gm.apply_snapshot(Micros(0), &snapshot);
    for j in 1..=4 {
        gm.submit(Micros(0), task(j, 1, 100, TaskKind::Queueable));
    }
    let mut now = 0;
    let deliver =
        |gm: &mut GlobalMaster, lm: &mut LocalMaster, worker: &mut Worker, now: &mut u64| {
            let mut requeued = Vec::new();
            for batch in gm.schedule(Micros(*now)).batches {
                *now += 1;
                let fx = lm.handle_launch_batch(Micros(*now), batch).unwrap();
                gm.handle_response(Micros(*now), &fx.response.clone().unwrap());
                let mut reports = Vec::new();
                for kill in &fx.kills {
                    reports.push(worker.kill(Micros(*now), kill.task, kill.attempt).unwrap());
                }
                for start in fx.starts {
                    reports.extend(worker.start_task(Micros(*now), start).unwrap());
                }
                for report in reports {
                    let fx = lm.handle_worker_report(Micros(*now), report).unwrap();
                    for r in fx.requeues {
                        requeued.extend(r.tasks.iter().map(|(t, _)| t.id));
                        gm.requeue_preempted(Micros(*now), &r);
                    }
                }
            }
            requeued
        };
    assert!(deliver(&mut gm, &mut lm, &mut worker, &mut now).is_empty());
    assert_eq!(worker.running().len(), 4);
    // A 2-core GUARANTEED task: exactly two QUEUEABLE tasks die, the latest started.
    gm.submit(Micros(10), task(9, 2, 5, TaskKind::Guaranteed));
    let requeued = deliver(&mut gm, &mut lm, &mut worker, &mut now);
    assert_eq!(requeued.len(), 2, "{requeued:?}");
    assert!(worker.running().iter().any(|r| r.task == TaskId::new(9, 0)));
    // Two QUEUEABLE tasks and the GUARANTEED one hold 3 MiB; no CPU is left.
    assert_eq!(worker.free(), Resources::new(0, 1024 - 3));
    // The killed tasks go back out and wait in the worker queue: nothing lost.
    let again = deliver(&mut gm, &mut lm, &mut worker, &mut now);
    assert!(again.is_empty());
    assert_eq!(worker.queued(), 2);
    assert_eq!(lm.queued_len(), 2);
}

#[test]
fn shed_work_goes_back_to_its_gm_and_runs_elsewhere() {
    let config = QueueableConfig {
        shed_sigma: Some(0.5),
        ..QueueableConfig::default()
    };
    let (mut gm, mut lm) = pair(4, 1, config, 1);
    let mut workers: Vec<Worker> = (0..4)
        .map(|n| Worker::new(NodeId(n), Resources::cores(1, 1024)))
        .collect();
    // A GM with a stale, wrong estimate put six tasks on node 0.
    let batch = common::messages::LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: common::LmId(0),
        seq: 1,
        resend: false,
        requests: (1..=6)
            .map(|j| common::messages::LaunchRequest {
                task: task(j, 1, 10, TaskKind::Queueable),
                node: NodeId(0),
                placement: common::messages::Placement::Internal,
            })
            .collect(),
    };
    let fx = lm.handle_launch_batch(Micros(0), batch).unwrap();
    for start in fx.starts {
        for report in workers[0].start_task(Micros(0), start).unwrap() {
            lm.handle_worker_report(Micros(0), report).unwrap();
        }
    }
    let fx = lm.tick(Micros(1));
    assert!(!fx.kills.is_empty());
    let shed = fx.kills.len();
    for kill in fx.kills {
        let report = workers[0].kill(Micros(2), kill.task, kill.attempt).unwrap();
        let fx = lm.handle_worker_report(Micros(2), report).unwrap();
        for r in fx.requeues {
            gm.requeue_preempted(Micros(2), &r);
        }
    }
    let snapshot = lm.snapshot(Micros(3));
    gm.apply_snapshot(Micros(3), &snapshot);
    let out = gm.schedule(Micros(3));
    assert_eq!(out.decisions.len(), shed, "every shed task is placed again");
    for d in &out.decisions {
        assert!(
            matches!(d.outcome, DecisionOutcome::Dispatched { node, .. } if node != NodeId(0)),
            "{d:?}"
        );
    }
    assert_eq!(workers[0].queued() + 1 + shed, 6, "nothing lost");
}

fn check(
    cluster: &ClusterSpec,
    jobs: &[workload::Job],
    config: &SimConfig,
) -> Result<(), TestCaseError> {
    let outcome = sim::run(cluster, jobs, config, &mut |_, _| {});
    prop_assert_eq!(
        outcome.counters.over_commits,
        0,
        "a node was over-committed"
    );
    prop_assert!(outcome.drained, "resources did not all return");
    let kinds: HashMap<(u64, u32), TaskKind> = jobs
        .iter()
        .flat_map(|j| j.tasks.iter().map(move |t| ((j.id, t.id.index), t.kind)))
        .collect();
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
        let alloc = r.allocation().unwrap_or(Micros::MAX);
        let sum = r.framework_queuing + r.processing + r.worker_queuing + r.communication;
        prop_assert_eq!(sum, alloc);
        if kinds.get(&(r.job, r.index)) == Some(&TaskKind::Guaranteed) {
            prop_assert_eq!(r.worker_queuing, Micros::ZERO, "GUARANTEED work queued");
            prop_assert_eq!(r.preemptions, 0, "GUARANTEED work killed");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn mixes_of_guaranteed_and_queueable_work_run_exactly_once_without_over_commit(
        gms in 1u16..4,
        lms in 1u16..3,
        per_partition in 1usize..5,
        node_cores in 1u64..3,
        heartbeat_ms in prop::sample::select(vec![1u64, 100, 3_000, 30_000]),
        jobs in prop::collection::vec((0u32..5_000, prop::collection::vec(1u32..4_000, 1..10)), 1..20),
        policy in prop::sample::select(vec!["only-g", "only-q", "hybrid:inf:0.5", "hybrid:2:0.7", "short"]),
        cap in prop::sample::select(vec![1.0f64, 0.5]),
        shed in prop::sample::select(vec![None, Some(0.0), Some(1.0)]),
        top_k in 1usize..5,
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
        let config = SimConfig {
            heartbeat: Micros::from_millis(heartbeat_ms),
            seed,
            designated_gm: GmId(gms - 1),
            mercury: MercuryOptions {
                top_k,
                cap,
                shed_sigma: shed,
                ..MercuryOptions::default()
            },
            ..SimConfig::default()
        };
        check(&cluster, &jobs, &config)?;
    }
}

#[test]
fn queueable_work_beats_guaranteed_work_on_short_tasks_with_stale_views() {
    // 2 s tasks, offered at 125 % of a 16-node cluster, 10 s heartbeats.
    let jobs: Vec<(u32, Vec<u32>)> = (0..60).map(|j| (j * 200, vec![2_000; 5])).collect();
    let cluster = ClusterSpec::generate(2, 2, 4, Resources::cores(1, 4096), 1);
    let base = workload::build(
        &trace(&jobs),
        &WorkloadOptions {
            default_task: Resources::cores(1, 512),
            constraints: ConstraintMode::None,
            seed: 1,
        },
    );
    let throughput = |policy: &str| {
        let mut jobs = base.clone();
        task_types::assign(&mut jobs, policy.parse().expect("policy"), 1);
        let out = sim::run(&cluster, &jobs, &SimConfig::default(), &mut |_, _| {});
        assert_eq!(out.counters.over_commits, 0);
        loadgen::report::throughput(&out.records)
    };
    let (g, q) = (throughput("only-g"), throughput("only-q"));
    assert!(q > 1.5 * g, "only-Q {q:.2} tasks/s vs only-G {g:.2}");
}
