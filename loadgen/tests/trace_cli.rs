//! `loadgen trace stats` and `convert` end to end on the fixtures.

#![allow(clippy::unwrap_used)] // tests may unwrap

use clap::Parser;
use megha_sim::cli::trace::{run, TraceCommand};
use std::path::Path;

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: TraceCommand,
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn run_args(args: &[&str]) -> anyhow::Result<()> {
    let mut argv = vec!["trace"];
    argv.extend_from_slice(args);
    run(Cli::try_parse_from(argv)?.cmd)
}

#[test]
fn stats_writes_a_csv_series() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("stats.csv");
    let input = fixture("alibaba_batch_instance.csv");
    let out = csv.display().to_string();
    run_args(&[
        "stats",
        &input,
        "--format",
        "alibaba-instance",
        "--cluster-slots",
        "8",
        "--bucket-secs",
        "100",
        "--csv",
        &out,
    ])
    .unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    // Tasks start at their job's arrival: j_2 at 30 s (one 60 s task), j_1 at 100 s,
    // j_3 at 400 s with tasks of at most 60 s: buckets 0-100 .. 400-500.
    assert_eq!(rows.len(), 1 + 5, "{text}");
    assert_eq!(rows[1], "0,100,1,1,0.010000,0.600,0.000,0.000,8,0.075000");
    assert!(rows[2].starts_with("100,200,1,5,"), "{text}");
}

#[test]
fn convert_writes_tr_with_options_applied() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.tr").display().to_string();
    let input = fixture("alibaba_batch_task.csv");
    run_args(&[
        "convert",
        &input,
        "--format",
        "alibaba-task",
        "--out",
        &out,
        "--first-jobs",
        "2",
        "--window-start",
        "50",
    ])
    .unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // j_1 rebased to the window start (100 - 50 s), six tasks.
    assert!(lines[0].starts_with("50.000000 6 "), "{text}");
    assert!(lines[1].starts_with("0.000000 7 "), "{text}");
}

#[test]
fn bad_input_and_flags_are_errors_not_panics() {
    let err = run_args(&["stats", "/nonexistent/x.csv", "--format", "google-csv"]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/x.csv"), "{err}");
    let input = fixture("google_instance_events.csv");
    let err = run_args(&[
        "stats",
        &input,
        "--format",
        "google-csv",
        "--bucket-secs",
        "0",
    ])
    .unwrap_err();
    assert!(err.to_string().starts_with("--bucket-secs"), "{err}");
    let err = run_args(&["stats", &input, "--format", "tr"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("google_instance_events.csv:1: looks like CSV"),
        "{err}"
    );
}

/// Runs the `loadgen` binary and returns its stderr (it must fail).
fn loadgen_fails(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_missing_trace_is_one_line_naming_the_path_and_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "simulate",
                "--trace",
                "nope.tr",
                "--out",
                &out,
                "--gms",
                "1",
                "--lms",
                "1",
                "--partition-size",
                "1",
            ],
            "--trace",
        ),
        (
            &[
                "replay",
                "--trace",
                "nope.tr",
                "--out",
                &out,
                "--gm",
                "http://127.0.0.1:1",
            ],
            "--trace",
        ),
        (&["trace", "stats", "nope.tr"], "INPUT"),
    ];
    for (args, flag) in cases {
        let stderr = loadgen_fails(args);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
        let line = errors[0];
        assert!(
            line.contains("nope.tr") && line.contains(&format!("(given by {flag})")),
            "{args:?}: {line}"
        );
        assert_eq!(line.matches("os error 2").count(), 1, "{args:?}: {line}");
    }
}

#[test]
fn a_csv_read_as_tr_suggests_format() {
    let input = fixture("alibaba_batch_instance.csv");
    let stderr = loadgen_fails(&["trace", "stats", &input]);
    assert!(
        stderr.contains("alibaba_batch_instance.csv:1: looks like CSV")
            && stderr.contains("pass --format"),
        "{stderr}"
    );
}

#[test]
fn stats_draws_tpch_jobs_and_refuses_tpch_flags_on_other_formats() {
    let input = fixture("tpch_dags.json");
    run_args(&[
        "stats",
        &input,
        "--format",
        "tpch",
        "--tpch-jobs",
        "5",
        "--tpch-seed",
        "1",
        "--tpch-sizes",
        "2g",
    ])
    .unwrap();
    let err = run_args(&["stats", &input, "--format", "tpch", "--tpch-jobs", "0"]).unwrap_err();
    assert_eq!(err.to_string(), "--tpch-jobs: must be at least 1");
    let tr = fixture("../../../data/traces/YH_small.tr");
    let err = run_args(&["stats", &tr, "--tpch-jobs", "5"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("only meaningful with --format tpch"),
        "{err}"
    );
    // --tpch-load needs the cluster size it is measured against.
    let err = run_args(&["stats", &input, "--format", "tpch", "--tpch-load", "2"]).unwrap_err();
    assert!(err.to_string().contains("--tpch-cluster-cores"), "{err}");
}
