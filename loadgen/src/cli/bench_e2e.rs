//! `loadgen bench-e2e`: the sustained rate of synthetic short tasks at which the p99
//! allocation overhead stays under a target (10 ms), embedded or against running
//! services. Prints figures; asserts nothing.
//!
//! Allocation overhead = allocation time of tasks that never waited for free
//! resources (no `Requeued` event): with the default cluster far larger than the
//! offered load, almost none wait, and what is measured is submission, scheduling,
//! messaging, validation and the worker hop.

use super::replay::{in_actix_system, replay_embedded};
use crate::replay::driver::{replay, ReplayOptions, ReplayResult};
use crate::replay::embedded::EmbeddedConfig;
use crate::replay::net;
use anyhow::{bail, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::{Micros, Resources, TaskId, TaskSpec};
use megha_sim::report::Distribution;
use megha_sim::sim::workload::Job;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchE2eArgs {
    /// Benchmark running services at these GM URLs (comma-separated) instead of an
    /// embedded cluster.
    #[arg(long, value_delimiter = ',', value_name = "URL,...")]
    pub gm: Vec<String>,
    /// RabbitMQ URL (services mode).
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub amqp: String,
    /// The cluster whose events to read (its exchanges are NAME.events; the same
    /// --cluster-name as the services). Default megha.
    #[arg(
        long,
        env = "MEGHA_CLUSTER_NAME",
        default_value = "megha",
        value_name = "NAME"
    )]
    pub cluster_name: common::ClusterName,
    /// Services mode: file holding the API token (or the token in MEGHA_TOKEN).
    #[arg(long, env = "MEGHA_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Services mode: a CA (PEM) to trust for https:// GMs and amqps:// brokers.
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE")]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Offered rates to try, tasks per second.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2500,5000,10000,20000"
    )]
    pub rates: Vec<f64>,
    /// Seconds of load at each rate.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Tasks per job (one submission).
    #[arg(long, default_value_t = 10)]
    pub job_size: usize,
    /// Duration of each task, ms.
    #[arg(long, default_value_t = 20.0)]
    pub task_ms: f64,
    /// CPU millicores per task.
    #[arg(long, default_value_t = 100)]
    pub task_cpu_millis: u64,
    /// The p99 overhead target, ms.
    #[arg(long, default_value_t = 10.0)]
    pub target_ms: f64,
    /// Embedded cluster: GMs.
    #[arg(long, default_value_t = 2)]
    pub gms: u16,
    /// Embedded cluster: LMs.
    #[arg(long, default_value_t = 2)]
    pub lms: u16,
    /// Embedded cluster: nodes per partition.
    #[arg(long, default_value_t = 16)]
    pub partition_size: usize,
    /// Embedded cluster: cores per node.
    #[arg(long, default_value_t = 8)]
    pub node_cpus: u64,
    /// Embedded cluster: worker actors per LM.
    #[arg(long, default_value_t = 2)]
    pub workers_per_lm: u32,
}

fn synthetic_jobs(args: &BenchE2eArgs, rate: f64) -> Vec<Job> {
    let tasks = (rate * args.seconds).round() as usize;
    let size = args.job_size.max(1);
    let jobs = tasks.div_ceil(size);
    (0..jobs)
        .map(|k| Job {
            id: k as u64,
            dag: None,
            arrival: Micros::from_secs_f64(k as f64 * size as f64 / rate),
            tasks: (0..size)
                .map(|i| {
                    TaskSpec::short(
                        TaskId::new(k as u64, i as u32),
                        Resources::new(args.task_cpu_millis, 64),
                        Micros::from_secs_f64(args.task_ms / 1000.0),
                    )
                })
                .collect(),
        })
        .collect()
}

struct Row {
    rate: f64,
    achieved: f64,
    tasks: usize,
    lost: usize,
    waited: usize,
    overhead: Distribution,
}

fn row(rate: f64, r: &ReplayResult) -> Row {
    let recs = &r.outcome.records;
    let first = recs.iter().map(|x| x.arrival).min().unwrap_or_default();
    let last = recs
        .iter()
        .filter_map(|x| x.start)
        .max()
        .unwrap_or_default();
    let started = recs.iter().filter(|x| x.start.is_some()).count();
    Row {
        rate,
        achieved: started as f64 / last.since(first).as_secs_f64().max(1e-9),
        tasks: recs.len(),
        lost: r.unfinished.len() + r.unsubmitted.len(),
        waited: r.waited_for_resources,
        overhead: Distribution::of(r.overhead_s.clone()),
    }
}

