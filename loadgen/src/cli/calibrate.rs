//! `loadgen calibrate`: measures what the services' code paths cost on this machine
//! and writes a cost model for `loadgen simulate --cost-model FILE`; with
//! `--validate FILE`, replays one trace in embedded mode and simulates it with that
//! model, and prints how close the allocation-time distributions are.
//!
//! The processing costs come from a calibration simulation with the probe on
//! ([`megha_sim::sim::probe`]): the simulator calls the very cores the services run, so
//! timing each `step` on a realistic run (a moderate trace on a 1,000-node cluster)
//! times the GM's decisions and bit-vector scans, its snapshot apply, the LM's batch
//! validation and snapshot building, its worker reports and the worker's start. The
//! message costs come from micro-measurements: bincode encode + decode of an LM
//! snapshot (the services' internal links), one actix mailbox hop (the embedded
//! mode's links) and one loopback TCP hop. What the tight loops cannot see (an
//! actor's wake-up on a busy machine, the worker actor's path to a started task, the
//! submission) comes from a short embedded run ([`super::calibrate_embedded`]): the
//! network delay, the client's submission, the GM's real per-decision cost, and the
//! worker's start as a distribution.

use anyhow::{Context, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::{Micros, Resources};
use megha_sim::cli::validate;
use megha_sim::sim::probe::Probe;
use megha_sim::sim::workload::{self, ConstraintMode, WorkloadOptions};
use megha_sim::sim::{self, CostModel, SimConfig};
use megha_sim::trace::TraceFormat;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Where to write the cost model (TOML, nanoseconds per event).
    #[arg(long, default_value = "costs.toml", value_name = "FILE")]
    pub out: PathBuf,
    /// The trace of the calibration simulation.
    #[arg(long, default_value = "data/traces/YH1_sub.tr", value_name = "FILE")]
    pub trace: PathBuf,
    /// Nodes per partition of the calibration cluster (5 GMs x 5 LMs x this).
    #[arg(long, default_value_t = 40, value_name = "P")]
    pub partition_size: usize,
    /// Take the worker's start, the message hops, the submission and the GM's
    /// per-decision cost from a short embedded run (a second or two, see
    /// `calibrate_embedded`); false: the probe's timings and the tight-loop hop alone.
    #[arg(
        long,
        alias = "embedded-worker-start",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub embedded: bool,
    /// What the embedded part replays. `spaced`: jobs of 1 to 48 tasks, one a
    /// second, on 80 idle one-core nodes (each job measured alone). `check`: the
    /// trace, speed-up, cluster, heartbeat and publication interval of the check
    /// (`--check-*`, as `--validate` replays them), under a seed of its own
    /// (`--seed` + 1,000,000): the costs at the load the model is to predict, since
    /// an actor's wake-up and hop cost move with how busy the roles are
    /// (docs/simulator-performance.md).
    #[arg(long, value_enum, default_value_t = EmbeddedWorkload::Spaced, value_name = "W")]
    pub embedded_workload: EmbeddedWorkload,
    /// Round trips timed for each message hop.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub hops: u32,
    /// Instead of measuring, check the cost model in FILE: replay a trace in
    /// embedded mode, simulate it with the model (and with the built-in defaults),
    /// and print the allocation-time percentiles and the KS distance.
    #[arg(long, value_name = "FILE")]
    pub validate: Option<PathBuf>,
    #[command(flatten)]
    pub check: validate::ValidateArgs,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// What the embedded calibration run replays (`--embedded-workload`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddedWorkload {
    Spaced,
    Check,
}

/// Message costs measured outside the simulation.
struct Hops {
    /// One-way actix mailbox hop (request + reply / 2).
    in_memory_ns: u64,
    /// One-way loopback TCP hop of a 256-byte message.
    loopback_ns: u64,
    /// bincode encode + decode of one LM snapshot, and its nodes.
    codec_ns: u64,
    codec_nodes: u64,
}

