//! Start latency at the worker, synthetic vs exec: one task at a time through the
//! worker actor (no LM, no network), measuring from the start order to
//! - its `Started` report (the core's decision, the same path for every executor);
//! - the `Finished` report of a zero-length task: a synthetic task of duration 0
//!   (the actor's timer), or an exec task running `/bin/true` (spawn, exec, exit,
//!   reap, cgroup or rlimit set-up and clean-up), an upper bound of the time a
//!   command takes to be running.
//!
//! `cargo run --release -p worker --example start_latency -- [tasks] [cgroups: true|false]`

#[path = "../tests/support/mod.rs"]
mod support;

use actix::prelude::*;
use common::messages::{StartTask, WorkerReport};
use common::protocol::LmToWorker;
use common::{ExecCommand, Executor, Micros, NodeId, Resources, TaskId, TaskSpec};
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::service::actor::FromLm;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn show(name: &str, mut d: Vec<Duration>) {
    d.sort();
    println!(
        "{name:<34} n={:<5} p50={:>9.3} ms  p99={:>9.3} ms  max={:>9.3} ms",
        d.len(),
        percentile(&d, 0.5).as_secs_f64() * 1e3,
        percentile(&d, 0.99).as_secs_f64() * 1e3,
        d[d.len() - 1].as_secs_f64() * 1e3,
    );
}

#[actix_rt::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    let cgroups = args.next().is_none_or(|a| a != "false");
    let data_dir = std::env::temp_dir().join(format!("megha-start-latency-{}", std::process::id()));
    let (worker, mut rx) = support::one_node_worker(&data_dir, cgroups).await;
    let true_cmd = Executor::Exec(Arc::new(ExecCommand {
        program: "/bin/true".into(),
        ..Default::default()
    }));
    for (name, executor) in [
        ("synthetic", Executor::Synthetic),
        ("exec /bin/true", true_cmd),
    ] {
        let (mut started, mut ended) = (Vec::new(), Vec::new());
        for i in 0..n {
            let task =
                TaskSpec::short(TaskId::new(1, i as u32), Resources::cores(1, 64), Micros(0))
                    .with_executor(executor.clone());
            let id = task.id;
            let t0 = Instant::now();
            worker.do_send(FromLm(vec![LmToWorker::Start(StartTask {
                node: NodeId(0),
                dispatch: Default::default(),
                task,
            })]));
            loop {
                let (at, r) = rx.recv().await.expect("report");
                match r {
                    WorkerReport::Started { task, .. } if task == id => started.push(at - t0),
                    WorkerReport::Finished { task, .. } if task == id => {
                        ended.push(at - t0);
                        break;
                    }
                    other if other.task() == id => panic!("{name}: {other:?}"),
                    _ => {}
                }
            }
        }
        show(&format!("{name}: order -> Started"), started);
        show(&format!("{name}: order -> Finished (0 s)"), ended);
    }
    let _ = std::fs::remove_dir_all(data_dir);
    System::current().stop();
}
