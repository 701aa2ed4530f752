//! The trace options adapter: window, first-N, sampling by seed, speed-up, scaling,
//! and errors naming the flag.

#![allow(clippy::unwrap_used)] // tests may unwrap

use clap::Parser;
use common::{Micros, Resources};
use loadgen::trace::options::{ResourceScale, Sampling, SpeedUp, TraceOptions, TraceOptionsArgs};
use loadgen::trace::{TraceError, TraceJob, TraceTask};

fn job(id: u64, arrival_s: u64) -> TraceJob {
    TraceJob {
        id,
        arrival: Micros::from_secs(arrival_s),
        queue: None,
        stages: Vec::new(),
        tasks: vec![TraceTask {
            duration: Micros::from_secs(10),
            resources: Some(Resources::new(4000, 1000)),
            constraints: None,
            stage: None,
        }],
    }
}

fn input(n: u64) -> impl Iterator<Item = Result<TraceJob, TraceError>> {
    (0..n).map(|i| Ok(job(i, i * 10)))
}

fn run(opts: &TraceOptions, n: u64) -> Vec<TraceJob> {
    opts.apply(input(n)).unwrap().map(Result::unwrap).collect()
}

#[test]
fn window_keeps_half_open_range_and_rebases() {
    let opts = TraceOptions {
        window_start: Some(Micros::from_secs(100)),
        window_end: Some(Micros::from_secs(150)),
        ..TraceOptions::default()
    };
    let jobs = run(&opts, 100);
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![10, 11, 12, 13, 14]
    );
    assert_eq!(jobs[0].arrival, Micros::ZERO);
    assert_eq!(jobs[4].arrival, Micros::from_secs(40));
}

#[test]
fn first_n_stops_reading() {
    let opts = TraceOptions {
        first_jobs: Some(3),
        ..TraceOptions::default()
    };
    let mut pulled = 0;
    let counting = input(1000).inspect(|_| pulled += 1);
    let jobs: Vec<_> = opts.apply(counting).unwrap().collect();
    assert_eq!(jobs.len(), 3);
    assert_eq!(pulled, 3, "the rest of the input is not read");
}

#[test]
fn sampling_is_deterministic_by_seed() {
    let with_seed = |seed| TraceOptions {
        sample: Some(Sampling {
            fraction: 0.3,
            seed,
        }),
        ..TraceOptions::default()
    };
    let ids = |seed| {
        run(&with_seed(seed), 2000)
            .iter()
            .map(|j| j.id)
            .collect::<Vec<_>>()
    };
    let a = ids(7);
    assert_eq!(a, ids(7));
    assert_ne!(a, ids(8));
    assert!((500..700).contains(&a.len()), "{}", a.len());
}

#[test]
fn speedup_divides_arrivals_and_optionally_durations() {
    let opts = |durations| TraceOptions {
        speedup: Some(SpeedUp {
            factor: 4.0,
            compress_durations: durations,
        }),
        ..TraceOptions::default()
    };
    let jobs = run(&opts(false), 3);
    assert_eq!(jobs[2].arrival, Micros::from_secs(5));
    assert_eq!(jobs[2].tasks[0].duration, Micros::from_secs(10));
    let jobs = run(&opts(true), 3);
    assert_eq!(jobs[2].tasks[0].duration, Micros(2_500_000));
}

#[test]
fn resource_scaling_presets_and_factors() {
    let opts = TraceOptions {
        scale: ResourceScale::MEGHA,
        ..TraceOptions::default()
    };
    assert_eq!(
        run(&opts, 1)[0].tasks[0].resources,
        Some(Resources::new(10, 20))
    );
    let opts = parse(&["--scale", "megha", "--cpu-scale", "2"]).unwrap();
    assert_eq!(
        run(&opts, 1)[0].tasks[0].resources,
        Some(Resources::new(20, 20))
    );
    let opts = TraceOptions {
        scale: ResourceScale {
            cpu: 1e-9,
            memory: 0.5,
        },
        ..TraceOptions::default()
    };
    assert_eq!(
        run(&opts, 1)[0].tasks[0].resources,
        Some(Resources::new(1, 500)),
        "never below 1"
    );
}

#[derive(Debug, Parser)]
struct Wrapper {
    #[command(flatten)]
    args: TraceOptionsArgs,
}

fn parse(argv: &[&str]) -> Result<TraceOptions, String> {
    let mut full = vec!["x"];
    full.extend_from_slice(argv);
    Wrapper::try_parse_from(full)
        .map_err(|e| e.to_string())?
        .args
        .into_options(99)
        .map_err(|e| e.to_string())
}

#[test]
fn args_convert_and_errors_name_the_flag() {
    let opts = parse(&[
        "--window-start",
        "10",
        "--window-end",
        "20",
        "--sample",
        "0.5",
        "--speedup",
        "2",
        "--speedup-durations",
        "--synthesize-constraints",
    ])
    .unwrap();
    assert_eq!(opts.window_start, Some(Micros::from_secs(10)));
    assert_eq!(
        opts.sample,
        Some(Sampling {
            fraction: 0.5,
            seed: 99
        }),
        "clock seed used"
    );
    assert!(opts.describe().contains("seed 99"), "{}", opts.describe());
    assert_eq!(
        opts.speedup,
        Some(SpeedUp {
            factor: 2.0,
            compress_durations: true
        })
    );
    assert!(opts.synthesize_constraints);

    let cases: [(&[&str], &str); 7] = [
        (
            &["--window-start", "20", "--window-end", "10"],
            "--window-end:",
        ),
        (&["--window-start", "-1"], "--window-start:"),
        (&["--first-jobs", "0"], "--first-jobs:"),
        (&["--sample", "1.5"], "--sample:"),
        (&["--speedup", "0"], "--speedup:"),
        (&["--mem-scale", "-2"], "--mem-scale:"),
        (&["--sample-seed", "3"], "--sample-seed:"),
    ];
    for (argv, flag) in cases {
        let err = parse(argv).unwrap_err();
        assert!(err.starts_with(flag), "{argv:?}: {err}");
    }
}

#[test]
fn reader_errors_pass_through() {
    let items = vec![
        Ok(job(0, 0)),
        Err(TraceError::Parse {
            path: "p".into(),
            line: 3,
            field: "f".into(),
            reason: "r".into(),
        }),
    ];
    let out: Vec<_> = TraceOptions::default()
        .apply(items.into_iter())
        .unwrap()
        .collect();
    assert!(out[0].is_ok());
    assert_eq!(
        out[1].as_ref().unwrap_err().to_string(),
        "p:3: field `f`: r"
    );
}