pub fn run(args: CalibrateArgs) -> Result<()> {
    if let Some(file) = &args.validate {
        return validate::run(file, &args.check, args.seed);
    }
    if args.embedded && args.embedded_workload == EmbeddedWorkload::Check {
        validate::check_cluster(&args.check)?;
        args.seed
            .checked_add(super::calibrate_embedded::CHECK_WORKLOAD_SEED_OFFSET)
            .context("--seed is too large for the check workload's own seed (--seed + 1000000)")?;
    }
    println!("seed: {}", args.seed);
    let probe = calibration_run(&args)?;
    let hops = measure_hops(args.hops, args.partition_size)?;
    let mut model = fit(&probe, &hops);
    if args.embedded {
        let workload = match args.embedded_workload {
            EmbeddedWorkload::Spaced => None,
            EmbeddedWorkload::Check => Some(&args.check),
        };
        super::calibrate_embedded::calibrate(
            &args.check.check_out,
            args.seed,
            workload,
            hops.in_memory_ns,
            &mut model,
        )?;
    }
    print_figures(&probe, &hops, &model);
    let header = format!(
        "# Cost model measured by `loadgen calibrate` (trace {}, 5x5x{} nodes, seed {}).\n\
         # Nanoseconds per event; read by `loadgen simulate --cost-model FILE`.\n\
         # Informational: bincode encode+decode of a {}-node LM snapshot {} ns; \
         one loopback TCP hop {} ns; one actix mailbox hop {} ns (network_delay_ns).\n",
        args.trace.display(),
        args.partition_size,
        args.seed,
        hops.codec_nodes,
        hops.codec_ns,
        hops.loopback_ns,
        hops.in_memory_ns
    );
    let body = toml::to_string(&model).context("cannot serialise the cost model")?;
    std::fs::write(&args.out, header + &body)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("written to {}", args.out.display());
    Ok(())
}

/// Runs the calibration simulation with the probe on and returns its timings.
fn calibration_run(args: &CalibrateArgs) -> Result<Probe> {
    if args.partition_size == 0 {
        anyhow::bail!("--partition-size must be positive");
    }
    let trace = megha_sim::cli::simulate::read_trace(
        &args.trace,
        TraceFormat::Tr,
        Default::default(),
        args.seed,
    )?;
    let cluster = ClusterSpec::generate(
        5,
        5,
        args.partition_size,
        Resources::cores(1, 16384),
        args.seed,
    );
    let jobs = workload::build(
        &trace,
        &WorkloadOptions {
            default_task: Resources::cores(1, 1024),
            constraints: ConstraintMode::PerJob,
            seed: args.seed,
        },
    );
    let config = SimConfig {
        probe: true,
        seed: args.seed,
        ..SimConfig::default()
    };
    let started = Instant::now();
    let outcome = sim::run(&cluster, &jobs, &config, &mut |_, _| {});
    eprintln!(
        "calibration run: {} tasks on {} nodes in {:.2} s",
        outcome.records.len(),
        cluster.node_count(),
        started.elapsed().as_secs_f64()
    );
    outcome
        .probe
        .map(|p| *p)
        .context("the simulator returned no timings")
}

/// The cost model fitted to the timings.
fn fit(p: &Probe, hops: &Hops) -> CostModel {
    let round = |x: f64| x.round().max(0.0) as u64;
    let (decision, word) = p.gm_pass.fit_two();
    let snapshot_node = p.lm_tick.ns_per_a();
    let (batch, request) = p.lm_batch.fit_affine(snapshot_node);
    CostModel {
        gm_decision_ns: round(decision),
        gm_word_ns: round(word),
        gm_dispatch_ns: 0,
        gm_snapshot_node_ns: round(p.gm_snapshot.ns_per_a()),
        lm_batch_ns: round(batch),
        lm_request_ns: round(request),
        lm_snapshot_node_ns: round(snapshot_node),
        lm_report_ns: p.lm_report.median_ns(),
        worker_start_ns: p.worker_start.median_ns(),
        worker_start_quantiles_ns: Vec::new(),
        submit_ns: 0,
        worker_link_ns: None,
        sparrow_probe_ns: CostModel::default().sparrow_probe_ns,
        network_delay_ns: Some(hops.in_memory_ns),
        lm_fanout_ns: hops.in_memory_ns,
    }
}

