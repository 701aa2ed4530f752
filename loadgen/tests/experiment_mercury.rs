//! `loadgen experiment mercury` on tiny traces: the shape of summary.json (every
//! workload and heartbeat asked, the four policies, only-G's gain 0), each run's
//! reports where `loadgen report` finds them, extra `simulate` flags reaching every
//! run, and a bad heartbeat refused before anything runs.

#![allow(clippy::unwrap_used)] // tests may unwrap

use serde_json::Value;
use std::process::Command;

fn traces(dir: &std::path::Path) {
    // Ten jobs of four 2 s tasks (short) and of 2 s and 20 s tasks (mixed).
    let mut short = String::new();
    let mut mixed = String::new();
    for j in 0..10 {
        short.push_str(&format!("{:.1} 4 2.0 2.0 2.0 2.0 2.0\n", j as f64 * 0.5));
        mixed.push_str(&format!("{:.1} 4 6.5 2.0 2.0 2.0 20.0\n", j as f64 * 1.0));
    }
    std::fs::write(dir.join("mercury_short.tr"), short).unwrap();
    std::fs::write(dir.join("mercury_mixed.tr"), mixed).unwrap();
}

#[test]
fn a_tiny_mercury_experiment_writes_every_run() {
    let dir = tempfile::tempdir().unwrap();
    traces(dir.path());
    let out = dir.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "experiment",
            "mercury",
            "--quiet",
            "--heartbeat-s",
            "3",
            "--traces",
        ])
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .args(["--", "--promote-after-s", "1"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(summary["seed"], 42);
    assert_eq!(summary["extra_flags"][1], "1", "{text}");
    for workload in ["short-hb3", "mixed-hb3"] {
        let runs = &summary["runs"][workload];
        for policy in ["only-g", "only-q", "hybrid:inf:0.5", "hybrid:10:0.7"] {
            let r = &runs[policy];
            assert!(
                r["tasks_per_s"].as_f64().unwrap() > 0.0,
                "{workload} {policy}: {text}"
            );
            assert!(
                r["job_mean_s"].as_f64().unwrap() >= 2.0,
                "{workload} {policy}: {text}"
            );
            assert!(r["queueable_kills"].is_u64(), "{workload} {policy}: {text}");
        }
        assert_eq!(runs["only-g"]["gain_over_only_g"], 0.0, "{text}");
        assert_eq!(
            runs["only-g"]["queueable_kills"], 0,
            "only-G runs no QUEUEABLE task"
        );
        assert!(out
            .join(workload)
            .join("only-q")
            .join("tasks.csv")
            .is_file());
    }
    assert!(
        summary["runs"]["short-hb10"].is_null(),
        "only the heartbeat asked"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["experiment", "mercury", "--heartbeat-s", "0", "--out"])
        .arg(dir.path().join("bad"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--heartbeat-s"));
    assert!(!dir.path().join("bad").exists(), "nothing written");
}
