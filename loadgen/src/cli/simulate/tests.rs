//! Unit tests of `simulate.rs`.

use super::*;
use crate::trace::TraceTask;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    model: ModelArgs,
}

fn model(args: &[&str]) -> ModelArgs {
    let argv = std::iter::once("simulate").chain(args.iter().copied());
    Cli::try_parse_from(argv).expect("arguments parse").model
}

fn job(arrival_us: u64, durations_us: &[u64]) -> TraceJob {
    TraceJob {
        id: 0,
        arrival: Micros(arrival_us),
        queue: None,
        stages: Vec::new(),
        tasks: durations_us
            .iter()
            .map(|d| TraceTask::with_duration(Micros(*d)))
            .collect(),
    }
}

#[test]
fn the_megha3_preset_changes_only_the_defaults_not_given() {
    // (arguments, constraints, heartbeat s, whole seconds, separated arrivals)
    let table: &[(&[&str], ConstraintMode, f64, bool)] = &[
        (&[], ConstraintMode::PerJob, 10.0, false),
        (&["--preset", "megha3"], ConstraintMode::PerTask, 5.0, true),
        (
            &[
                "--preset",
                "megha3",
                "--heartbeat-s",
                "10",
                "--constraints",
                "none",
            ],
            ConstraintMode::None,
            10.0,
            true,
        ),
        (
            &["--whole-second-durations", "--separate-identical-arrivals"],
            ConstraintMode::PerJob,
            10.0,
            true,
        ),
    ];
    for (args, constraints, heartbeat, adjusts) in table {
        let m = model(args);
        assert_eq!(m.constraint_mode(), *constraints, "{args:?}");
        assert_eq!(m.heartbeat_secs(), *heartbeat, "{args:?}");
        let mut jobs = vec![job(1_000_000, &[2_700_000]), job(1_000_000, &[500_000])];
        m.adjust_trace(&mut jobs);
        let got: Vec<(u64, u64)> = jobs
            .iter()
            .map(|j| (j.arrival.0, j.tasks[0].duration.0))
            .collect();
        let want = match adjusts {
            true => vec![(1_000_000, 2_000_000), (1_010_000, 0)],
            false => vec![(1_000_000, 2_700_000), (1_000_000, 500_000)],
        };
        assert_eq!(got, want, "{args:?}");
    }
    let m = model(&["--preset", "megha3", "--whole-second-durations", "false"]);
    let mut jobs = vec![job(0, &[2_700_000]), job(0, &[1])];
    m.adjust_trace(&mut jobs);
    assert_eq!(
        jobs[0].tasks[0].duration,
        Micros(2_700_000),
        "explicit false wins"
    );
    assert_eq!(jobs[1].arrival, Micros(10_000));
}

#[test]
fn repeated_arrivals_move_by_a_hundredth_per_repeat_keyed_by_the_original_time() {
    let mut jobs: Vec<TraceJob> = [0, 0, 0, 5_000_000, 5_000_000, 7_000_000]
        .iter()
        .map(|a| job(*a, &[1]))
        .collect();
    separate_identical_arrivals(&mut jobs);
    let got: Vec<u64> = jobs.iter().map(|j| j.arrival.0).collect();
    assert_eq!(
        got,
        vec![0, 10_000, 20_000, 5_000_000, 5_010_000, 7_000_000]
    );
}
