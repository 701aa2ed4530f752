//! `loadgen report` end to end: small `loadgen simulate` runs (megha, sparrow and
//! centralized, with and without queues) and an LRA experiment turned into SVG
//! figures and one HTML page that name every run, component, queue and placer.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::Path;
use std::process::Command;

fn loadgen(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "loadgen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn simulate(out: &Path, extra: &[&str]) {
    let mut args = vec![
        "simulate",
        "--trace",
        "data/traces/YH_small.tr",
        "--gms",
        "2",
        "--lms",
        "2",
        "--partition-size",
        "5",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    loadgen(&args);
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn report_draws_every_figure_of_runs_with_queues() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    simulate(
        &runs,
        &[
            "--scheduler",
            "megha,sparrow,centralized",
            "--queues",
            "alpha:0.7:0,beta:0.3:1",
        ],
    );
    // An LRA placement-quality run next to them (two fast placers, a small cluster).
    let lra = runs.join("lra");
    loadgen(&[
        "lra",
        "experiment",
        "--placers",
        "nc,tp",
        "--nodes",
        "50",
        "--racks",
        "5",
        "--utilisation",
        "10,50",
        "--latency-nodes",
        "50",
        "--latency-lras",
        "2",
        "--out",
        lra.to_str().unwrap(),
    ]);
    let report = dir.path().join("report");
    let printed = loadgen(&[
        "report",
        runs.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]);
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("index.html"), "{printed}");

    let cdf = read(&report.join("allocation_cdf.svg"));
    for run in ["megha", "sparrow", "centralized"] {
        assert!(cdf.contains(run), "the CDF names {run}");
    }
    let breakdown = read(&report.join("delay_breakdown.svg"));
    for component in [
        "framework queuing",
        "processing",
        "worker queuing",
        "communication",
    ] {
        assert!(
            breakdown.contains(component),
            "the breakdown names {component}"
        );
    }
    let load = read(&report.join("utilisation.svg"));
    assert!(load.contains("megha: running") && load.contains("sparrow: demand"));
    let shares = read(&report.join("shares_megha.svg"));
    assert!(shares.contains("alpha (entitled 70%)") && shares.contains("beta (entitled 30%)"));
    let jain = read(&report.join("jain.svg"));
    assert!(jain.contains("Jain") && jain.contains("centralized"));

    let quality = read(&report.join("lra_quality.svg"));
    for series in ["nc: violations", "tp: fragmentation"] {
        assert!(quality.contains(series), "the LRA figure names {series}");
    }

    let page = read(&report.join("index.html"));
    for name in ["megha", "sparrow", "centralized", "lra"] {
        assert!(
            page.contains(&format!("data-run=\"{name}\"")),
            "the table lists {name}"
        );
    }
    assert_eq!(page.matches("<svg").count(), 8, "every figure inline");
    assert!(!page.contains("Not drawn"));
}

#[test]
fn runs_without_queues_get_no_share_figures_and_the_page_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("plain");
    simulate(&one, &[]);
    let report = dir.path().join("report");
    loadgen(&[
        "report",
        one.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]);
    assert!(report.join("allocation_cdf.svg").is_file());
    assert!(!report.join("jain.svg").exists());
    let page = read(&report.join("index.html"));
    assert!(page.contains("Not drawn") && page.contains("no run has queues"));
}

#[test]
fn a_directory_without_runs_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["report", dir.path().to_str().unwrap(), "--out"])
        .arg(dir.path().join("r"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no tasks.csv") && err.contains(dir.path().to_str().unwrap()),
        "{err}"
    );
}
