//! Embedded mode: 2 GMs, 2 LMs and 4 workers in this process, linked in memory, replay
//! the sample trace; every task runs exactly once and no node is over-committed.

use common::cluster::ClusterSpec;
use common::{Micros, Resources};
use loadgen::cli::replay::{in_actix_system, replay_embedded};
use loadgen::replay::driver::ReplayOptions;
use loadgen::replay::embedded::EmbeddedConfig;
use loadgen::replay::finish::finish;
use loadgen::sim::workload::{build, ConstraintMode, WorkloadOptions};
use loadgen::trace::{read_all, tr::TrReader};
use std::time::Duration;
use tests::checks::{assert_all_finished, assert_no_overlap_on_nodes, read_tasks_csv};
use tests::embedded_config;
use tests::procs::workspace_root;

/// An embedded cluster of 2 GMs and 2 LMs, `per_partition` nodes of `cores` cores
/// per partition, its LMs publishing their state every `heartbeat_ms`.
fn cluster(heartbeat_ms: u64, per_partition: usize, cores: u64) -> EmbeddedConfig {
    EmbeddedConfig {
        heartbeat: Micros::from_millis(heartbeat_ms),
        ..embedded_config(ClusterSpec::generate(
            2,
            2,
            per_partition,
            Resources::cores(cores, 16384),
            7,
        ))
    }
}

/// Replay over 2 GMs at `speedup`, a minute's wait after the last arrival.
fn options(speedup: f64) -> ReplayOptions {
    ReplayOptions {
        speedup,
        rate_cap: None,
        timeout: Duration::from_secs(60),
        quiet: true,
        gms: 2,
        queues: None,
        gangs: None,
    }
}

/// Replays `jobs`; every job was accepted and every task ran to its end once.
fn run_each_task_once(
    cfg: &EmbeddedConfig,
    jobs: &[loadgen::sim::workload::Job],
    opts: &ReplayOptions,
) -> loadgen::replay::driver::ReplayResult {
    let result = in_actix_system(replay_embedded(cfg, jobs, opts)).expect("embedded run");
    assert!(result.unsubmitted.is_empty(), "{:?}", result.unsubmitted);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );
    result
}

#[test]
fn embedded_cluster_runs_every_task_exactly_once() {
    let trace =
        read_all(TrReader::open(&workspace_root().join("data/traces/YH_small.tr")).expect("trace"))
            .expect("trace parses");
    let jobs = build(
        &trace,
        &WorkloadOptions {
            default_task: Resources::cores(1, 1024),
            constraints: ConstraintMode::None,
            seed: 7,
        },
    );
    let total: usize = jobs.iter().map(|j| j.tasks.len()).sum();
    let cfg = cluster(500, 2, 1);
    let opts = options(100.0);
    let result = run_each_task_once(&cfg, &jobs, &opts);
    let out = std::env::temp_dir().join(format!("megha-embedded-{}", std::process::id()));
    assert!(finish(&result, "megha-embedded", 7, 8, &out, true).expect("reports"));
    let rows = read_tasks_csv(&out);
    assert_eq!(rows.len(), total);
    assert_all_finished(&rows);
    assert_no_overlap_on_nodes(&rows);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["finished"], total);
    assert_eq!(summary["never_finished"], 0);
}

/// DAG jobs in embedded mode (issue 35): diamonds of stages submitted with their
/// DAGs; every task of a stage starts after the last task of its parent stages
/// finished, every task runs once.
#[test]
fn embedded_cluster_runs_dag_stages_in_order() {
    let jobs = tests::dag::diamond_jobs(6);
    let dag = jobs[0].dag.clone().expect("a DAG");
    let cfg = cluster(200, 3, 2);
    let opts = options(4.0);
    let result = run_each_task_once(&cfg, &jobs, &opts);
    let bad = tests::dag::out_of_order(&result.outcome, &jobs, &dag);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Gangs in embedded mode (issue 37, docs/gangs.md): a job of 7 three-second tasks
/// takes 7 of the 8 one-core nodes; then a gang of 4 and a gang of 8 (every node,
/// so both LMs) of 0.3 s tasks arrive. Placed one by one, the first gang's members
/// would run one after another on the one free node (each starting after the one
/// before it finished); as gangs, each waits until all its members fit and they
/// start together, and every task runs once.
#[test]
fn embedded_cluster_starts_every_gang_whole() {
    use common::gang::GangSpec;
    use common::{TaskId, TaskSpec};
    use loadgen::replay::driver::Gangs;
    use loadgen::sim::workload::Job;
    let job = |id: u64, arrival_ms: u64, tasks: u32, ms: u64| Job {
        id,
        arrival: Micros::from_millis(arrival_ms),
        tasks: (0..tasks)
            .map(|i| {
                TaskSpec::short(
                    TaskId::new(id, i),
                    Resources::cores(1, 256),
                    Micros::from_millis(ms),
                )
            })
            .collect(),
        dag: None,
    };
    let jobs = vec![job(0, 0, 7, 3000), job(1, 300, 4, 300), job(2, 400, 8, 300)];
    let gangs: Gangs = [(1, 4), (2, 8)]
        .into_iter()
        .map(|(id, n)| (id, GangSpec::all(n, Micros::from_secs(60))))
        .collect();
    let cfg = cluster(200, 2, 1);
    let opts = ReplayOptions {
        gangs: Some(std::sync::Arc::new(gangs.clone())),
        ..options(1.0)
    };
    let result = run_each_task_once(&cfg, &jobs, &opts);
    let figures = loadgen::replay::gangs::figures(&result.outcome.records, &gangs);
    assert_eq!((figures.gangs, figures.started), (2, 2), "{figures}");
    assert!(figures.apart.is_empty(), "{figures}: {:?}", figures.apart);
    // Neither gang started before the 7 long tasks ended (4 and 8 nodes at once).
    let end_of_long = (result.outcome.records.iter())
        .filter(|r| r.job == 0)
        .filter_map(|r| r.finish)
        .min()
        .expect("the long job finished");
    for r in result.outcome.records.iter().filter(|r| r.job != 0) {
        assert!(
            r.start.expect("started") >= end_of_long,
            "gang {} member {} started at {:?}, before the first long task ended at {end_of_long:?}",
            r.job,
            r.index,
            r.start
        );
    }
}
