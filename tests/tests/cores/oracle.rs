//! The simulator's oracle: `tasks.csv` of fixed scenarios, byte for byte, against the
//! copies in `tests/oracle/` written by an earlier build.
//!
//! A refactor of the cores or of the drivers must leave every byte of every schedule
//! unchanged; a change meant to alter schedules rewrites the copies on purpose
//! (`scripts/sim-oracle.sh --bless`) and says why in its commit. The scenarios cover
//! the three schedulers with per-task constraints, queues with fairness and
//! preemption under contention, Mercury's task types with every QUEUEABLE knob, and
//! LRAs through the designated GM's placer beside short work.

use clap::Parser;
use common::{GmId, Micros, Resources, TaskId, TaskKind, TaskSpec};
use global_master::core::WakePolicy;
use global_master::lra::Placer;
use loadgen::sim::workload::Job;
use loadgen::sim::{SchedulerKind, SimConfig};
use megha_sim::cli::simulate::{run, run_one, SimulateArgs};
use std::path::{Path, PathBuf};
use tests::ClusterBuilder;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SimulateArgs,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oracle")
}

fn bless() -> bool {
    std::env::var_os("MEGHA_ORACLE_BLESS").is_some_and(|v| v == "1")
}

/// `loadgen simulate` with these arguments (the trace relative to the repository).
fn simulate(out: &Path, trace: &str, args: &[&str]) {
    let trace = root().join(trace);
    let mut argv: Vec<String> = vec!["simulate".into(), "--quiet".into(), "--trace".into()];
    argv.push(trace.display().to_string());
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push("--out".into());
    argv.push(out.display().to_string());
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    run(cli.args).unwrap_or_else(|e| panic!("{argv:?}: {e:#}"));
}

