//! `loadgen bench-carbyne`: what one job-ordering decision costs a GM: a plan over
//! every waiting task ([`gm_core::carbyne::plan`]) at 10,000 and 50,000
//! pending tasks, Carbyne against DRF (and Tetris, SJF) on the same seeded jobs.
//! The GM makes one at a job's arrival or end and at most one per replan interval
//! on task ends (the paper: +2 ms and +4 ms per heartbeat). Prints figures; asserts
//! nothing.

use anyhow::{bail, Result};
use clap::Args;
use common::rng::{seeded, streams, Rng};
use common::{JobId, Micros, Resources, TaskId};
use gm_core::carbyne::{plan, JobOrder, JobWork, OrderConfig, Runnable, StageWork};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchCarbyneArgs {
    /// Pending (runnable) tasks per measurement.
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    pub pending: Vec<usize>,
    /// Jobs the pending tasks belong to.
    #[arg(long, default_value_t = 200)]
    pub jobs: usize,
    /// Decisions timed per size and policy (the median is printed).
    #[arg(long, default_value_t = 11)]
    pub repeat: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Seeded DAG jobs: per job a chain of stages with a runnable first stage and a
/// parallel branch, `pending` runnable tasks in all.
fn jobs(pending: usize, count: usize, seed: u64) -> Vec<JobWork> {
    let mut rng = seeded(seed, streams::SAMPLING);
    let per = pending.div_ceil(count);
    (0..count)
        .map(|j| {
            let job = JobId(j as u64 + 1);
            let stages: Vec<StageWork> = (0..4)
                .map(|s| StageWork {
                    parents: match s {
                        0 | 1 => vec![],
                        _ => vec![s - 1],
                    },
                    remaining: (per / 2 + rng.random_range(0..per.max(1))) as u32,
                    runnable: 0,
                    demand: Resources::cores(rng.random_range(1..4), 1024 * rng.random_range(1..8)),
                    duration: Micros::from_secs(rng.random_range(1..60)),
                })
                .collect();
            let n = per.min(pending - (j * per).min(pending));
            let runnable: Vec<Runnable> = (0..n)
                .map(|i| {
                    let stage = i % 2;
                    Runnable {
                        task: TaskId {
                            job,
                            index: i as u32,
                        },
                        resources: stages[stage].demand,
                        duration: stages[stage].duration,
                        stage,
                    }
                })
                .collect();
            let mut stages = stages;
            for r in &runnable {
                stages[r.stage].runnable += 1;
            }
            for s in &mut stages {
                s.remaining = s.remaining.max(s.runnable);
            }
            JobWork {
                job,
                used: Resources::cores(rng.random_range(0..20), 4096),
                runnable,
                stages,
            }
        })
        .collect()
}

pub fn run(args: BenchCarbyneArgs) -> Result<()> {
    if args.jobs == 0 || args.repeat == 0 || args.pending.contains(&0) {
        bail!("--jobs, --repeat and every --pending must be at least 1");
    }
    println!("seed: {}", args.seed);
    let total = Resources::cores(2000, 100 * 131072);
    let free = Resources::cores(200, 10 * 131072);
    println!(
        "{:>9} {:>6} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "pending", "jobs", "drf ms", "tetris ms", "sjf ms", "carbyne ms", "carbyne - drf"
    );
    for &pending in &args.pending {
        let work = jobs(pending, args.jobs, args.seed);
        let mut medians = Vec::new();
        for order in [
            JobOrder::Drf,
            JobOrder::Tetris,
            JobOrder::Sjf,
            JobOrder::Carbyne,
        ] {
            let config = OrderConfig {
                order,
                seed: args.seed,
                ..OrderConfig::default()
            };
            let mut times: Vec<f64> = (0..args.repeat)
                .map(|_| {
                    let t = Instant::now();
                    let order = plan(&work, &total, &free, &config);
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    std::hint::black_box(order);
                    ms
                })
                .collect();
            times.sort_by(f64::total_cmp);
            medians.push(times[times.len() / 2]);
        }
        println!(
            "{:>9} {:>6} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>+14.2}",
            pending,
            args.jobs,
            medians[0],
            medians[1],
            medians[2],
            medians[3],
            medians[3] - medians[0]
        );
    }
    println!("(median ms per decision: one plan over every pending task; build with --release for real figures)");
    Ok(())
}
