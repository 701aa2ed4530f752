//! Start barriers over the whole Megha driver (`barrier.rs`): a barrier job placed
//! one by one holds its early members' nodes until its last member starts, every
//! member ends at that start plus its duration, no other task gets those nodes
//! meanwhile; and a run whose barrier jobs can never start whole ends instead of
//! waiting forever.

use crate::sim::workload::Job;
use crate::sim::{run, SimConfig, SimOutcome};
use common::cluster::ClusterSpec;
use common::{Micros, Resources, TaskId, TaskSpec};
use std::sync::Arc;

fn job(id: u64, arrival_s: u64, durations_s: &[u64]) -> Job {
    Job {
        id,
        dag: None,
        arrival: Micros::from_secs(arrival_s),
        tasks: (durations_s.iter().enumerate())
            .map(|(i, d)| {
                TaskSpec::short(
                    TaskId::new(id, i as u32),
                    Resources::cores(1, 256),
                    Micros::from_secs(*d),
                )
            })
            .collect(),
    }
}

/// One GM, one LM, `nodes` one-core nodes; `barrier`: the jobs that wait.
fn simulate(nodes: usize, jobs: &[Job], barrier: &[u64]) -> SimOutcome {
    let cluster = ClusterSpec::generate(1, 1, nodes, Resources::cores(1, 1024), 7);
    let config = SimConfig {
        start_barrier: (!barrier.is_empty()).then(|| Arc::new(barrier.iter().copied().collect())),
        ..SimConfig::default()
    };
    run(&cluster, jobs, &config, &mut |_, _| {})
}

/// Two of four nodes busy (10 and 20 s) when a job of three 5 s members arrives,
/// then a job of four 1 s tasks that wants every node.
fn workload() -> Vec<Job> {
    vec![
        job(0, 1, &[10, 20]),
        job(1, 2, &[5, 5, 5]),
        job(2, 3, &[1, 1, 1, 1]),
    ]
}

#[test]
fn an_early_member_holds_its_node_until_the_last_member_starts() {
    let jobs = workload();
    let out = simulate(4, &jobs, &[1]);
    assert!(out.drained);
    assert_eq!(out.counters.barrier_stuck, 0);
    assert!(out.records.iter().all(|r| r.finish.is_some()));
    let members: Vec<_> = out.records.iter().filter(|r| r.job == 1).collect();
    let last = members.iter().filter_map(|r| r.start).max().unwrap();
    let first = members.iter().filter_map(|r| r.start).min().unwrap();
    // Two members start on the free nodes, the third only once a busy node frees
    // (after the 5 s a member runs for).
    assert!(last - first > Micros::from_secs(5), "{first} .. {last}");
    for m in &members {
        assert_eq!(m.finish, Some(last + Micros::from_secs(5)), "{m:?}");
    }
    // Nobody else runs on an early member's node before it ends; the job that
    // wants every node does run on those nodes, after.
    let early: Vec<_> = members.iter().filter(|m| m.start < Some(last)).collect();
    assert_eq!(early.len(), 2);
    let mut after = 0;
    for other in out.records.iter().filter(|r| r.job != 1) {
        for m in &early {
            if (other.lm, other.node) == (m.lm, m.node) && other.start > m.start {
                assert!(other.start >= m.finish, "{other:?} ran on {m:?}'s node");
                after += 1;
            }
        }
    }
    assert!(after >= 2, "{after} tasks ran on the early members' nodes");
}

#[test]
fn without_the_barrier_the_same_members_end_their_duration_after_their_own_start() {
    let out = simulate(4, &workload(), &[]);
    let members: Vec<_> = out.records.iter().filter(|r| r.job == 1).collect();
    let last = members.iter().filter_map(|r| r.start).max().unwrap();
    for m in &members {
        assert_eq!(m.finish, Some(m.start.unwrap() + Micros::from_secs(5)));
    }
    assert!(members.iter().any(|m| m.finish < Some(last)));
    assert_eq!(out.counters.barrier_stuck, 0);
}

#[test]
fn a_barrier_job_larger_than_the_cluster_ends_the_run_with_its_members_stuck() {
    // Three members on two nodes: two start and wait forever; the job behind
    // them never gets a node.
    let jobs = vec![job(0, 1, &[5, 5, 5]), job(1, 2, &[1])];
    let out = simulate(2, &jobs, &[0]);
    assert_eq!(out.counters.barrier_stuck, 2);
    assert!(!out.drained);
    assert!(out.records.iter().all(|r| r.finish.is_none()));
    let started = out.records.iter().filter(|r| r.start.is_some()).count();
    assert_eq!(started, 2);
}