fn print(rows: &[Row], target_ms: f64, mode: &str) {
    println!("bench-e2e ({mode}): p99 allocation overhead target {target_ms} ms");
    println!(
        "{:>10} {:>10} {:>8} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9}  verdict",
        "offered/s",
        "started/s",
        "tasks",
        "lost",
        "waited",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms"
    );
    let mut best = None;
    for r in rows {
        let ok = r.lost == 0 && r.overhead.p99 * 1000.0 < target_ms && r.overhead.count > 0;
        if ok {
            best = Some(r.rate);
        }
        println!(
            "{:>10.0} {:>10.0} {:>8} {:>6} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3}  {}",
            r.rate,
            r.achieved,
            r.tasks,
            r.lost,
            r.waited,
            r.overhead.p50 * 1000.0,
            r.overhead.p99 * 1000.0,
            r.overhead.p99_9 * 1000.0,
            r.overhead.max * 1000.0,
            if ok { "ok" } else { "over target" }
        );
    }
    match best {
        Some(rate) => println!("highest offered rate meeting the target: {rate:.0} tasks/s"),
        None => println!("no rate met the target"),
    }
}

pub fn run(args: BenchE2eArgs) -> Result<()> {
    let token = service_kit::auth::user_token(args.token_file.as_deref())?;
    if let Some(ca) = &args.tls_ca_file {
        service_kit::tls::trust_ca(ca)?;
    }
    if args.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) || args.seconds <= 0.0 {
        bail!("--rates and --seconds must be positive");
    }
    let opts = |gms: usize| ReplayOptions {
        speedup: 1.0,
        rate_cap: None,
        timeout: Duration::from_secs(30),
        quiet: true,
        gms,
        queues: None,
        gangs: None,
    };
    let mut rows = Vec::new();
    if args.gm.is_empty() {
        let cfg = EmbeddedConfig {
            cluster: ClusterSpec::generate(
                args.gms,
                args.lms,
                args.partition_size,
                Resources::cores(args.node_cpus, 65536),
                42,
            ),
            workers_per_lm: args.workers_per_lm,
            heartbeat: Micros::from_millis(1000),
            publish_min_interval: Duration::from_millis(2),
            batch_size: 100,
            max_queued: 10_000_000,
            fairness: None,
            mercury: None,
            designated_gm: common::GmId(0),
            exec: None,
        };
        eprintln!(
            "embedded cluster: {} nodes x {} cores",
            cfg.cluster.node_count(),
            args.node_cpus
        );
        for &rate in &args.rates {
            let jobs = synthetic_jobs(&args, rate);
            let result = in_actix_system(replay_embedded(&cfg, &jobs, &opts(args.gms as usize)))?;
            rows.push(row(rate, &result));
        }
        print(&rows, args.target_ms, "embedded");
    } else {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        // The broker password may come from MEGHA_AMQP_PASSWORD_FILE, as for replay.
        let amqp = service_kit::amqp::resolve_url(args.amqp.clone())?;
        for &rate in &args.rates {
            let jobs = synthetic_jobs(&args, rate);
            let result = runtime.block_on(async {
                let queue = format!(
                    "bench.{}.{}",
                    std::process::id(),
                    service_kit::clock::now().0
                );
                let cluster =
                    service_kit::cluster::Cluster::new(args.cluster_name.clone(), "loadgen");
                let (events, status, subscription) =
                    net::amqp_events(amqp.clone(), cluster, queue.clone());
                for _ in 0..100 {
                    if status.is_connected() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                if !status.is_connected() {
                    subscription.close().await;
                    anyhow::bail!(
                        "the event subscription (--amqp {}) did not connect in 10 s: no task could be timed (check the broker user, password and vhost)",
                        service_kit::amqp::redact(&amqp)
                    );
                }
                let client =
                    service_kit::auth::user_client(Some(Duration::from_secs(30)), token.as_deref());
                let submit = net::http_submitter(args.gm.clone(), client, None, &args.cluster_name);
                let r = replay(&jobs, submit, events, &opts(args.gm.len())).await;
                subscription.close().await;
                let _ = service_kit::amqp::delete_queue(&amqp, &args.cluster_name, &queue).await;
                Ok(r)
            })?;
            rows.push(row(rate, &result));
        }
        print(&rows, args.target_ms, "services over HTTP + RabbitMQ");
    }
    Ok(())
}
