//! `loadgen bench-alsched`: what evaluating utility trees (alsched soft constraints,
//! issue 36) costs a GM's pass. A described cluster of `--nodes` nodes (4 cores, in
//! 20 racks, one GPU node in ten) over 10 LMs and one GM; `--tasks` pending tasks
//! in jobs of 10, each job with a tree (a mix of `prefer(gpu)`, `same(rack)`,
//! `prefer(rack=..., else: not gpu)` and a `min` of two preferences), placed in one
//! pass, against the same tasks without trees. Twice: on an empty cluster (the best
//! branch has room) and on a full one (every branch is tried and explained, then the
//! fallback misses too). Prints figures; asserts nothing.

use anyhow::{bail, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::cluster_described::{DescribedCluster, DescribedLm, NodeGroup};
use common::utility::{compile, UtilityTree};
use common::{JobId, Micros, Resources, TaskId, TaskSpec};
use gm_core::{GlobalMaster, GmConfig};
use lm_core::{LmConfig, LocalMaster};
use std::sync::Arc;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchAlschedArgs {
    /// Nodes (a multiple of 200: 20 racks over 10 LMs).
    #[arg(long, default_value_t = 10_000)]
    pub nodes: usize,
    /// Pending tasks placed in the pass (jobs of 10).
    #[arg(long, default_value_t = 10_000)]
    pub tasks: usize,
}

const TREES: [&str; 4] = [
    r#"{"prefer": {"set": "gpu"}}"#,
    r#"{"same": {"attr": "rack"}}"#,
    r#"{"prefer": {"set": "rack=r1", "else": {"not": "gpu"}}}"#,
    r#"{"min": [{"prefer": {"set": "gpu"}}, {"prefer": {"set": {"or": ["rack=r2", "rack=r3"]}}}]}"#,
];

fn cluster(nodes: usize) -> Result<(ClusterSpec, common::attributes::Attributes)> {
    let (racks, per_rack) = (20, nodes / 20);
    let mut lms = vec![DescribedLm { nodes: Vec::new() }; 10];
    for r in 0..racks {
        let group = |count, gpu: bool| NodeGroup {
            count,
            cpus: 4,
            memory_mb: 16384,
            attributes: if gpu {
                vec!["gpu".into(), format!("rack=r{r}")]
            } else {
                vec![format!("rack=r{r}")]
            },
        };
        lms[r % 10].nodes.push(group(per_rack / 10, true));
        lms[r % 10]
            .nodes
            .push(group(per_rack - per_rack / 10, false));
    }
    Ok(DescribedCluster { gms: 1, lms }.build()?)
}

/// One pass over `tasks` tasks (with trees or not) on an empty or a full cluster;
/// (seconds, tasks dispatched).
fn pass(
    cluster: &ClusterSpec,
    names: &common::attributes::Attributes,
    tasks: usize,
    trees: bool,
    full: bool,
) -> Result<(f64, usize)> {
    let mut gm = GlobalMaster::new(GmConfig::new(common::GmId(0), 1, cluster.lms.len() as u16));
    for spec in &cluster.lms {
        let mut lm = LocalMaster::new(spec, 1, LmConfig::default(), Micros::ZERO);
        gm.apply_snapshot(Micros::ZERO, &lm.snapshot(Micros::ZERO));
    }
    if full {
        // One 4-core task per node, dispatched (deducted from the view), never sent.
        for k in 0..cluster.node_count() {
            let id = TaskId::new(1_000_000 + k as u64, 0);
            gm.submit(
                Micros::ZERO,
                TaskSpec::short(id, Resources::cores(4, 64), Micros::from_secs(10)),
            );
        }
        gm.schedule(Micros::ZERO);
    }
    for j in 0..tasks.div_ceil(10) {
        let n = 10.min(tasks - j * 10) as u32;
        if trees {
            let tree: UtilityTree = serde_json::from_str(TREES[j % TREES.len()])?;
            let utility = compile(&tree, names, n, "utility")?;
            gm.set_utility(JobId(j as u64), Arc::new(utility));
        }
        for i in 0..n {
            let id = TaskId::new(j as u64, i);
            let task = TaskSpec::short(id, Resources::cores(1, 64), Micros::from_secs(10));
            gm.submit(Micros::ZERO, task);
        }
    }
    let t = Instant::now();
    let out = gm.schedule(Micros(1));
    let secs = t.elapsed().as_secs_f64();
    let placed = out
        .decisions
        .iter()
        .filter(|d| matches!(d.outcome, gm_core::DecisionOutcome::Dispatched { .. }))
        .count();
    Ok((secs, placed))
}

pub fn run(args: BenchAlschedArgs) -> Result<()> {
    if args.nodes == 0 || !args.nodes.is_multiple_of(200) || args.tasks == 0 {
        bail!("--nodes must be a positive multiple of 200 and --tasks positive");
    }
    let (cluster, names) = cluster(args.nodes)?;
    println!(
        "{} nodes, {} pending tasks (jobs of 10), one GM pass; build: {}",
        args.nodes,
        args.tasks,
        if cfg!(debug_assertions) {
            "debug (figures are slow; use --release)"
        } else {
            "release"
        }
    );
    println!(
        "{:<8} {:<8} {:>10} {:>12} {:>8}",
        "cluster", "trees", "pass ms", "us per task", "placed"
    );
    for full in [false, true] {
        let mut base = 0.0;
        for trees in [false, true] {
            let (secs, placed) = pass(&cluster, &names, args.tasks, trees, full)?;
            if !trees {
                base = secs;
            }
            println!(
                "{:<8} {:<8} {:>10.1} {:>12.2} {:>8}{}",
                if full { "full" } else { "empty" },
                if trees { "yes" } else { "no" },
                secs * 1e3,
                secs * 1e6 / args.tasks as f64,
                placed,
                if trees {
                    format!("   ({:.1}x the pass without trees)", secs / base.max(1e-9))
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}
