//! The indexed wake of blocked tasks (`WakePolicy::Indexed`) against the full retry
//! the oracle was written with (`WakePolicy::All`).
//!
//! Where the two must agree, they do: with one GM and one LM (the round-robin over
//! LMs has one candidate, so a skipped retry cannot move its start) and no charge
//! for GM decisions (a skipped retry costs nothing in either), an overloaded run
//! with per-task shapes gives the same `tasks.csv` except the `attempts` column
//! (the retries the index skips), with far fewer retries.

use common::{ConstraintSet, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{DecisionOutcome, GlobalMaster, GmConfig, WakePolicy};
use loadgen::report::write_tasks_csv;
use loadgen::sim::workload::Job;
use loadgen::sim::{run, CostModel, SchedulerKind, SimConfig, SimOutcome};
use std::sync::Arc;
use tests::{task, ClusterBuilder, Harness};

/// 60 jobs of 5 tasks, one every 0.2 s, on 8 two-core nodes: a backlog of tasks of
/// several shapes (1 or 2 cores; constraint 0, 1, both or none) builds up.
fn overload() -> Vec<Job> {
    (0..60u64)
        .map(|id| Job {
            id,
            dag: None,
            arrival: Micros::from_secs(1) + Micros(id * 200_000),
            tasks: (0..5u32)
                .map(|j| {
                    let k = id + u64::from(j);
                    let constraints = match k % 4 {
                        0 => vec![],
                        1 => vec![0],
                        2 => vec![1],
                        _ => vec![0, 1],
                    };
                    TaskSpec::short(
                        TaskId::new(id, j),
                        Resources::cores(1 + k % 2, 256),
                        Micros::from_secs(2 + k % 5),
                    )
                    .with_constraints(
                        ConstraintSet::from_ids(constraints).expect("constraint ids < 64"),
                    )
                })
                .collect(),
        })
        .collect()
}

/// tasks.csv without its `attempts` column (the 9th).
fn csv_without_attempts(outcome: &SimOutcome) -> String {
    let mut out = Vec::new();
    write_tasks_csv(&mut out, &outcome.records, &outcome.branches).expect("write tasks.csv");
    String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let mut cells: Vec<&str> = line.split(',').collect();
            cells.remove(8);
            cells.join(",") + "\n"
        })
        .collect()
}

#[test]
fn the_indexed_wake_gives_the_full_retrys_schedules_with_fewer_retries() {
    // Nodes 0-1 have constraint 0, 2-3 constraint 1, 4-5 both, 6-7 none.
    let mut builder = ClusterBuilder::new(1, 1, 8).capacity(2, 1024);
    for (slot, ids) in [[0].as_slice(), &[0], &[1], &[1], &[0, 1], &[0, 1]]
        .iter()
        .enumerate()
    {
        builder = builder.node_constraints(0, 0, slot, ids);
    }
    let cluster = builder.build();
    let jobs = overload();
    let config = |wake| SimConfig {
        scheduler: SchedulerKind::Megha,
        wake,
        costs: CostModel {
            gm_decision_ns: 0,
            gm_word_ns: 0,
            ..CostModel::default()
        },
        ..SimConfig::default()
    };
    let all = run(&cluster, &jobs, &config(WakePolicy::All), &mut |_, _| {});
    let indexed = run(
        &cluster,
        &jobs,
        &config(WakePolicy::Indexed),
        &mut |_, _| {},
    );
    for (name, o) in [("all", &all), ("indexed", &indexed)] {
        assert!(o.drained, "{name}: resources leaked");
        assert!(
            o.records.iter().all(|r| r.finish.is_some()),
            "{name}: a task never finished"
        );
    }
    eprintln!(
        "retries: all {}, indexed {}; woken: all {}, indexed {}",
        all.counters.retries, indexed.counters.retries, all.counters.woken, indexed.counters.woken
    );
    assert!(
        all.counters.retries > 1000,
        "the scenario must be overloaded: {} retries",
        all.counters.retries
    );
    assert!(
        indexed.counters.retries * 4 < all.counters.retries,
        "indexed {} retries vs all {}",
        indexed.counters.retries,
        all.counters.retries
    );
    let (a, i) = (csv_without_attempts(&all), csv_without_attempts(&indexed));
    if a != i {
        let line = a.lines().zip(i.lines()).position(|(x, y)| x != y);
        let at = line.unwrap_or(0);
        panic!(
            "schedules differ at line {}:\n    all: {}\nindexed: {}",
            at + 1,
            a.lines().nth(at).unwrap_or("<end>"),
            i.lines().nth(at).unwrap_or("<end>")
        );
    }
}

