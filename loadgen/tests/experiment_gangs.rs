//! `loadgen experiment gangs` on a tiny trace: the shape of summary.json and
//! jobs.csv; gang-aware, no partial start and every job done; one by one on a
//! cluster too small for the gangs and the rest at once, partial starts, idle
//! reserved node-seconds and a deadlock (every node held by members waiting at
//! their start barrier for members that can never start), reported rather than
//! waited out; and bad flags refused before anything runs.

#![allow(clippy::unwrap_used)] // tests may unwrap

use serde_json::Value;
use std::process::Command;

/// Twenty jobs of four 5 s tasks, one every 0.2 s: the cluster (32 nodes) is busy
/// when the gangs (8 to 16 tasks) arrive.
fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut text = String::new();
    for j in 0..20 {
        text.push_str(&format!("{:.1} 4 5.0 5.0 5.0 5.0 5.0\n", j as f64 * 0.2));
    }
    let path = dir.join("tiny.tr");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(args: &[&str], trace: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["experiment", "gangs", "--quiet", "--trace"])
        .arg(trace)
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// The tiny experiment's flags: its 20 jobs on 2 GMs x 2 LMs x 8 nodes, this share
/// of them gangs of `min` to `max` tasks.
fn tiny_cluster(share: &'static str, min: &'static str, max: &'static str) -> Vec<&'static str> {
    vec![
        "--first-jobs",
        "20",
        "--gang-share",
        share,
        "--min-gang",
        min,
        "--max-gang",
        max,
        "--gms",
        "2",
        "--lms",
        "2",
        "--partition-size",
        "8",
    ]
}

#[test]
fn a_tiny_gang_experiment_starts_no_gang_partially() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    let out = dir.path().join("out");
    let args = tiny_cluster("0.5", "8", "16");
    let done = run(&args, &trace, &out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let s: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (s["seed"].as_u64(), s["nodes"].as_u64()),
        (Some(42), Some(32))
    );
    assert!(s["gangs"].as_u64().unwrap() >= 3, "{text}");
    let aware = &s["runs"]["gang_aware"];
    let single = &s["runs"]["one_by_one"];
    assert_eq!(aware["unfinished_jobs"], 0, "{text}");
    assert_eq!(aware["jct_all"]["jobs"], 20, "{text}");
    assert_eq!(aware["drained"], true, "{text}");
    assert_eq!(aware["barrier_stuck"], 0, "{text}");
    assert_eq!(aware["partial_starts"], 0, "{text}");
    assert!(
        aware["max_gang_start_spread_s"].as_f64().unwrap() < 0.1,
        "{text}"
    );
    assert!(single["partial_starts"].as_u64().unwrap() > 0, "{text}");
    assert!(
        single["idle_reserved_node_s"].as_f64().unwrap() > 0.0,
        "{text}"
    );
    // One by one deadlocked: all 32 one-core nodes held at barriers, the jobs
    // waiting for them never done.
    assert_eq!(single["barrier_stuck"], 32, "{text}");
    assert_eq!(single["drained"], false, "{text}");
    let unfinished = single["unfinished_jobs"].as_u64().unwrap();
    assert!(unfinished > 0, "{text}");
    assert_eq!(single["jct_all"]["jobs"].as_u64(), Some(20 - unfinished));
    // Every job, with its completion time in each run (none if unfinished); the
    // gangs are marked.
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("job,arrival_s,tasks,gang,work_s,jct_gang_aware_s,jct_one_by_one_s")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 20, "{csv}");
    let gangs = rows.iter().filter(|r| r[3] == "1").count();
    assert_eq!(Some(gangs as u64), s["gangs"].as_u64(), "{csv}");
    for r in &rows {
        assert!(r[5].parse::<f64>().unwrap() > 0.0, "{r:?}");
        assert!(
            r[6].is_empty() || r[6].parse::<f64>().unwrap() > 0.0,
            "{r:?}"
        );
    }
    let empty = rows.iter().filter(|r| r[6].is_empty()).count();
    assert_eq!(empty as u64, unfinished, "{csv}");
}

