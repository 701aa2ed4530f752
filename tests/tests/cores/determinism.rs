//! The same seed and inputs give a byte-identical tasks.csv, and the seed is printed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn loadgen() -> PathBuf {
    // Always ask cargo (through bin_dir): a binary left over from an older build would
    // test old code.
    tests::procs::bin_dir().join("loadgen")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn simulate(out: &Path, seed: &str) -> String {
    let root = repo_root();
    let output = Command::new(loadgen())
        .args(["simulate", "--trace"])
        .arg(root.join("data/traces/YH_small.tr"))
        .args([
            "--gms",
            "3",
            "--lms",
            "2",
            "--partition-size",
            "20",
            "--quiet",
        ])
        .args([
            "--scheduler",
            "megha,sparrow,centralized",
            "--seed",
            seed,
            "--out",
        ])
        .arg(out)
        .output()
        .expect("run loadgen");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn same_seed_same_bytes_and_the_seed_is_printed() {
    let tmp = std::env::temp_dir().join(format!("megha-determinism-{}", std::process::id()));
    let (a, b, c) = (tmp.join("a"), tmp.join("b"), tmp.join("c"));
    let stderr = simulate(&a, "7");
    assert!(stderr.contains("seed: 7"), "seed not printed: {stderr}");
    simulate(&b, "7");
    simulate(&c, "8");
    for s in ["megha", "sparrow", "centralized"] {
        let read = |d: &Path| std::fs::read(d.join(s).join("tasks.csv")).expect("tasks.csv");
        assert_eq!(read(&a), read(&b), "{s}: same seed, different tasks.csv");
        assert!(read(&a).starts_with(loadgen::report::TASKS_CSV_HEADER.as_bytes()));
        let summary: serde_json::Value = serde_json::from_slice(
            &std::fs::read(a.join(s).join("summary.json")).expect("summary.json"),
        )
        .expect("valid json");
        assert_eq!(summary["tasks"], 183);
        assert_eq!(summary["never_finished"], 0);
    }
    // A different seed synthesises different constraints, hence a different schedule.
    let megha = |d: &Path| std::fs::read(d.join("megha/tasks.csv")).expect("tasks.csv");
    assert_ne!(megha(&a), megha(&c));
    let _ = std::fs::remove_dir_all(&tmp);
}

fn simulate_mercury(out: &Path) {
    let output = Command::new(loadgen())
        .args(["simulate", "--trace"])
        .arg(repo_root().join("data/traces/YH_small.tr"))
        .args([
            "--gms",
            "2",
            "--lms",
            "2",
            "--partition-size",
            "5",
            "--quiet",
        ])
        .args(["--task-types", "only-q,hybrid:15:0.7", "--shed-sigma", "1"])
        .args(["--heartbeat-s", "1", "--seed", "3", "--out"])
        .arg(out)
        .output()
        .expect("run loadgen");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn queueable_and_hybrid_runs_are_byte_identical_too() {
    let tmp = std::env::temp_dir().join(format!("megha-mercury-det-{}", std::process::id()));
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    simulate_mercury(&a);
    simulate_mercury(&b);
    for policy in ["only-q", "hybrid_15_0.7"] {
        let read = |d: &Path| std::fs::read(d.join(policy).join("tasks.csv")).expect("tasks.csv");
        assert_eq!(
            read(&a),
            read(&b),
            "{policy}: same seed, different tasks.csv"
        );
        let summary: serde_json::Value = serde_json::from_slice(
            &std::fs::read(a.join(policy).join("summary.json")).expect("summary.json"),
        )
        .expect("valid json");
        assert_eq!(summary["never_finished"], 0, "{policy}");
        assert_eq!(summary["over_commits"], 0, "{policy}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
