//! Trace statistics: counts, percentiles and demand over time on a hand-computed case.

#![allow(clippy::unwrap_used)] // tests may unwrap

use common::{Micros, Resources};
use loadgen::trace::stats::{write_csv, write_table, TraceStats};
use loadgen::trace::{TraceJob, TraceTask};

fn task(secs: u64, cores: u64) -> TraceTask {
    TraceTask {
        duration: Micros::from_secs(secs),
        resources: Some(Resources::cores(cores, 1024)),
        constraints: None,
        stage: None,
    }
}

fn job(arrival_s: u64, tasks: Vec<TraceTask>) -> TraceJob {
    TraceJob {
        id: 0,
        arrival: Micros::from_secs(arrival_s),
        queue: None,
        stages: Vec::new(),
        tasks,
    }
}

#[test]
fn demand_over_time_integrates_task_spans() {
    // Buckets of 10 s. Job A at 5 s: one 30 s task (2 cores) -> covers 5..35.
    // Job B at 12 s: two 3 s tasks (1 core) -> 12..15 in bucket 1.
    let mut stats = TraceStats::new(Micros::from_secs(10), Some(4));
    stats.add(&job(5, vec![task(30, 2)])).unwrap();
    stats.add(&job(12, vec![task(3, 1), task(3, 1)])).unwrap();
    let b = stats.buckets();
    assert_eq!(b.len(), 4);
    let slots: Vec<f64> = b.iter().map(|b| b.slot_secs).collect();
    assert_eq!(slots, vec![5.0, 16.0, 10.0, 5.0]);
    let cores: Vec<f64> = b.iter().map(|b| b.core_secs).collect();
    assert_eq!(cores, vec![10.0, 26.0, 20.0, 10.0]);
    assert_eq!(b[0].gib_secs, 5.0);
    assert_eq!((b[0].jobs, b[1].jobs, b[1].tasks), (1, 1, 2));
    assert_eq!((stats.jobs, stats.tasks), (2, 3));
    let p50 = stats.durations.quantile(0.5).as_secs_f64();
    assert!((3.0..=3.03).contains(&p50), "within 1%: {p50}");
    assert_eq!(stats.durations.quantile(1.0), Micros::from_secs(30));

    let mut csv = Vec::new();
    write_csv(&stats, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[2], "10,20,1,2,0.100000,1.600,2.600,1.600,4,0.400000");

    let mut table = Vec::new();
    write_table(&stats, &mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("jobs                 2"), "{table}");
    assert!(table.contains("40.0%"), "{table}");
}

#[test]
fn long_traces_merge_rows_in_the_table_and_tiny_buckets_are_refused() {
    let mut stats = TraceStats::new(Micros::from_secs(1), None);
    for i in 0..1000 {
        stats.add(&job(i, vec![task(1, 1)])).unwrap();
    }
    let mut table = Vec::new();
    write_table(&stats, &mut table).unwrap();
    let rows = String::from_utf8(table)
        .unwrap()
        .lines()
        .skip_while(|l| !l.contains("start_s"))
        .count()
        - 1;
    assert!(rows <= 40, "{rows}");

    let mut tiny = TraceStats::new(Micros(1), None);
    let err = tiny.add(&job(100, vec![task(1, 1)])).unwrap_err();
    assert!(err.to_string().contains("--bucket-secs"), "{err}");
}

/// DAG facts of the Alibaba `batch_task` fixture: 9 of its 12 jobs have DAG task
/// names; the longest chain is j_5's M1 (100 s) then R3_1_2 (90 s).
#[test]
fn dag_facts_of_the_alibaba_task_fixture() {
    use loadgen::trace::{open_trace, SourceConfig, TraceFormat};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/alibaba_batch_task.csv");
    let source = open_trace(&path, TraceFormat::AlibabaTask, &SourceConfig::default()).unwrap();
    let mut stats = TraceStats::new(Micros::from_secs(60), None);
    for job in source {
        stats.add(&job.unwrap()).unwrap();
    }
    let d = &stats.dags;
    assert_eq!((stats.jobs, d.dags, d.unordered), (12, 9, 0));
    assert_eq!((d.stages.quantile(0.5), d.stages.max()), (1, 3));
    assert_eq!(d.tasks.max(), 6);
    assert_eq!(d.critical_path.max(), Micros::from_secs(190));
    let mut out = Vec::new();
    write_table(&stats, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("DAG jobs             9\n"), "{text}");
    assert!(
        text.contains("stages per DAG     median 1  max 3\n"),
        "{text}"
    );
}
