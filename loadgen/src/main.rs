//! `loadgen`: simulate, benchmark and replay workloads against the scheduler.

use clap::{Parser, Subcommand};
use loadgen::cli;

// mimalloc: the simulator allocates and frees a message or an output vector per event;
// glibc malloc and free were 12% of its instructions.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Load generator and data-center simulator for the Megha federated scheduler.
///
/// The simulator subcommands are also the `megha-sim` binary (no service code).
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
    /// The simulators' subcommands (also the `megha-sim` binary, built without
    /// service code).
    #[command(flatten)]
    Sim(megha_sim::cli::Command),
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
    /// Measure the services' processing costs on this machine and write a cost model
    /// for `simulate --cost-model`; `--validate FILE` compares the simulator with
    /// the embedded services on one trace (prints figures).
    Calibrate(cli::calibrate::CalibrateArgs),
    /// A cluster's private CA and certificates (rcgen; for images without openssl):
    /// server certificates per role, and the worker issuer (workers issue their own
    /// certificate at start with --tls-issuer-cert). See docs/security.md.
    Certs(service_kit::admin::CertsArgs),
    /// The cluster's credential files (gm.toml or gm-N.toml, lm.toml or lm-N.toml,
    /// worker.toml): each an ed25519 key, with which the process signs its internal
    /// requests, certified by the cluster's authority (ca-key)
    /// (scripts/make-role-credentials.sh runs this). See docs/security.md.
    RoleCredentials(service_kit::admin::RoleCredentialsArgs),
    /// A cluster's broker users and what each may do on the broker (only LMs write
    /// the state exchange, only LMs and GMs the events, observers read events):
    /// --permissions KIND for rabbitmqctl, or a definitions file (RabbitMQ's
    /// load_definitions) with --user NAME=KIND=PASSWORD_FILE.
    BrokerUsers(service_kit::admin::BrokerUsersArgs),
    /// GET URL/healthz (http:// or https://): exit 0 when the service says
    /// "status": "ok" (and "ready": true with --ready), else 1 with the reason.
    Healthcheck(service_kit::admin::HealthcheckArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(command) => megha_sim::cli::run(command),
        Command::Replay(args) => cli::replay::run_replay(args),
        Command::Embedded(args) => cli::replay::run_embedded(args),
        Command::Dev(args) => cli::dev::run(args),
        Command::BenchE2e(args) => cli::bench_e2e::run(args),
        Command::BenchExec(args) => cli::bench_exec::run(args),
        Command::Calibrate(args) => cli::calibrate::run(args),
        Command::Certs(args) => service_kit::admin::run_certs(args),
        Command::RoleCredentials(args) => service_kit::admin::run_role_credentials(args),
        Command::BrokerUsers(args) => service_kit::admin::run_broker_users(args),
        Command::Healthcheck(args) => service_kit::admin::run_healthcheck(args),
    };
    megha_sim::cli::exit_code(result)
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
