//! Unit tests of `model.rs`.

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
    use gm_core::WakePolicy::{self, All, Indexed};
    // (arguments, constraints, heartbeat s, whole seconds and separated arrivals,
    // wake rule)
    type Row<'a> = (&'a [&'a str], ConstraintMode, f64, bool, WakePolicy);
    let table: &[Row] = &[
        (&[], ConstraintMode::PerJob, 10.0, false, Indexed),
        (
            &["--preset", "megha3"],
            ConstraintMode::PerTask,
            5.0,
            true,
            All,
        ),
        (
            &[
                "--preset",
                "megha3",
                "--heartbeat-s",
                "10",
                "--constraints",
                "none",
                "--wake",
                "indexed",
            ],
            ConstraintMode::None,
            10.0,
            true,
            Indexed,
        ),
        (
            &["--whole-second-durations", "--separate-identical-arrivals"],
            ConstraintMode::PerJob,
            10.0,
            true,
            Indexed,
        ),
        (&["--wake", "all"], ConstraintMode::PerJob, 10.0, false, All),
    ];
    for (args, constraints, heartbeat, adjusts, wake) in table {
        let m = model(args);
        assert_eq!(m.constraint_mode(), *constraints, "{args:?}");
        assert_eq!(m.heartbeat_secs(), *heartbeat, "{args:?}");
        assert_eq!(m.wake_policy(), *wake, "{args:?}");
        let config = m
            .sim_config(crate::sim::SchedulerKind::Megha, 1)
            .expect("a valid model");
        assert_eq!(config.wake, *wake, "{args:?}: the simulator's rule");
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

#[test]
fn a_cost_model_file_sets_the_costs_and_the_network_delay_unless_the_flag_is_given() {
    let dir = std::env::temp_dir().join(format!("loadgen-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("costs.toml");
    let mut costs = sim::CostModel::zero();
    costs.gm_decision_ns = 1_500;
    costs.network_delay_ns = Some(12_345);
    std::fs::write(&file, toml::to_string(&costs).unwrap()).unwrap();
    let path = file.to_str().unwrap();

    let defaults = model(&[]).sim_config(SchedulerKind::Megha, 1).unwrap();
    assert_eq!(defaults.costs, sim::CostModel::default());
    assert_eq!(defaults.network_delay, Micros(500));

    let from_file = model(&["--cost-model", path])
        .sim_config(SchedulerKind::Megha, 1)
        .unwrap();
    assert_eq!(from_file.costs, costs);
    assert_eq!(from_file.network_delay, Micros(13), "12,345 ns rounds up");

    let flag_wins = model(&["--cost-model", path, "--network-delay-ms", "2"])
        .sim_config(SchedulerKind::Megha, 1)
        .unwrap();
    assert_eq!(flag_wins.network_delay, Micros(2000));

    std::fs::write(&file, "gm_decision_ns = 1\nbogus = 2\n").unwrap();
    let err = model(&["--cost-model", path])
        .sim_config(SchedulerKind::Megha, 1)
        .unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("bogus"), "names the bad field: {text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_cost_model_publishes_lm_state_on_change_unless_a_flag_or_the_preset_says_otherwise() {
    let path = "costs.toml"; // never read: only the mode is asked for
    let mode = |args: &[&str]| model(args).lm_publish_mode();
    assert_eq!(mode(&[]), LmPublishMode::Heartbeat);
    assert_eq!(mode(&["--cost-model", path]), LmPublishMode::Changes);
    assert_eq!(
        mode(&["--cost-model", path, "--lm-publish", "heartbeat"]),
        LmPublishMode::Heartbeat
    );
    assert_eq!(
        mode(&["--cost-model", path, "--preset", "megha3"]),
        LmPublishMode::Heartbeat,
        "the peer's simulator publishes at heartbeats only"
    );
    assert_eq!(mode(&["--lm-publish", "changes"]), LmPublishMode::Changes);
}

#[test]
fn the_default_cost_model_charges_what_the_microsecond_model_did() {
    let c = sim::CostModel::default();
    // 2 us + ceil(words * 5 ns), and 10 us + 3 us per request + ceil(nodes * 5 ns).
    assert_eq!(c.gm_decision(0), Micros(2));
    assert_eq!(c.gm_decision(201), Micros(4));
    assert_eq!(c.lm_batch(0, 0), Micros(10));
    assert_eq!(c.lm_batch(7, 2001), Micros(10 + 21 + 11));
}

#[test]
fn the_job_order_defaults_to_fifo_and_bad_values_name_the_flag() {
    use gm_core::carbyne::JobOrder;
    let config = model(&[]).order_config().expect("defaults");
    assert_eq!(config.order, JobOrder::Fifo);
    let config = model(&["--order", "carbyne", "--altruism", "0.5"])
        .order_config()
        .expect("valid");
    assert_eq!((config.order, config.altruism), (JobOrder::Carbyne, 0.5));
    let err = model(&["--altruism", "1.5"]).order_config().unwrap_err();
    assert!(err.to_string().contains("--altruism"), "{err}");
    let err = model(&["--replan-ms=-1"]).order_config().unwrap_err();
    assert!(err.to_string().contains("--replan-ms"), "{err}");
    let bad = Cli::try_parse_from(["simulate", "--order", "lifo"])
        .err()
        .expect("refused");
    assert!(bad.to_string().contains("unknown job order"), "{bad}");
}

/// `--soft-ilp-ms` reaches the GMs' configuration, checked as the GM checks its
/// own flag (the designated GM alone uses it: gm-core).
#[test]
fn the_soft_ilp_cap_reaches_the_simulated_gms_and_is_checked() {
    let config = |args: &[&str]| model(args).sim_config(SchedulerKind::Megha, 2);
    assert_eq!(config(&[]).expect("default").soft_ilp_ms, None);
    let set = config(&["--soft-ilp-ms", "250"]).expect("valid");
    assert_eq!(set.soft_ilp_ms, Some(250));
    for bad in ["0", "60001", "soon"] {
        let argv = ["simulate", "--soft-ilp-ms", bad];
        let err = Cli::try_parse_from(argv).err().expect(bad).to_string();
        assert!(err.contains("--soft-ilp-ms"), "{bad}: {err}");
    }
}