/// Every `tasks.csv` under `dir`, relative to it, sorted.
fn csv_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "tasks.csv") {
                found.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// Compares (or, blessing, copies) every tasks.csv of a scenario's output.
fn check(scenario: &str, out: &Path) {
    let golden = golden_dir().join(scenario);
    let files = csv_files(out);
    assert!(!files.is_empty(), "{scenario}: the run wrote no tasks.csv");
    if bless() {
        let _ = std::fs::remove_dir_all(&golden);
        for f in &files {
            let to = golden.join(f);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(out.join(f), &to).expect("copy");
        }
        eprintln!("blessed {} files of {scenario}", files.len());
        return;
    }
    assert_eq!(
        files,
        csv_files(&golden),
        "{scenario}: the run wrote other tasks.csv files than the oracle holds"
    );
    for f in &files {
        let got = std::fs::read(out.join(f)).expect("read output");
        let want = std::fs::read(golden.join(f)).expect("read oracle");
        if got != want {
            let (g, w) = (
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
            );
            let line = g
                .lines()
                .zip(w.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(g.lines().count().min(w.lines().count()));
            panic!(
                "{scenario}/{}: differs from the oracle at line {} (got {} lines, want {}):\n got: {}\nwant: {}\n(output kept in {})",
                f.display(),
                line + 1,
                g.lines().count(),
                w.lines().count(),
                g.lines().nth(line).unwrap_or("<end>"),
                w.lines().nth(line).unwrap_or("<end>"),
                out.display()
            );
        }
    }
}

fn scratch(scenario: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("megha-oracle-{}-{scenario}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The copies were written by the full retry of every blocked task on a gain of
/// resources (`--wake all`); the indexed wake is compared with it in `wake_index`.
fn scenario(name: &str, trace: &str, args: &[&str]) {
    let out = scratch(name);
    let args: Vec<&str> = args.iter().copied().chain(["--wake", "all"]).collect();
    simulate(&out, trace, &args);
    check(name, &out);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn oracle_three_schedulers_per_task_constraints() {
    scenario(
        "plain",
        "data/traces/YH_small.tr",
        &[
            "--gms",
            "3",
            "--lms",
            "2",
            "--partition-size",
            "20",
            "--constraints",
            "per-task",
            "--scheduler",
            "megha,sparrow,centralized",
            "--seed",
            "7",
        ],
    );
}

#[test]
fn oracle_queues_fairness_and_preemption_under_contention() {
    scenario(
        "fairness",
        "data/traces/YH_small.tr",
        &[
            "--gms",
            "3",
            "--lms",
            "2",
            "--partition-size",
            "3",
            "--queues",
            "a:0.5:0,b:0.3:1,c:0.2:2",
            "--scheduler",
            "megha,centralized",
            "--seed",
            "11",
        ],
    );
}

#[test]
fn oracle_mercury_task_types_with_every_knob() {
    scenario(
        "mercury",
        "data/traces/mercury_mixed.tr",
        &[
            "--first-jobs",
            "60",
            "--gms",
            "2",
            "--lms",
            "2",
            "--partition-size",
            "2",
            "--node-cpus",
            "4",
            "--constraints",
            "none",
            "--heartbeat-s",
            "3",
            "--task-types",
            "only-g,only-q,hybrid:10:0.5",
            "--queueable-cap",
            "0.8",
            "--shed-sigma",
            "0.5",
            "--queueable-quota",
            "max:4",
            "--promote-after-s",
            "5",
            "--queues",
            "a:0.5:0,b:0.5:1",
            "--scheduler",
            "megha,centralized",
            "--seed",
            "5",
        ],
    );
}

fn lra(job: u64, arrival_s: u64, containers: u32, tag: &str) -> Job {
    tests::sim::lra_job(job, arrival_s, containers, tag, |j| 20 + u64::from(j))
}

fn short(job: u64, arrival_s: u64, tasks: u32, kind: TaskKind) -> Job {
    Job {
        id: job,
        dag: None,
        arrival: Micros::from_secs(arrival_s),
        tasks: (0..tasks)
            .map(|j| {
                TaskSpec::short(
                    TaskId::new(job, j),
                    Resources::cores(1 + u64::from(j % 2), 512),
                    Micros::from_secs(3 + u64::from(j % 5)),
                )
                .with_kind(kind)
            })
            .collect(),
    }
}

#[test]
fn oracle_lras_beside_short_and_guaranteed_work() {
    // 2 GMs, 2 LMs, 3 nodes of 4 cores per partition: 12 nodes.
    let cluster = ClusterBuilder::new(2, 2, 3).capacity(4, 8192).build();
    let mut jobs = Vec::new();
    for k in 0..12u64 {
        jobs.push(match k % 4 {
            0 => lra(
                k,
                k,
                3 + (k % 3) as u32,
                if k % 8 == 0 { "w" } else { "db" },
            ),
            1 => short(k, k, 6, TaskKind::Short),
            2 => short(k, k, 4, TaskKind::Guaranteed),
            _ => short(k, k, 5, TaskKind::Short),
        });
    }
    let out = scratch("lra");
    for (name, placer) in [
        ("nc", Placer::NodeCandidates),
        ("tp", Placer::TagPopularity),
        ("kube", Placer::Kube),
    ] {
        for scheduler in [SchedulerKind::Megha, SchedulerKind::Centralized] {
            let config = SimConfig {
                scheduler,
                seed: 3,
                designated_gm: GmId(1),
                lra: tests::sim::lra_path(placer, 5),
                lra_operator_constraints: tests::sim::w_anti_affinity(),
                wake: WakePolicy::All,
                ..SimConfig::default()
            };
            let dir = out.join(name).join(scheduler.name());
            run_one(&cluster, &jobs, &config, &dir, true, Micros::from_secs(60))
                .unwrap_or_else(|e| panic!("lra {name} {}: {e:#}", scheduler.name()));
        }
    }
    check("lra", &out);
    let _ = std::fs::remove_dir_all(&out);
}
