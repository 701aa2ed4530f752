//! The simulators' command line: one file per subcommand, and [`Command`], the
//! subcommands themselves. Both binaries take them: `megha-sim` (this crate, no
//! service code linked) and `loadgen`, which adds what needs the services
//! (`replay`, `embedded`, `dev`, the end-to-end benches, `calibrate`, the cluster's
//! credentials), so `loadgen simulate ...` and `megha-sim simulate ...` are one command.

use anyhow::Result;
use clap::Subcommand;

pub mod bench;
pub mod bench_alsched;
pub mod bench_carbyne;
pub mod bench_targets;
pub mod bench_topk;
pub mod bench_wake;
pub mod experiment;
pub mod faults;
pub mod lra;
pub mod report;
pub mod simulate;
pub mod trace;
pub mod validate;

/// The subcommands that need only the simulators and the scheduling cores.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Replay a trace in the deterministic simulator (Megha, Sparrow or centralized)
    /// and write DIR/tasks.csv and DIR/summary.json.
    Simulate(Box<simulate::SimulateArgs>),
    /// Measure simulator speed and memory: YH1_sub on 1,000 to 50,000 nodes, the
    /// overload shape at 10^4..10^6 tasks on 50,000 nodes (prints figures and ratios).
    Bench(bench::BenchArgs),
    /// Trace tools: statistics, conversion to `.tr`, streaming benchmark.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Long-running applications (MEDEA): placement-quality experiment and latency
    /// benchmark of the ILP, NC, TP and J-KUBE placers.
    #[command(subcommand)]
    Lra(lra::LraCommand),
    /// Per-task cost of QUEUEABLE top-k placement: the GM's sorted index against a
    /// scan of every node, at 10,000 and 50,000 nodes (prints figures).
    BenchTopk(bench_topk::BenchTopKArgs),
    /// What utility trees (alsched soft constraints) cost a GM's pass: 10,000
    /// pending tasks on 10,000 nodes, with and without trees, empty and full.
    BenchAlsched(bench_alsched::BenchAlschedArgs),
    /// Time per job-ordering decision (one plan over every pending task) at 10,000
    /// and 50,000 pending tasks: Carbyne against DRF, Tetris and SJF (prints figures).
    BenchCarbyne(bench_carbyne::BenchCarbyneArgs),
    /// Cost of retrying blocked tasks under overload: the full retry (--wake all)
    /// against the wake index (--wake indexed), CPU seconds and retries (prints
    /// figures).
    BenchWake(bench_wake::BenchWakeArgs),
    /// Seeded fault injection (crashes, partitions, lost/duplicated/delayed messages,
    /// refusing workers, broker outages, clock skew) on small simulated clusters,
    /// invariants checked after every event; prints seeds/s and every violation with
    /// its seed (`--replay SEED` prints its trace).
    Faults(faults::FaultsArgs),
    /// Named experiments, one command each (writes DIR/summary.json, prints a
    /// table): `carbyne` (DRF, Tetris, SJF and Carbyne on TPC-H DAG jobs).
    #[command(subcommand)]
    Experiment(experiment::ExperimentCommand),
    /// Plots (SVG) and one HTML page from the output directories of simulate, replay
    /// or embedded: allocation-time CDFs overlaid, the delay breakdown, utilisation
    /// and demand over time, queue shares and Jain's index.
    Report(report::ReportArgs),
}

/// Runs one simulator subcommand.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Simulate(args) => simulate::run(*args),
        Command::Bench(args) => bench::run(args),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Lra(cmd) => lra::run(cmd),
        Command::BenchTopk(args) => bench_topk::run(args),
        Command::BenchAlsched(args) => bench_alsched::run(args),
        Command::BenchCarbyne(args) => bench_carbyne::run(args),
        Command::BenchWake(args) => bench_wake::run(args),
        Command::Faults(args) => faults::run(args),
        Command::Experiment(cmd) => experiment::run(cmd),
        Command::Report(args) => report::run(args),
    }
}

/// Exit status and message of a subcommand's result, as both binaries report it.
pub fn exit_code(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
