//! Streaming over large generated inputs (200k rows): every job comes out whole and
//! counted, the options adapter composes with it, and `.tr` conversion round-trips.

#![allow(clippy::unwrap_used)] // tests may unwrap

use common::Micros;
use loadgen::trace::options::TraceOptions;
use loadgen::trace::stats::TraceStats;
use loadgen::trace::synth::{write_alibaba_instances, write_google_events, ALIBABA_JOB_ROWS};
use loadgen::trace::tr::{write_tr, TrReader};
use loadgen::trace::{open_trace, SourceConfig, TraceFormat};
use std::fs::File;
use std::io::{BufWriter, Write};

const ROWS: u64 = 200_000;

#[test]
fn alibaba_instances_200k_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch_instance.csv");
    let mut out = BufWriter::new(File::create(&path).unwrap());
    let summary = write_alibaba_instances(&mut out, ROWS).unwrap();
    out.flush().unwrap();
    drop(out);
    assert_eq!(summary.rows, ROWS);

    let mut source = open_trace(
        &path,
        TraceFormat::AlibabaInstance,
        &SourceConfig::default(),
    )
    .unwrap();
    let mut jobs = 0u64;
    let mut tasks = 0u64;
    for job in source.by_ref() {
        let job = job.unwrap();
        assert_eq!(job.id, jobs, "dense ids in file order");
        assert_eq!(job.stages.len(), 2);
        assert_eq!(job.stages[1].depends_on, vec![1]);
        let expected = if job.id % 7 == 0 {
            ALIBABA_JOB_ROWS - 1
        } else {
            ALIBABA_JOB_ROWS
        };
        assert_eq!(job.tasks.len() as u64, expected, "job {}", job.id);
        jobs += 1;
        tasks += job.tasks.len() as u64;
    }
    assert_eq!((jobs, tasks), (summary.jobs, summary.tasks));
    let report = source.report();
    assert_eq!(report.records, ROWS);
    assert_eq!(report.dropped_for("status: Failed"), summary.dropped_rows);
    assert!(report.limits.is_empty(), "{report}");
}

#[test]
fn google_events_200k_rows_with_options_and_tr_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.csv");
    let mut out = BufWriter::new(File::create(&path).unwrap());
    let summary = write_google_events(&mut out, ROWS).unwrap();
    out.flush().unwrap();
    drop(out);

    let mut cfg = SourceConfig::default();
    cfg.google.max_open_jobs = 16;
    let mut source = open_trace(&path, TraceFormat::GoogleCsv, &cfg).unwrap();
    let jobs: Vec<_> = source.by_ref().map(Result::unwrap).collect();
    assert_eq!(jobs.len() as u64, summary.jobs);
    assert_eq!(
        jobs.iter().map(|j| j.tasks.len() as u64).sum::<u64>(),
        summary.tasks
    );
    assert!(source.report().limits.is_empty(), "{}", source.report());
    assert_eq!(source.report().mappings.len(), 1);

    // First 1000 jobs after a 2x speed-up, through .tr and back.
    let opts = TraceOptions {
        first_jobs: Some(1000),
        speedup: Some(loadgen::trace::options::SpeedUp {
            factor: 2.0,
            compress_durations: false,
        }),
        ..TraceOptions::default()
    };
    let source = open_trace(&path, TraceFormat::GoogleCsv, &cfg).unwrap();
    let selected: Vec<_> = opts.apply(source).unwrap().map(Result::unwrap).collect();
    assert_eq!(selected.len(), 1000);
    assert_eq!(selected[0].arrival, Micros(jobs[0].arrival.0 / 2));
    let tr = dir.path().join("out.tr");
    let mut out = BufWriter::new(File::create(&tr).unwrap());
    for job in &selected {
        write_tr(&mut out, job).unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let back: Vec<_> = TrReader::open(&tr).unwrap().map(Result::unwrap).collect();
    assert_eq!(back.len(), 1000);
    for (a, b) in selected.iter().zip(&back) {
        assert_eq!(a.arrival, b.arrival);
        let da: Vec<_> = a.tasks.iter().map(|t| t.duration).collect();
        let db: Vec<_> = b.tasks.iter().map(|t| t.duration).collect();
        assert_eq!(da, db);
    }

    let mut stats = TraceStats::new(Micros::from_secs(1), None);
    for job in &jobs {
        stats.add(job).unwrap();
    }
    assert_eq!((stats.jobs, stats.tasks), (summary.jobs, summary.tasks));
}
