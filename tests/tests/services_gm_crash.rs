//! A GM with a journal (`--data-dir`) is killed (SIGKILL) while its job has tasks
//! queued and running, and restarted 2.5 s later (the running ones finished
//! meanwhile) on the same address and directory.
//! Accepted means durable: the restarted GM resumes the job from its journal; the
//! tasks that still ran or finished meanwhile are answered `Duplicate` by the LM
//! (which remembers them), so every task runs exactly once, and the job ends
//! `finished` at the restarted GM.

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
    // 1 GM, 1 LM of 4 one-core nodes, 2 workers: 12 tasks of 1.5 s run in 3 waves.
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 4, 2, &broker.url, &dir.join("logs"), &[], &extra);
    let lm = cluster.lms[0].url.clone();
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":1500}"#;
    let job = submit_tasks(&cluster.gms[0].url, task, 12)["job"]
        .as_u64()
        .expect("job id");
    wait_until("four tasks running", Duration::from_secs(30), || {
        get_json(&format!("{lm}/healthz"))["running"].as_u64() == Some(4)
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
    let recovered = cluster.metric(&cluster.gms, "megha_gm_recovered_tasks_total");
    assert_eq!(recovered, 12.0, "nothing had ended before the crash");
    assert_eq!(cluster.metric(&cluster.gms, "megha_gm_journal_jobs"), 0.0);
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}
