//! `loadgen bench-topk`: what one QUEUEABLE placement costs a GM, finding the top-k
//! nodes by queuing-delay estimate with the sorted per-LM index against the scan of
//! every node it replaced, on generated clusters of 10,000 and 50,000 nodes. Both
//! run the same seeded tasks on identical views (each placement adds the task's work
//! to the chosen node's estimate, as a GM does) and must choose the same nodes.
//! Prints figures; asserts nothing but that agreement.

use anyhow::{bail, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::constraint_model::synthesize_task_constraints;
use common::rng::{seeded, streams, Rng};
use common::{Micros, Resources, TaskId, TaskSpec};
use gm_core::opportunistic::{top_k, top_k_scan, Candidate};
use gm_core::view::LmView;
use lm_core::{LmConfig, LocalMaster};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchTopKArgs {
    /// Cluster sizes to measure (nodes; 10 GMs x 10 LMs, equal partitions).
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    pub nodes: Vec<usize>,
    /// QUEUEABLE tasks placed per cluster and method.
    #[arg(long, default_value_t = 5000)]
    pub tasks: usize,
    /// Candidates per task (Mercury's top-k).
    #[arg(long, default_value_t = 4)]
    pub k: usize,
    /// Share of tasks with machine constraints drawn as in the Megha simulator.
    #[arg(long, default_value_t = 0.5, value_name = "FRACTION")]
    pub constrained: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

type Finder = fn(&[Option<LmView>], &TaskSpec, f64, usize) -> Vec<Candidate>;

fn views(cluster: &ClusterSpec, seed: u64) -> Vec<Option<LmView>> {
    let mut rng = seeded(seed, streams::SAMPLING);
    cluster
        .lms
        .iter()
        .map(|spec| {
            let lm = LocalMaster::new(spec, cluster.gms, LmConfig::default(), Micros::ZERO);
            let mut view = LmView::build(lm.topology().clone());
            for n in 0..view.topology.node_count() {
                view.set_delay(n, Micros(rng.random_range(0..10_000_000)));
            }
            Some(view)
        })
        .collect()
}

/// Places every task with `find`; returns the wall time and the chosen nodes.
fn place(
    views: &mut [Option<LmView>],
    tasks: &[TaskSpec],
    k: usize,
    find: Finder,
) -> (f64, Vec<Option<Candidate>>) {
    let mut chosen = Vec::with_capacity(tasks.len());
    let started = Instant::now();
    for (i, task) in tasks.iter().enumerate() {
        let candidates = find(views, task, 1.0, k);
        let pick = (!candidates.is_empty()).then(|| candidates[i % candidates.len()]);
        if let Some((_, l, node)) = pick {
            if let Some(view) = views[l].as_mut() {
                let n = node.index();
                let work = task
                    .resources
                    .node_time(task.duration, &view.topology.capacity[n]);
                view.set_delay(n, view.delay(n) + work);
            }
        }
        chosen.push(pick);
    }
    (started.elapsed().as_secs_f64(), chosen)
}

pub fn run(args: BenchTopKArgs) -> Result<()> {
    if args.tasks == 0 || args.k == 0 {
        bail!("--tasks and --k must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.constrained) {
        bail!("--constrained must be in [0, 1]");
    }
    println!("seed: {}", args.seed);
    println!(
        "{:>8} {:>7} {:>3} {:>14} {:>14} {:>8}",
        "nodes", "tasks", "k", "scan us/task", "index us/task", "speedup"
    );
    let mut rng = seeded(args.seed, streams::TASK_CONSTRAINTS);
    let tasks: Vec<TaskSpec> = (0..args.tasks)
        .map(|i| {
            let constraints = if rng.random_bool(args.constrained) {
                synthesize_task_constraints(&mut rng)
            } else {
                common::ConstraintSet::EMPTY
            };
            TaskSpec::short(
                TaskId::new(i as u64, 0),
                Resources::cores(1, 1024),
                Micros::from_secs(2),
            )
            .with_constraints(constraints)
        })
        .collect();
    for &nodes in &args.nodes {
        let partition = nodes.div_ceil(100).max(1);
        let cluster =
            ClusterSpec::generate(10, 10, partition, Resources::cores(4, 16384), args.seed);
        let mut scanned = views(&cluster, args.seed);
        let mut indexed = views(&cluster, args.seed);
        let (scan_s, by_scan) = place(&mut scanned, &tasks, args.k, top_k_scan);
        let (index_s, by_index) = place(&mut indexed, &tasks, args.k, top_k);
        if by_scan != by_index {
            bail!("the index and the scan chose different nodes on {nodes} nodes");
        }
        let per_task = |s: f64| s * 1e6 / tasks.len() as f64;
        println!(
            "{:>8} {:>7} {:>3} {:>14.2} {:>14.2} {:>7.1}x",
            partition * 100,
            tasks.len(),
            args.k,
            per_task(scan_s),
            per_task(index_s),
            scan_s / index_s.max(1e-12)
        );
    }
    Ok(())
}