/// Decisions of a pass as (job, dispatched?).
fn pass(gm: &mut GlobalMaster, now: Micros) -> Vec<(u64, bool)> {
    gm.schedule(now)
        .decisions
        .iter()
        .map(|d| {
            let sent = matches!(d.outcome, DecisionOutcome::Dispatched { .. });
            (d.task.job.0, sent)
        })
        .collect()
}

#[test]
fn a_gain_retries_only_the_blocked_tasks_the_grown_node_could_host() {
    // One GM, one LM, two one-core nodes: node 0 has constraint 0, node 1 none.
    let cluster = ClusterBuilder::new(1, 1, 2)
        .capacity(1, 1024)
        .node_constraints(0, 0, 0, &[0])
        .build();
    // (wake policy, decisions of the pass after node 1 frees)
    let table: [(WakePolicy, Vec<(u64, bool)>); 2] = [
        // Only the unconstrained class wakes; it sleeps at its first miss (job 4).
        (WakePolicy::Indexed, vec![(2, true), (4, false)]),
        // Every blocked task, in line order.
        (
            WakePolicy::All,
            vec![(1, false), (2, true), (3, false), (4, false)],
        ),
    ];
    for (wake, want) in table {
        let mut h = Harness::new(&cluster);
        h.gms[0] = GlobalMaster::new(GmConfig {
            wake,
            ..GmConfig::new(common::GmId(0), 1, 1)
        });
        h.heartbeat(Micros(0));
        // Both nodes taken, then two tasks of each shape blocked, alternating.
        h.gms[0].submit(Micros(0), task(10, 1, &[0]));
        h.gms[0].submit(Micros(0), task(11, 1, &[]));
        let first = h.gms[0].schedule(Micros(0));
        assert_eq!(first.decisions.len(), 2);
        for batch in first.batches {
            h.deliver(Micros(0), batch);
        }
        for (job, constraints) in [(1, &[0u64][..]), (2, &[]), (3, &[0]), (4, &[])] {
            h.gms[0].submit(Micros(1), task(job, 1, constraints));
        }
        let blocked = pass(&mut h.gms[0], Micros(1));
        assert!(
            blocked.iter().all(|(_, sent)| !sent),
            "{wake:?}: {blocked:?}"
        );
        // Node 1 frees (its task ended): a newer snapshot with its room back.
        let mut snapshot = h.lms[0].snapshot(Micros(2));
        snapshot.version = 10;
        let mut free = vec![Resources::ZERO; 2];
        free[1] = Resources::cores(1, 1024);
        snapshot.free = Arc::new(free);
        // Its one block of nodes changed at version 10 (the GM skips unchanged ones).
        snapshot.free_changed = Arc::new(vec![10]);
        h.gms[0].apply_snapshot(Micros(2), &snapshot);
        assert_eq!(pass(&mut h.gms[0], Micros(2)), want, "{wake:?}");
        assert_eq!(h.gms[0].queues().len(), 3, "{wake:?}");
        let retries = h.gms[0].stats().retries;
        assert_eq!(retries, want.len() as u64, "{wake:?}: retries");
        // Nothing gained since: a pass tries nothing.
        assert_eq!(pass(&mut h.gms[0], Micros(3)), vec![], "{wake:?}");
    }
}
