//! `loadgen calibrate` end to end on a small calibration: the model it writes, and
//! with `--embedded-workload check` the second embedded run on the check's own
//! workload (its seed printed, its tasks under the check's directory, the start's
//! quantiles taken from it); a malformed check cluster is refused before anything
//! runs, and no model is written.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::PathBuf;
use std::process::{Command, Output};

fn trace(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/traces")
        .join(name)
}

fn calibrate(out: &std::path::Path, check_cluster: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["calibrate", "--seed", "5", "--hops", "100"])
        .args(["--partition-size", "4", "--trace"])
        .arg(trace("YH_small.tr"))
        .args([
            "--embedded-workload",
            "check",
            "--check-cluster",
            check_cluster,
        ])
        .arg("--check-trace")
        .arg(trace("YH_2_jobs.tr"))
        .arg("--check-out")
        .arg(out.join("check"))
        .arg("--out")
        .arg(out.join("costs.toml"))
        .output()
        .unwrap()
}

#[test]
fn a_calibration_at_the_checks_load_runs_the_checks_workload_under_its_own_seed() {
    let dir = tempfile::tempdir().unwrap();
    let output = calibrate(dir.path(), "1,1,8");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains("seed: 5"), "{stdout}");
    assert!(
        stdout.contains("embedded calibration on the check's workload: seed 1000005"),
        "{stdout}"
    );
    assert!(
        stdout.contains("embedded run at the check's load"),
        "{stdout}"
    );
    // The spaced run and the run at the check's load, each in its own directory.
    let runs = dir.path().join("check/embedded-calibration");
    let spaced = std::fs::read_to_string(runs.join("embedded/tasks.csv")).unwrap();
    assert!(spaced.lines().count() > 1, "the spaced jobs ran");
    let check_trace = std::fs::read_to_string(trace("YH_2_jobs.tr")).unwrap();
    let tasks: usize = check_trace
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok())
        .sum();
    let at_load = std::fs::read_to_string(runs.join("at-check-load/tasks.csv")).unwrap();
    assert_eq!(
        at_load.lines().count(),
        tasks + 1,
        "every task of the check's trace ran (and a header)"
    );
    let model: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.path().join("costs.toml")).unwrap()).unwrap();
    let q = model["worker_start_quantiles_ns"].as_array().unwrap();
    assert_eq!(q.len(), 21);
    assert!(q.windows(2).all(|w| w[0].as_integer() <= w[1].as_integer()));
    assert!(model["network_delay_ns"].as_integer().unwrap() > 0);
    assert!(model["submit_ns"].as_integer().unwrap() > 0);
    assert!(model["lm_fanout_ns"].as_integer().unwrap() > 0);
}

#[test]
fn a_malformed_check_cluster_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let output = calibrate(dir.path(), "2,2");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--check-cluster"), "{stderr}");
    assert!(!dir.path().join("costs.toml").exists());
    assert!(!dir.path().join("check").exists(), "nothing ran");
}