#[test]
fn bad_gang_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    let out = dir.path().join("out");
    for args in [
        &["--min-gang", "9", "--max-gang", "8"][..],
        &["--gang-share", "1.5"][..],
        &[
            "--max-gang",
            "64",
            "--gms",
            "1",
            "--lms",
            "1",
            "--partition-size",
            "8",
        ][..],
    ] {
        let done = run(args, &trace, &out);
        assert!(!done.status.success(), "{args:?} accepted");
        assert!(!out.join("summary.json").exists());
    }
}

/// `--seeds N`: each seed in `DIR/seed-S` as a one-seed run writes it, and
/// `DIR/summary.json` over all of them, its ratios the mean of the per-seed ones.
#[test]
fn many_seeds_are_written_one_by_one_and_compared_over_all() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    let out = dir.path().join("out");
    let mut args = tiny_cluster("0.3", "2", "4");
    args.extend(["--seed", "7", "--seeds", "3"]);
    let done = run(&args, &trace, &out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let read = |path: std::path::PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let s = read(out.join("summary.json"));
    assert_eq!(
        (s["first_seed"].as_u64(), s["seeds"].as_u64()),
        (Some(7), Some(3))
    );
    let mut ratios = Vec::new();
    let mut partial = 0;
    for seed in 7..10 {
        let one = read(out.join(format!("seed-{seed}")).join("summary.json"));
        assert_eq!(one["seed"].as_u64(), Some(seed));
        assert!(out.join(format!("seed-{seed}")).join("jobs.csv").is_file());
        let mean = |run: &str| one["runs"][run]["jct_all"]["mean_s"].as_f64().unwrap();
        ratios.push(mean("gang_aware") / mean("one_by_one"));
        partial += one["runs"]["gang_aware"]["partial_starts"]
            .as_u64()
            .unwrap();
    }
    let all = &s["ratio_gang_aware_over_one_by_one"]["jct_all"];
    let mean = ratios.iter().sum::<f64>() / 3.0;
    assert!(
        (all["ratio_mean"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{s}"
    );
    let better = ratios.iter().filter(|r| **r < 1.0).count() as u64;
    assert_eq!(all["gang_aware_better"].as_u64(), Some(better), "{s}");
    let ci = &all["ratio_ci95"];
    assert!(
        ci[0].as_f64().unwrap() <= mean && mean <= ci[1].as_f64().unwrap(),
        "{s}"
    );
    assert_eq!(s["partial_starts"]["gang_aware"].as_u64(), Some(partial));
    assert_eq!(partial, 0, "{s}");

    let refused = run(&["--seeds", "0"], &trace, &dir.path().join("none"));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--seeds"));
    let max = u64::MAX.to_string();
    let past = run(
        &["--seed", max.as_str(), "--seeds", "2"],
        &trace,
        &dir.path().join("past"),
    );
    assert!(!past.status.success());
    assert!(String::from_utf8_lossy(&past.stderr).contains("--seed"));

    // No gang at all: nothing to compare for gangs, said as null, not as a ratio.
    let mut none = tiny_cluster("0", "2", "4");
    none.extend(["--seeds", "2"]);
    let out = dir.path().join("no-gangs");
    let done = run(&none, &trace, &out);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let s = read(out.join("summary.json"));
    let gangs = &s["ratio_gang_aware_over_one_by_one"]["jct_gangs"];
    assert_eq!(gangs["seeds"].as_u64(), Some(0), "{s}");
    assert!(gangs["ratio_mean"].is_null(), "{s}");
    assert_eq!(
        s["ratio_gang_aware_over_one_by_one"]["jct_all"]["seeds"].as_u64(),
        Some(2)
    );
}