fn print_figures(p: &Probe, hops: &Hops, m: &CostModel) {
    println!("{:<28} {:>10} {:>14}", "step", "samples", "median ns");
    for (name, s) in [
        ("GM pass", &p.gm_pass),
        ("GM snapshot apply", &p.gm_snapshot),
        ("LM launch batch", &p.lm_batch),
        ("LM heartbeat tick", &p.lm_tick),
        ("LM worker report", &p.lm_report),
        ("worker start", &p.worker_start),
    ] {
        println!("{name:<28} {:>10} {:>14}", s.len(), s.median_ns());
    }
    println!(
        "hops: actix mailbox {} ns, loopback TCP {} ns, bincode snapshot ({} nodes) {} ns",
        hops.in_memory_ns, hops.loopback_ns, hops.codec_nodes, hops.codec_ns
    );
    let d = CostModel::default();
    println!("{:<24} {:>12} {:>12}", "cost (ns)", "calibrated", "default");
    for (name, a, b) in [
        ("gm_decision_ns", m.gm_decision_ns, d.gm_decision_ns),
        ("gm_word_ns", m.gm_word_ns, d.gm_word_ns),
        (
            "gm_snapshot_node_ns",
            m.gm_snapshot_node_ns,
            d.gm_snapshot_node_ns,
        ),
        ("lm_batch_ns", m.lm_batch_ns, d.lm_batch_ns),
        ("lm_request_ns", m.lm_request_ns, d.lm_request_ns),
        (
            "lm_snapshot_node_ns",
            m.lm_snapshot_node_ns,
            d.lm_snapshot_node_ns,
        ),
        ("lm_report_ns", m.lm_report_ns, d.lm_report_ns),
        ("worker_start_ns", m.worker_start_ns, d.worker_start_ns),
        ("network_delay_ns", m.network_delay_ns.unwrap_or(0), 500_000),
    ] {
        println!("{name:<24} {a:>12} {b:>12}");
    }
}

/// Measures the message costs: an actix mailbox round trip, a loopback TCP round
/// trip, and bincode encode + decode of one LM snapshot.
fn measure_hops(n: u32, partition_size: usize) -> Result<Hops> {
    let n = n.max(1);
    let in_memory_ns = actix_hop(n)?;
    let loopback_ns = tcp_hop(n)?;
    let spec = ClusterSpec::generate(5, 5, partition_size, Resources::cores(1, 16384), 1);
    let mut lm = local_master::LocalMaster::new(
        &spec.lms[0],
        spec.gms,
        local_master::LmConfig {
            heartbeat_period: Micros::from_secs(10),
        },
        Micros::ZERO,
    );
    let snapshot = lm.snapshot(Micros::ZERO);
    let rounds = (n / 10).max(1);
    let started = Instant::now();
    for _ in 0..rounds {
        let bytes = common::codec::encode(&common::ClusterName::default(), &snapshot)
            .context("cannot encode a snapshot")?;
        let back: common::messages::LmSnapshot =
            common::codec::decode(&common::ClusterName::default(), &bytes)
                .context("cannot decode a snapshot")?;
        std::hint::black_box(back);
    }
    Ok(Hops {
        in_memory_ns,
        loopback_ns,
        codec_ns: (started.elapsed().as_nanos() / u128::from(rounds)) as u64,
        codec_nodes: snapshot.free.len() as u64,
    })
}

struct Echo;

impl actix::Actor for Echo {
    type Context = actix::Context<Self>;
}

#[derive(actix::Message)]
#[rtype(result = "u64")]
struct Ping(u64);

impl actix::Handler<Ping> for Echo {
    type Result = u64;
    fn handle(&mut self, msg: Ping, _: &mut Self::Context) -> u64 {
        msg.0
    }
}

/// One-way actix mailbox hop: half a request/reply round trip, median of batches.
fn actix_hop(n: u32) -> Result<u64> {
    use actix::Actor;
    let system = actix::System::new();
    let result = system.block_on(async move {
        let addr = Echo.start();
        for i in 0..1000 {
            addr.send(Ping(i)).await?;
        }
        let started = Instant::now();
        for i in 0..u64::from(n) {
            addr.send(Ping(i)).await?;
        }
        Ok::<u64, actix::MailboxError>((started.elapsed().as_nanos() / u128::from(n) / 2) as u64)
    });
    result.context("the echo actor stopped")
}

/// One-way loopback TCP hop of a 256-byte message (half a ping-pong round trip).
fn tcp_hop(n: u32) -> Result<u64> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind loopback")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 256];
        loop {
            if s.read_exact(&mut buf).is_err() {
                return Ok(());
            }
            s.write_all(&buf)?;
        }
    });
    let mut s = std::net::TcpStream::connect(addr).context("cannot connect over loopback")?;
    s.set_nodelay(true)?;
    let mut buf = [7u8; 256];
    let started = Instant::now();
    for _ in 0..n {
        s.write_all(&buf)?;
        s.read_exact(&mut buf)?;
    }
    let ns = (started.elapsed().as_nanos() / u128::from(n) / 2) as u64;
    drop(s);
    let _ = echo.join();
    Ok(ns)
}
