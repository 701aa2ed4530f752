//! `loadgen experiment alsched` on a tiny seeded run: the shape of summary.json and
//! what holds whatever the numbers: every job finishes under every policy, `hard`
//! puts every task of a preferring job in its set, utilisation lies in (0, 1], p95
//! is at least the mean's half, and the seed is printed; each run's tasks.csv has a
//! row per task, and a `branch` column exactly under the tree policies; only
//! `soft_ilp` runs the designated GM's exact solve.

#![allow(clippy::unwrap_used)] // tests may unwrap

use serde_json::Value;
use std::process::Command;

#[test]
fn a_tiny_alsched_experiment_writes_a_sane_summary() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["experiment", "alsched", "--quiet", "--jobs", "40"])
        .args(["--racks", "2", "--rack-nodes", "5", "--loads", "0.5,0.9"])
        .args(["--seed", "7", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("seed: 7"));
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(summary["seed"], 7);
    for load in ["0.5", "0.9"] {
        for policy in [
            "none",
            "hard",
            "soft_plain",
            "soft_task",
            "soft",
            "soft_delay",
            "soft_ilp",
        ] {
            let m = &summary["loads"][load][policy];
            let get = |field: &str| {
                m[field]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{load}.{policy}.{field} missing in {text}"))
            };
            assert_eq!(get("jobs_finished"), 40.0, "{load} {policy}");
            let (mean, p95) = (get("mean_completion_s"), get("p95_completion_s"));
            assert!(mean > 0.0 && p95 >= mean * 0.5, "{load} {policy}: {text}");
            let u = get("utilisation");
            assert!(0.0 < u && u <= 1.0, "{load} {policy}: {text}");
            let share = get("preferred_share");
            assert!((0.0..=1.0).contains(&share), "{load} {policy}: {text}");
            if policy == "hard" {
                assert_eq!(share, 1.0, "hard constraints always hold");
            }
            // Only `soft_ilp` solves exactly (its designated GM, at its passes).
            let solves = get("soft_ilp_solves") + get("soft_ilp_fallbacks");
            assert_eq!(
                solves > 0.0,
                policy == "soft_ilp",
                "{load} {policy}: {text}"
            );
        }
    }
    assert!(summary["goal"]["hard_over_soft_at_highest_load"].is_number());
    for load in ["0.5", "0.9"] {
        let mut rows = None;
        for policy in ["none", "hard", "soft", "soft_delay", "soft_ilp"] {
            let path = out.path().join(format!("x{load}/{policy}/tasks.csv"));
            let csv = std::fs::read_to_string(&path).unwrap();
            let mut lines = csv.lines();
            let header: Vec<&str> = lines.next().unwrap().split(',').collect();
            let trees = policy.starts_with("soft");
            // Every tasks.csv ends in the branch column, empty without trees.
            assert_eq!(header.last(), Some(&"branch"), "{path:?}: {header:?}");
            let body: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
            assert!(body.iter().all(|r| r.len() == header.len()), "{path:?}");
            // The same workload under every policy.
            assert_eq!(*rows.get_or_insert(body.len()), body.len(), "{path:?}");
            let branches: Vec<&str> = body.iter().map(|r| r[r.len() - 1]).collect();
            if !trees {
                assert!(
                    branches.iter().all(|b| b.is_empty()),
                    "{path:?}: {branches:?}"
                );
            } else {
                assert!(
                    branches
                        .iter()
                        .all(|b| b.is_empty() || *b == "none" || b.starts_with("utility")),
                    "{path:?}: {branches:?}"
                );
                assert!(
                    branches.iter().any(|b| b.starts_with("utility")),
                    "{path:?}: no task took a branch"
                );
            }
        }
    }
}

/// `--seeds N`: each seed in `DIR/seed-S` as a one-seed run writes it, and
/// `DIR/summary.json` over all of them: per load, every policy's ratio to `soft`,
/// the mean of the per-seed ratios, the seeds on which each side is faster, and the
/// seeds on which the goal holds, all from the seeds' own summaries.
#[test]
fn many_seeds_are_written_one_by_one_and_compared_over_all() {
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(["experiment", "alsched", "--quiet", "--jobs", "30"])
            .args(["--racks", "2", "--rack-nodes", "4", "--loads", "0.6,0.9"])
            .args(extra)
            .arg("--out")
            .arg(dir)
            .output()
            .unwrap()
    };
    let done = run(&["--seed", "5", "--seeds", "3"], out.path());
    assert!(done.status.success(), "{done:?}");
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(stdout.contains("seeds: 5 to 7"), "{stdout}");
    let read = |path: std::path::PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let s = read(out.path().join("summary.json"));
    assert_eq!(
        (s["first_seed"].as_u64(), s["seeds"].as_u64()),
        (Some(5), Some(3))
    );
    let each: Vec<Value> = (5..8)
        .map(|seed| {
            let dir = out.path().join(format!("seed-{seed}"));
            assert!(dir.join("x0.9/soft/tasks.csv").is_file(), "{dir:?}");
            let one = read(dir.join("summary.json"));
            assert_eq!(one["seed"].as_u64(), Some(seed));
            one
        })
        .collect();
    for load in ["0.6", "0.9"] {
        for policy in ["none", "hard", "soft_delay", "soft_ilp"] {
            let mean =
                |one: &Value, p: &str| one["loads"][load][p]["mean_completion_s"].as_f64().unwrap();
            let ratios: Vec<f64> = each
                .iter()
                .map(|o| mean(o, policy) / mean(o, "soft"))
                .collect();
            let r = &s["loads"][load]["ratio_over_soft"][policy];
            let expected = ratios.iter().sum::<f64>() / 3.0;
            assert!(
                (r["ratio_mean"].as_f64().unwrap() - expected).abs() < 1e-9,
                "{load} {policy}: {r}"
            );
            let faster = ratios.iter().filter(|x| **x > 1.0).count() as u64;
            assert_eq!(
                r["soft_better"].as_u64(),
                Some(faster),
                "{load} {policy}: {r}"
            );
            let ci = &r["ratio_ci95"];
            assert!(ci[0].as_f64().unwrap() <= expected && expected <= ci[1].as_f64().unwrap());
        }
        assert!(s["loads"][load]["ratio_over_soft_delay"]["soft"]["ratio_mean"].is_number());
    }
    let holds = each
        .iter()
        .filter(|o| o["goal"]["soft_beats_none_and_hard_at_every_load"] == true)
        .count() as u64;
    assert_eq!(
        s["goal"]["seeds_where_soft_beats_none_and_hard_at_every_load"].as_u64(),
        Some(holds),
        "{s}"
    );

    for bad in [
        &["--seeds", "0"][..],
        &["--seed", "18446744073709551615", "--seeds", "2"],
    ] {
        let dir = out.path().join("refused");
        let refused = run(bad, &dir);
        assert!(!refused.status.success(), "{bad:?} accepted");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("--seeds"),
            "{refused:?}"
        );
        assert!(!dir.exists(), "{bad:?} wrote {dir:?}");
    }
}
