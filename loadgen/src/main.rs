//! `loadgen`: simulate, benchmark and replay workloads against the scheduler.

use clap::{Parser, Subcommand};
use loadgen::cli;

// mimalloc: the simulator allocates and frees a message or an output vector per event;
// glibc malloc and free were 12% of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Load generator and data-center simulator for the Megha federated scheduler.
///
/// Start with `loadgen simulate --help`: it replays a trace on a simulated cluster
/// with the real scheduling cores and writes per-task timings and a summary.
#[derive(Parser, Debug)]
#[command(name = "loadgen", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a trace in the deterministic simulator (Megha, Sparrow or centralized)
    /// and write DIR/tasks.csv and DIR/summary.json.
    Simulate(Box<cli::simulate::SimulateArgs>),
    /// Measure simulator speed and memory: YH1_sub on 1,000 to 50,000 nodes, the
    /// overload shape at 10^4..10^6 tasks on 50,000 nodes (prints figures and ratios).
    Bench(cli::bench::BenchArgs),
    /// Trace tools: statistics, conversion to `.tr`, streaming benchmark.
    #[command(subcommand)]
    Trace(cli::trace::TraceCommand),
    /// Long-running applications (MEDEA): placement-quality experiment and latency
    /// benchmark of the ILP, NC, TP and J-KUBE placers.
    #[command(subcommand)]
    Lra(cli::lra::LraCommand),
    /// Replay a trace against running GMs over HTTP, read task events from RabbitMQ,
    /// and write DIR/tasks.csv and DIR/summary.json. Exits non-zero, listing them, if
    /// any submitted task never finished.
    Replay(cli::replay::ReplayArgs),
    /// Start GMs, LMs and workers in this process (in-memory links, nothing to
    /// install), replay a trace (default data/traces/YH_small.tr, 50x faster) and write
    /// the same reports as `replay`.
    Embedded(cli::replay::EmbeddedArgs),
    /// A whole cluster in this process that stays up (one GM, one LM, one worker,
    /// exec tasks, no RabbitMQ): the real API and dashboard on one loopback port,
    /// for trying `megha` in one command (`megha dev` runs this). Ctrl-C stops it.
    Dev(cli::dev::DevArgs),
    /// Find the sustained rate of short tasks at which the p99 allocation overhead
    /// stays under 10 ms, embedded or against running services (prints figures).
    BenchE2e(cli::bench_e2e::BenchE2eArgs),
    /// Cost of exec tasks against synthetic ones: start latency at the worker, and
    /// submit-to-running of one-task jobs against running services with --gm
    /// (prints figures).
    BenchExec(cli::bench_exec::BenchExecArgs),
    /// Per-task cost of QUEUEABLE top-k placement: the GM's sorted index against a
    /// scan of every node, at 10,000 and 50,000 nodes (prints figures).
    BenchTopk(cli::bench_topk::BenchTopKArgs),
    /// What utility trees (alsched soft constraints) cost a GM's pass: 10,000
    /// pending tasks on 10,000 nodes, with and without trees, empty and full.
    BenchAlsched(cli::bench_alsched::BenchAlschedArgs),
    /// Time per job-ordering decision (one plan over every pending task) at 10,000
    /// and 50,000 pending tasks: Carbyne against DRF, Tetris and SJF (prints figures).
    BenchCarbyne(cli::bench_carbyne::BenchCarbyneArgs),
    /// Cost of retrying blocked tasks under overload: the full retry (--wake all)
    /// against the wake index (--wake indexed), CPU seconds and retries (prints
    /// figures).
    BenchWake(cli::bench_wake::BenchWakeArgs),
    /// Measure the services' processing costs on this machine and write a cost model
    /// for `simulate --cost-model`; `--validate FILE` compares the simulator with
    /// the embedded services on one trace (prints figures).
    Calibrate(cli::calibrate::CalibrateArgs),
    /// Seeded fault injection (crashes, partitions, lost/duplicated/delayed messages,
    /// refusing workers, broker outages, clock skew) on small simulated clusters,
    /// invariants checked after every event; prints seeds/s and every violation with
    /// its seed (`--replay SEED` prints its trace).
    Faults(cli::faults::FaultsArgs),
    /// Named experiments, one command each (writes DIR/summary.json, prints a
    /// table): `carbyne` (DRF, Tetris, SJF and Carbyne on TPC-H DAG jobs).
    #[command(subcommand)]
    Experiment(cli::experiment::ExperimentCommand),
    /// Plots (SVG) and one HTML page from the output directories of simulate, replay
    /// or embedded: allocation-time CDFs overlaid, the delay breakdown, utilisation
    /// and demand over time, queue shares and Jain's index.
    Report(cli::report::ReportArgs),
    /// A cluster's private CA and certificates (rcgen; for images without openssl):
    /// server certificates per role, and the worker issuer (workers issue their own
    /// certificate at start with --tls-issuer-cert). See docs/security.md.
    Certs(cli::certs::CertsArgs),
    /// The cluster's credential files (gm.toml or gm-N.toml, lm.toml or lm-N.toml,
    /// worker.toml): each an ed25519 key, with which the process signs its internal
    /// requests, certified by the cluster's authority (ca-key)
    /// (scripts/make-role-credentials.sh runs this). See docs/security.md.
    RoleCredentials(cli::certs::RoleCredentialsArgs),
    /// A cluster's broker users and what each may do on the broker (only LMs write
    /// the state exchange, only LMs and GMs the events, observers read events):
    /// --permissions KIND for rabbitmqctl, or a definitions file (RabbitMQ's
    /// load_definitions) with --user NAME=KIND=PASSWORD_FILE.
    BrokerUsers(cli::certs::BrokerUsersArgs),
    /// GET URL/healthz (http:// or https://): exit 0 when the service says
    /// "status": "ok" (and "ready": true with --ready), else 1 with the reason.
    Healthcheck(cli::certs::HealthcheckArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => cli::simulate::run(*args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Trace(cmd) => cli::trace::run(cmd),
        Command::Lra(cmd) => cli::lra::run(cmd),
        Command::Replay(args) => cli::replay::run_replay(args),
        Command::Embedded(args) => cli::replay::run_embedded(args),
        Command::Dev(args) => cli::dev::run(args),
        Command::BenchE2e(args) => cli::bench_e2e::run(args),
        Command::BenchExec(args) => cli::bench_exec::run(args),
        Command::BenchTopk(args) => cli::bench_topk::run(args),
        Command::BenchAlsched(args) => cli::bench_alsched::run(args),
        Command::BenchCarbyne(args) => cli::bench_carbyne::run(args),
        Command::BenchWake(args) => cli::bench_wake::run(args),
        Command::Calibrate(args) => cli::calibrate::run(args),
        Command::Faults(args) => cli::faults::run(args),
        Command::Experiment(cmd) => cli::experiment::run(cmd),
        Command::Report(args) => cli::report::run(args),
        Command::Certs(args) => cli::certs::run_certs(args),
        Command::RoleCredentials(args) => cli::certs::run_role_credentials(args),
        Command::BrokerUsers(args) => cli::certs::run_broker_users(args),
        Command::Healthcheck(args) => cli::certs::run_healthcheck(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn every_subcommand_has_consistent_arguments() {
        Cli::command().debug_assert();
    }
}
