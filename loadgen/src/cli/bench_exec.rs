//! `loadgen bench-exec`: what running a real command costs, against the synthetic
//! executor as the baseline in the same run. Prints figures; asserts nothing.
//!
//! 1. At the worker (in this process: one worker actor with real executors, no LM,
//!    no network), one task at a time, from the start order to the `Started` report
//!    (the core's decision, the same for every executor) and to the `Finished` report
//!    of a zero-length task: synthetic of duration 0, or exec `/bin/true` (spawn,
//!    exec, exit, reap, limits set up and cleaned up).
//! 2. End to end, with `--gm URL` (e.g. the loopback cluster of
//!    scripts/loopback-cluster.sh, dedicated to the run): `--tasks` one-task jobs
//!    submitted over HTTP (`--submitters` at a time; 1: back to back), synthetic
//!    (0 ms) then exec `true`; the GM's own record of each task gives
//!    submit-to-running (`started_at_us` at the worker minus `submitted_at_us` at the
//!    GM; one host, one clock) and the start rate (tasks over the span from the
//!    first submission to the last start, from the same records). While the tasks
//!    run, the bench asks only whether any job is still active (one small request
//!    every 20 ms); each task's record is read after all have ended, outside the
//!    timed span.

use actix::prelude::*;
use anyhow::{bail, Context, Result};
use clap::Args;
use common::messages::{StartTask, WorkerAssignment, WorkerReport};
use common::protocol::LmToWorker;
use common::{ExecCommand, Executor, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use futures_util::{StreamExt, TryStreamExt};
use megha_sim::report::Distribution;
use serde_json::{json, Value};
use service_kit::links::fn_link;
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::exec::{ExecSettings, Executors};
use worker::service::actor::{Assign, FromLm, WorkerActor};

#[derive(Args, Debug)]
pub struct BenchExecArgs {
    /// Tasks of each executor at the worker.
    #[arg(long, default_value_t = 300)]
    pub worker_tasks: u32,
    /// Try cgroups for exec limits at the worker (else rlimits).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub cgroups: bool,
    /// End to end against this GM (leave out to measure the worker only).
    #[arg(long, value_name = "URL")]
    pub gm: Option<String>,
    /// End to end: tasks (one-task jobs) of each executor.
    #[arg(long, default_value_t = 1000)]
    pub tasks: usize,
    /// End to end: CPU per task, thousandths of a core.
    #[arg(long, default_value_t = 100)]
    pub cpu_millis: u64,
    /// End to end: file holding the API token (or the token in MEGHA_TOKEN).
    #[arg(long, env = "MEGHA_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// End to end: submissions in flight at once (1: each POST waits for the
    /// previous answer, as one client submitting a list).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub submitters: u16,
    /// End to end: give up waiting for the tasks after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_s: u64,
}

/// Task uids of the bench's worker (when run as root).
const BENCH_UIDS: (u32, u32) = (3_400_000, 3_400_999);

pub fn run(args: BenchExecArgs) -> Result<()> {
    let system = System::new();
    system.block_on(async {
        at_worker(args.worker_tasks.max(1), args.cgroups).await?;
        if let Some(gm) = &args.gm {
            end_to_end(gm, &args).await?;
        } else {
            println!("end to end: skipped (give --gm URL, e.g. scripts/loopback-cluster.sh)");
        }
        Ok(())
    })
}

/// One finished run, from its task's record: its node (LM, node) and when it
/// started and ended (µs).
#[derive(Clone, Copy, Debug)]
struct Run {
    slot: (u64, u64),
    start: u64,
    end: u64,
}

/// How the nodes' time was used: the share of each node's span (first start to
/// last end) that a run held it, the mean run, and the gaps between one run's end
/// and the next start on the same node (ms).
#[derive(Debug)]
struct SlotUse {
    slots: usize,
    busy: f64,
    run_ms: f64,
    /// Milliseconds (the project's [`Distribution`], its values in ms here).
    gap_ms: Distribution,
}

/// `None` without two runs on any one node.
fn slot_use(runs: &mut [Run]) -> Option<SlotUse> {
    runs.sort_by_key(|r| (r.slot, r.start));
    let (mut gaps, mut held, mut spans, mut slots) = (Vec::new(), 0u64, 0u64, 0usize);
    for node in runs.chunk_by(|a, b| a.slot == b.slot) {
        slots += 1;
        held += node
            .iter()
            .map(|r| r.end.saturating_sub(r.start))
            .sum::<u64>();
        let last_end = node.iter().map(|r| r.end).max().unwrap_or(0);
        spans += last_end.saturating_sub(node[0].start);
        gaps.extend(
            node.windows(2)
                .map(|w| w[1].start.saturating_sub(w[0].end) as f64 / 1e3),
        );
    }
    if gaps.is_empty() || spans == 0 {
        return None;
    }
    Some(SlotUse {
        slots,
        busy: held as f64 / spans as f64,
        run_ms: held as f64 / 1e3 / runs.len() as f64,
        gap_ms: distribution(&gaps),
    })
}

fn line(name: &str, d: &Distribution) -> String {
    format!(
        "{name:<40} n={:<5} p50={:>8.3} ms  p99={:>8.3} ms  max={:>8.3} ms",
        d.count,
        d.p50 * 1e3,
        d.p99 * 1e3,
        d.max * 1e3
    )
}

fn distribution(samples: &[f64]) -> Distribution {
    Distribution::of(samples.to_vec())
}

async fn at_worker(n: u32, cgroups: bool) -> Result<()> {
    let data_dir = std::env::temp_dir().join(format!("megha-bench-exec-{}", std::process::id()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let link = fn_link(move |reports: Vec<WorkerReport>| {
        for r in reports {
            let _ = tx.send((Instant::now(), r));
        }
        async { Ok(()) }
    });
    // As a deployment would run it: a uid per task when this runs as root.
    let root = worker::exec::identity::is_root();
    let exec = Executors::new(ExecSettings {
        grace: Duration::from_millis(200),
        keep_logs: 16,
        cgroups,
        identity: worker::exec::identity::IdentityConfig {
            task_uids: root.then_some(BENCH_UIDS),
            task_user: None,
            allow_run_as_self: !root,
        },
        ..ExecSettings::as_self(data_dir.clone())
    })
    .with_context(|| format!("cannot make {}", data_dir.display()))?;
    println!("worker: exec limits: {}", exec.limits().describe());
    let worker = WorkerActor::new(link)
        .with_executors(exec, Executor::Synthetic)
        .start();
    worker
        .send(Assign(WorkerAssignment {
            lm: LmId(0),
            slot: 0,
            nodes: vec![(NodeId(0), Resources::cores(4, 4096))],
            incarnation: 1,
            lease_ms: 0,
            orders_from: 0,
        }))
        .await?;
    let true_cmd = Executor::Exec(Arc::new(ExecCommand {
        program: "/bin/true".into(),
        ..Default::default()
    }));
    let mut finished_p50 = Vec::new();
    for (job, (name, executor)) in [
        ("synthetic", Executor::Synthetic),
        ("exec /bin/true", true_cmd),
    ]
    .into_iter()
    .enumerate()
    {
        let (mut started, mut ended) = (Vec::new(), Vec::new());
        for i in 0..n {
            let task = TaskSpec::short(
                TaskId::new(job as u64 + 1, i),
                Resources::cores(1, 64),
                Micros(0),
            )
            .with_executor(executor.clone());
            let id = task.id;
            let t0 = Instant::now();
            worker.do_send(FromLm(vec![LmToWorker::Start(StartTask {
                node: NodeId(0),
                dispatch: Default::default(),
                task,
            })]));
            loop {
                let (at, r) = rx.recv().await.context("the worker stopped")?;
                match r {
                    WorkerReport::Started { task, .. } if task == id => {
                        started.push((at - t0).as_secs_f64())
                    }
                    WorkerReport::Finished { task, .. } if task == id => {
                        ended.push((at - t0).as_secs_f64());
                        break;
                    }
                    other if other.task() == id => bail!("{name}: {other:?}"),
                    _ => {}
                }
            }
        }
        let (started, ended) = (distribution(&started), distribution(&ended));
        println!(
            "{}",
            line(&format!("worker {name}: order -> Started"), &started)
        );
        println!(
            "{}",
            line(&format!("worker {name}: order -> Finished"), &ended)
        );
        finished_p50.push((ended.p50, ended.p99));
    }
    if let [(s50, s99), (e50, e99)] = finished_p50[..] {
        println!(
            "worker exec/synthetic order -> Finished: p50 x{:.1}, p99 x{:.1}",
            e50 / s50.max(1e-9),
            e99 / s99.max(1e-9)
        );
    }
    let _ = std::fs::remove_dir_all(data_dir);
    Ok(())
}

async fn end_to_end(gm: &str, args: &BenchExecArgs) -> Result<()> {
    let token = service_kit::auth::user_token(args.token_file.as_deref())?;
    let client = service_kit::auth::user_client(Some(Duration::from_secs(30)), token.as_deref());
    let base = gm.trim_end_matches('/');
    let resources = json!({"cpu_millis": args.cpu_millis, "memory_mb": 64});
    let mut p = Vec::new();
    for (name, task) in [
        (
            "synthetic 0 ms",
            json!({"resources": resources, "duration_ms": 0}),
        ),
        (
            "exec true",
            json!({"resources": resources, "executor": {"type": "exec", "command": ["true"]}}),
        ),
    ] {
        let body = json!({"tasks": [task]});
        // Lines a measuring script can take its snapshots at (this phase alone).
        println!("e2e {name}: submitting {} tasks", args.tasks);
        let t0 = Instant::now();
        let submit = |_| {
            let (client, body) = (&client, &body);
            async move {
                let answer = client
                    .post(format!("{base}/v1/jobs"))
                    .json(body)
                    .send()
                    .await?;
                let status = answer.status();
                let text = answer.text().await?;
                if !status.is_success() {
                    bail!("POST {base}/v1/jobs: {status}: {text}");
                }
                let v: Value = serde_json::from_str(&text)?;
                v["job"].as_u64().context("no job id in the answer")
            }
        };
        let jobs: Vec<u64> = futures_util::stream::iter(0..args.tasks)
            .map(submit)
            .buffer_unordered(usize::from(args.submitters))
            .try_collect()
            .await?;
        let submitted_in = t0.elapsed();
        // Wait until none of this GM's jobs is active (one small answer per ask).
        let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
        loop {
            let page: Value = client
                .get(format!("{base}/v1/jobs?state=active&limit=1&all_gms=false"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            if page["jobs"].as_array().is_some_and(|j| j.is_empty()) {
                break;
            }
            if Instant::now() > deadline {
                bail!("{name}: jobs still active after {} s", args.timeout_s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let total = t0.elapsed();
        println!("e2e {name}: all ended in {:.2} s", total.as_secs_f64());
        // Each task's record, read after the timed span.
        let mut latencies = Vec::with_capacity(jobs.len());
        let (mut first_submit, mut last_start) = (u64::MAX, 0u64);
        let mut runs = Vec::with_capacity(jobs.len());
        let mut failed = 0;
        for job in &jobs {
            let t: Value = client
                .get(format!("{base}/v1/tasks/{job}/0"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let state = t["state"].as_str().unwrap_or("?");
            match (t["started_at_us"].as_u64(), t["submitted_at_us"].as_u64()) {
                (Some(s), Some(sub)) if state == "finished" => {
                    latencies.push(s.saturating_sub(sub) as f64 / 1e6);
                    first_submit = first_submit.min(sub);
                    last_start = last_start.max(s);
                    if let (Some(lm), Some(node), Some(end)) = (
                        t["lm"].as_u64(),
                        t["node"].as_u64(),
                        t["ended_at_us"].as_u64(),
                    ) {
                        runs.push(Run {
                            slot: (lm, node),
                            start: s,
                            end,
                        });
                    }
                }
                _ => failed += 1,
            }
        }
        let d = distribution(&latencies);
        let span_s = last_start.saturating_sub(first_submit) as f64 / 1e6;
        let rate = latencies.len() as f64 / span_s.max(1e-6);
        println!(
            "{}  (submitted in {:.2} s, all ended in {:.2} s, {failed} not finished)",
            line(&format!("e2e {name}: submit -> running"), &d),
            submitted_in.as_secs_f64(),
            total.as_secs_f64()
        );
        println!(
            "e2e {name}: {rate:.0} starts/s ({} started within {span_s:.2} s of the first submission; {} submitter(s))",
            latencies.len(),
            args.submitters
        );
        if let Some(u) = slot_use(&mut runs) {
            println!(
                "e2e {name}: where a slot's time goes: {} slots busy {:.0}% of the span from their first start to their last end; a run (start -> end) {:.2} ms on average, then {:.2} ms (p50 {:.2}, p90 {:.2}) until the next run on its node starts",
                u.slots,
                100.0 * u.busy,
                u.run_ms,
                u.gap_ms.mean,
                u.gap_ms.p50,
                u.gap_ms.p90
            );
        }
        p.push((d.p50, d.p99));
    }
    if let [(s50, s99), (e50, e99)] = p[..] {
        println!(
            "e2e exec/synthetic submit -> running: p50 x{:.2}, p99 x{:.2}",
            e50 / s50.max(1e-9),
            e99 / s99.max(1e-9)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{slot_use, Run};

    #[test]
    fn slot_use_takes_runs_and_gaps_per_node() {
        let run = |slot, start, end| Run { slot, start, end };
        // Node (0, 0): runs 0-1000 and 3000-4000 µs (gap 2 ms); node (1, 0): runs
        // 0-2000 and 2500-4500 (gap 0.5 ms), listed out of order.
        let mut runs = vec![
            run((1, 0), 2500, 4500),
            run((0, 0), 3000, 4000),
            run((1, 0), 0, 2000),
            run((0, 0), 0, 1000),
        ];
        let u = slot_use(&mut runs).expect("two runs per node");
        assert_eq!(u.slots, 2);
        // Held 2 + 4 ms of spans 4 + 4.5 ms.
        assert!((u.busy - 6.0 / 8.5).abs() < 1e-9, "{u:?}");
        assert!((u.run_ms - 1.5).abs() < 1e-9, "{u:?}");
        assert!((u.gap_ms.mean - 1.25).abs() < 1e-9, "{u:?}");
        assert!((u.gap_ms.p90 - 2.0).abs() < 1e-9, "{u:?}");
        // One run per node: no gap to measure.
        assert!(slot_use(&mut [run((0, 0), 0, 1), run((0, 1), 0, 1)]).is_none());
    }
}
