//! A GM with a journal (`--data-dir`) is killed (SIGKILL) while its job has tasks
//! queued and running, and restarted 2.5 s later (the running ones finished
//! meanwhile) on the same address and directory.
//! Accepted means durable: the restarted GM resumes the job from its journal, after
//! asking the LMs which of its tasks they hold or finished meanwhile, so every task
//! runs exactly once, and the job ends `finished` at the restarted GM.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, submit_tasks, wait_until, LoopbackCluster, RoleArgs};

#[test]
fn a_job_survives_its_gm_killed_and_every_task_runs_once() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gm-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm0-data");
    let extra = RoleArgs {
        gm: vec!["--data-dir".into(), data.display().to_string()],
        ..RoleArgs::default()
    };
    // 1 GM, 2 LMs of 2 one-core nodes, 1 worker each: 12 tasks of 1.5 s in 3 waves.
    // Two LMs: a resumed task placed on the other LM than the one that ran it would
    // run twice (an LM knows only what it runs and finished), unless the restarted GM
    // asks the LMs first.
    let mut cluster =
        LoopbackCluster::start_with_args(1, 2, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let running = |c: &LoopbackCluster| {
        c.lms
            .iter()
            .map(|p| {
                get_json(&format!("{}/healthz", p.url))["running"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .sum::<u64>()
    };
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":1500}"#;
    let job = submit_tasks(&cluster.gms[0].url, task, 12)["job"]
        .as_u64()
        .expect("job id");
    wait_until("four tasks running", Duration::from_secs(30), || {
        running(&cluster) == 4
    });
    // Down for 2.5 s: the running tasks finish meanwhile (their ends wait at the LM).
    cluster.crash_and_restart_gm(0, Duration::from_millis(2500));
    let gm = cluster.gms[0].url.clone();
    // The restarted GM knows the job at once (read back from its journal).
    let status = get_json(&format!("{gm}/v1/jobs/{job}"));
    assert_eq!(status["tasks"], 12, "{status}");
    wait_until(
        "the job to finish at the restarted GM",
        Duration::from_secs(90),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        12.0,
        "every task started exactly once; logs in {}",
        dir.display()
    );
    // The four that ran finished while the GM was down: the LMs said so, only the
    // other eight were placed again.
    let recovered = cluster.metric(&cluster.gms, "megha_gm_recovered_tasks_total");
    assert_eq!(recovered, 8.0, "logs in {}", dir.display());
    assert_eq!(cluster.metric(&cluster.gms, "megha_gm_journal_jobs"), 0.0);
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The GM and one of two LMs are killed together; the GM restarts while that LM is
/// still down. Its tasks there may still run (its worker lives on), so the restarted
/// GM resumes none of the tasks the live LM does not hold: they wait (gauge
/// `megha_gm_resume_in_doubt_tasks`), and the silent LM is asked again every 3 s.
/// Once it is back (its worker registers again with what it finished meanwhile)
/// the GM hears which of them finished and resumes only the others: every task runs
/// exactly once, none resumed blind after the doubt timeout.
#[test]
fn tasks_a_silent_lm_may_run_wait_for_its_answer_before_they_resume() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gm-doubt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("gm0-data");
    let extra = RoleArgs {
        gm: vec!["--data-dir".into(), data.display().to_string()],
        ..RoleArgs::default()
    };
    // 1 GM, 2 LMs of 2 one-core nodes, 1 worker each: 8 tasks of 3 s, 4 at a time.
    let mut cluster =
        LoopbackCluster::start_with_args(1, 2, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let running_at = |c: &LoopbackCluster, l: usize| {
        get_json(&format!("{}/healthz", c.lms[l].url))["running"]
            .as_u64()
            .unwrap_or(0)
    };
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":3000}"#;
    let job = submit_tasks(&cluster.gms[0].url, task, 8)["job"]
        .as_u64()
        .expect("job id");
    // Started by the workers, not only placed by the LMs: an LM counts a task
    // running when it sends the start order, and an order still on its way when
    // LM 1 is killed dies with it (the worker never ran that task, so the GM
    // rightly resumes it: 6 resumed, not 4, and 2 started, not 4, at the check
    // below; seen 1 run in 4 before this wait).
    wait_until(
        "two tasks running at each LM, started by its worker",
        Duration::from_secs(30),
        || {
            running_at(&cluster, 0) == 2
                && running_at(&cluster, 1) == 2
                && cluster.metric(&cluster.workers, "megha_worker_started_total") == 4.0
        },
    );
    cluster.lms[1].kill();
    cluster.crash_and_restart_gm(0, Duration::from_millis(300));
    let gm = cluster.gms[0].url.clone();
    let in_doubt = |c: &LoopbackCluster| c.metric(&c.gms, "megha_gm_resume_in_doubt_tasks");
    // LM 0 holds 2; the other 6 (2 running at LM 1's worker, 4 never sent) wait.
    wait_until(
        "the restarted GM to hold back the tasks LM 1 may run",
        Duration::from_secs(30),
        || in_doubt(&cluster) == 6.0,
    );
    // Long enough for LM 0's two tasks to end and for two asks of LM 1 to fail:
    // still nothing resumed, so LM 0's free nodes stay idle.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(in_doubt(&cluster), 6.0, "logs in {}", dir.display());
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        4.0,
        "nothing resumed while LM 1 is silent; logs in {}",
        dir.display()
    );
    // LM 1 comes back: its worker registers with the two tasks it finished.
    cluster.crash_and_restart_lm(1);
    wait_until(
        "the job to finish at the restarted GM",
        Duration::from_secs(90),
        || get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished",
    );
    assert_eq!(in_doubt(&cluster), 0.0);
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        8.0,
        "every task started exactly once; logs in {}",
        dir.display()
    );
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_resume_doubt_expired_total"),
        0.0
    );
    // A failure here (seen once in about 20 runs, on a loaded machine; 6 resumed)
    // is not understood yet (issue 31). The counters say whether the restarted LM
    // 1 declared its worker's slot down before the worker registered (then its
    // reconcile answer could not name the two finished runs, and their
    // re-announced finishes withdrew the two resumed before they went out).
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_recovered_tasks_total"),
        4.0,
        "only the 4 never sent were resumed; LM workers lost {}, ends re-announced {}; logs in {}",
        cluster.metric(&cluster.lms, "megha_lm_workers_lost_total"),
        cluster.metric(&cluster.lms, "megha_lm_ends_reannounced_total"),
        dir.display()
    );
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}
