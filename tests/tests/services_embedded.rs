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
    let cfg = EmbeddedConfig {
        heartbeat: Micros::from_millis(500),
        ..embedded_config(ClusterSpec::generate(
            2,
            2,
            2,
            Resources::cores(1, 16384),
            7,
        ))
    };
    let opts = ReplayOptions {
        speedup: 100.0,
        rate_cap: None,
        timeout: Duration::from_secs(60),
        quiet: true,
        gms: 2,
        queues: None,
    };
    let result = in_actix_system(replay_embedded(&cfg, &jobs, &opts)).expect("embedded run");
    assert!(result.unsubmitted.is_empty(), "{:?}", result.unsubmitted);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );
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
    let cfg = EmbeddedConfig {
        heartbeat: Micros::from_millis(200),
        ..embedded_config(ClusterSpec::generate(
            2,
            2,
            3,
            Resources::cores(2, 16384),
            7,
        ))
    };
    let opts = ReplayOptions {
        speedup: 4.0,
        rate_cap: None,
        timeout: Duration::from_secs(60),
        quiet: true,
        gms: 2,
        queues: None,
    };
    let result = in_actix_system(replay_embedded(&cfg, &jobs, &opts)).expect("embedded run");
    assert!(result.unsubmitted.is_empty(), "{:?}", result.unsubmitted);
    assert!(result.unfinished.is_empty(), "{:?}", result.unfinished);
    assert!(
        result.started_twice.is_empty(),
        "{:?}",
        result.started_twice
    );
    let bad = tests::dag::out_of_order(&result.outcome, &jobs, &dag);
    assert!(bad.is_empty(), "{bad:#?}");
}
