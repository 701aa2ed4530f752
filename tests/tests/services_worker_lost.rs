//! A worker is killed (SIGKILL) while it runs tasks. Its LM notices the silence
//! within `--worker-timeout-ms`, marks the worker's nodes down, and reports its tasks
//! to the GM that launched them as `lost` (the GM's status shows them failed with
//! that reason); the other worker's tasks run on. A new worker process for the same
//! slot registers, its nodes come back, and it takes new work. Finally an LM whose
//! worker never registers gets ready anyway once the timeout passes, with that
//! worker's nodes down.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, submit_tasks, wait_until, LoopbackCluster, Proc, RoleArgs};

fn task(duration_ms: u64) -> String {
    format!(r#"{{"resources":{{"cpu_millis":1000,"memory_mb":128}},"duration_ms":{duration_ms}}}"#)
}

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[test]
fn a_killed_worker_is_declared_lost_and_a_new_one_takes_its_slot() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-worker-lost-{}", std::process::id()));
    let logs = dir.join("logs");
    let extra = RoleArgs {
        lm: flags(&["--worker-timeout-ms", "1500"]),
        worker: flags(&["--lm-check-ms", "200"]),
        ..RoleArgs::default()
    };
    // 1 GM, 1 LM of 4 one-core nodes, 2 workers (slot 0: nodes 0, 2; slot 1: 1, 3).
    let mut cluster = LoopbackCluster::start_with_args(1, 1, 4, 2, &broker.url, &logs, &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let lm = cluster.lms[0].url.clone();
    let m = |c: &LoopbackCluster, name: &str| c.metric(&c.lms, name);
    let answer = submit_tasks(&gm, &task(600_000), 4);
    let job = answer["job"].as_u64().expect("job id");
    wait_until(
        "the four long tasks running",
        Duration::from_secs(30),
        || get_json(&format!("{lm}/healthz"))["running"].as_u64() == Some(4),
    );
    cluster.workers[0].kill();
    wait_until(
        "the LM to declare the killed worker lost",
        Duration::from_secs(30),
        || m(&cluster, "megha_lm_workers_lost_total") == 1.0,
    );
    assert_eq!(m(&cluster, "megha_lm_nodes_down"), 2.0);
    assert_eq!(m(&cluster, "megha_lm_tasks_lost_total"), 2.0);
    assert_eq!(
        get_json(&format!("{lm}/healthz"))["running"].as_u64(),
        Some(2),
        "the other worker's tasks still run"
    );
    // The GM learns: two tasks failed, lost, with the reason; two still launched.
    wait_until(
        "the GM to see two tasks lost",
        Duration::from_secs(30),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["states"]["failed"].as_u64() == Some(2),
    );
    let lost: Vec<serde_json::Value> = (0..4)
        .map(|i| get_json(&format!("{gm}/v1/tasks/{job}/{i}")))
        .filter(|t| t["state"] == "failed")
        .collect();
    assert_eq!(lost.len(), 2);
    for t in &lost {
        let failure = t["failure"].to_string();
        assert!(
            failure.contains("lost") && failure.contains("no word from its worker"),
            "{t}"
        );
    }
    // A new worker process for slot 0: its nodes come back and take new work.
    let args = flags(&[
        "--lm-url",
        &lm,
        "--slot",
        "0",
        "--listen",
        "127.0.0.1:0",
        "--lm-check-ms",
        "200",
    ]);
    let args = [args, tests::procs::task_identity_args()].concat();
    cluster.workers[0] = Proc::spawn("worker", &args, &logs, "worker0.0-again");
    wait_until("the slot's nodes back up", Duration::from_secs(30), || {
        m(&cluster, "megha_lm_nodes_down") == 0.0
    });
    let short = submit_tasks(&gm, &task(200), 2);
    let short = short["job"].as_u64().expect("job id");
    wait_until("the new job to finish", Duration::from_secs(60), || {
        get_json(&format!("{gm}/v1/jobs/{short}"))["state"] == "finished"
    });
    let started_here = cluster.metric(&cluster.workers[..1], "megha_worker_started_total");
    assert_eq!(started_here, 2.0, "the new worker ran the new job's tasks");
    assert_eq!(m(&cluster, "megha_lm_workers_lost_total"), 1.0);
    // (Not a graceful stop: worker 1 would drain its 10-minute tasks.)
    for p in cluster
        .gms
        .iter_mut()
        .chain(&mut cluster.workers)
        .chain(&mut cluster.lms)
    {
        p.kill();
    }
}

#[test]
fn an_lm_restarted_while_a_worker_is_dead_runs_with_the_workers_it_has() {
    let broker = require_rabbitmq();
    let dir =
        std::env::temp_dir().join(format!("megha-worker-dead-restart-{}", std::process::id()));
    let logs = dir.join("logs");
    let extra = RoleArgs {
        lm: flags(&["--worker-timeout-ms", "1000"]),
        worker: flags(&["--lm-check-ms", "200"]),
        ..RoleArgs::default()
    };
    // 1 GM, 1 LM of 4 nodes, 2 workers; worker 1 dies, then the LM crashes and
    // restarts: slot 1 never registers with the new life.
    let mut cluster = LoopbackCluster::start_with_args(1, 1, 4, 2, &broker.url, &logs, &[], &extra);
    let lm = cluster.lms[0].url.clone();
    let gm = cluster.gms[0].url.clone();
    cluster.workers[1].kill();
    cluster.crash_and_restart_lm(0);
    wait_until(
        "the restarted LM ready without slot 1",
        Duration::from_secs(30),
        || get_json(&format!("{lm}/healthz"))["ready"] == true,
    );
    assert_eq!(cluster.metric(&cluster.lms, "megha_lm_nodes_down"), 2.0);
    let job = submit_tasks(&gm, &task(100), 6);
    let job = job["job"].as_u64().expect("job id");
    wait_until(
        "the job to finish on the live worker",
        Duration::from_secs(60),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    assert_eq!(
        cluster.metric(&cluster.workers[..1], "megha_worker_started_total"),
        6.0,
        "the live worker ran every task"
    );
    for p in [
        &mut cluster.gms[0],
        &mut cluster.workers[0],
        &mut cluster.lms[0],
    ] {
        let status = p.terminate(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "{}: {status:?}",
            p.name
        );
    }
}

/// A worker dies while its LM is down: the LM's new life never hears of that
/// worker's tasks. The GM sees the LM's new life, asks it (after
/// `--lm-reconcile-delay-ms`) which of its tasks it still holds, and the two
/// tasks of the dead worker end lost (the LM reports them) and go back to the
/// queue under the job's retry policy; the live worker's two run on.
#[test]
fn tasks_of_a_worker_that_died_while_its_lm_was_down_end_lost() {
    let broker = require_rabbitmq();
    let dir =
        std::env::temp_dir().join(format!("megha-lm-restart-reconcile-{}", std::process::id()));
    let logs = dir.join("logs");
    let extra = RoleArgs {
        gm: flags(&["--lm-reconcile-delay-ms", "1000", "--max-attempts", "2"]),
        lm: flags(&["--worker-timeout-ms", "3000"]),
        worker: flags(&["--lm-check-ms", "200"]),
        ..RoleArgs::default()
    };
    let mut cluster = LoopbackCluster::start_with_args(1, 1, 4, 2, &broker.url, &logs, &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let lm = cluster.lms[0].url.clone();
    let job = submit_tasks(&gm, &task(600_000), 4);
    let job = job["job"].as_u64().expect("job id");
    wait_until(
        "the four long tasks running",
        Duration::from_secs(30),
        || get_json(&format!("{lm}/healthz"))["running"].as_u64() == Some(4),
    );
    // The GM has the LM's launch answer for all four. (Were the LM killed before
    // its answer arrived, the batch would be in doubt and sent again to the new
    // life, which answers `duplicate` for the held runs and refuses the dead
    // worker's node: no reconcile, the other path this test does not cover.)
    wait_until(
        "the GM to hear the four tasks launched",
        Duration::from_secs(30),
        || {
            (0..4)
                .map(|i| get_json(&format!("{gm}/v1/tasks/{job}/{i}")))
                .all(|t| t["launched_at_us"].is_u64())
        },
    );
    // Worker 1 dies and the LM crashes before it could notice.
    cluster.workers[1].kill();
    cluster.crash_and_restart_lm(0);
    wait_until(
        "the GM to hear the dead worker's two tasks lost",
        Duration::from_secs(60),
        || cluster.metric(&cluster.gms, "megha_gm_reconciled_lost_total") == 2.0,
    );
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_lm_restarts_total"),
        1.0
    );
    let tasks: Vec<serde_json::Value> = (0..4)
        .map(|i| get_json(&format!("{gm}/v1/tasks/{job}/{i}")))
        .collect();
    wait_until(
        "the lost runs recorded as failures of their tasks",
        Duration::from_secs(30),
        || {
            (0..4)
                .map(|i| get_json(&format!("{gm}/v1/tasks/{job}/{i}")))
                .filter(|t| t["failures"].to_string().contains("restarted"))
                .count()
                == 2
        },
    );
    let running = tasks.iter().filter(|t| t["state"] == "running").count();
    assert!(running >= 2, "the live worker's tasks run on: {tasks:?}");
    assert_eq!(
        get_json(&format!("{lm}/healthz"))["running"].as_u64(),
        Some(2),
        "the restarted LM holds the live worker's two tasks"
    );
    for p in cluster
        .gms
        .iter_mut()
        .chain(&mut cluster.workers)
        .chain(&mut cluster.lms)
    {
        p.kill();
    }
}
