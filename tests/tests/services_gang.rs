//! Gangs over real processes (docs/gangs.md): 1 GM, 2 LMs of two one-core nodes, 4
//! workers, a real RabbitMQ. A gang of four one-core tasks needs both LMs: each
//! holds its part and launches it on the commit, and all four run and finish. A gang
//! of five cannot fit: past its timeout (`fail`) its tasks end failed, unrun, and
//! nothing is left held. Then `loadgen replay --gangs` submits a small trace with
//! two gangs over HTTP; each starts together. Fails (never skips) when RabbitMQ is
//! not running.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{get_json, http, wait_until, LoopbackCluster};

fn gang_job(gm: &str, tasks: usize, gang: &str) -> u64 {
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":2000}"#;
    let body = format!(
        r#"{{"tasks":[{}],"gang":{gang}}}"#,
        vec![task; tasks].join(",")
    );
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
    answer["job"].as_u64().expect("job id")
}

#[test]
fn a_gang_spanning_two_lms_starts_whole_and_one_that_cannot_fit_fails_unrun() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gang-{}", std::process::id()));
    let mut cluster = LoopbackCluster::start(1, 2, 2, 2, &broker.url, &dir.join("logs"));
    let gm = cluster.gms[0].url.clone();

    let job = gang_job(&gm, 4, r#"{"timeout_s":60}"#);
    wait_until("the gang started", Duration::from_secs(30), || {
        cluster.metric(&cluster.gms, "megha_gm_gangs_started_total") == 1.0
    });
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_gang_parts_committed_total"),
        2.0,
        "one part on each LM"
    );
    wait_until("its four tasks finished", Duration::from_secs(30), || {
        cluster.metric(&cluster.gms, "megha_gm_tasks_finished_total") == 4.0
    });
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        4.0
    );
    let status = get_json(&format!("{gm}/v1/jobs/{job}"));
    assert_eq!(status["tasks"], 4, "{status}");

    let too_big = gang_job(&gm, 5, r#"{"timeout_s":2,"on_timeout":"fail"}"#);
    wait_until("the gang timed out", Duration::from_secs(30), || {
        cluster.metric(&cluster.gms, "megha_gm_gangs_timed_out_total") == 1.0
    });
    wait_until("its tasks ended failed", Duration::from_secs(10), || {
        get_json(&format!("{gm}/v1/tasks/{too_big}/4"))["state"] == "failed"
    });
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        4.0
    );
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_gang_parts_expired_total"),
        0.0
    );
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_gangs_broken_total"),
        0.0
    );

    // `loadgen replay --gangs` submits gangs over HTTP (the `gang` object): jobs 0
    // and 3 of this trace are gangs of all four nodes; each starts together.
    let trace = dir.join("gangs.tr");
    std::fs::write(
        &trace,
        "0.5 4 1 1 1 1 1\n1 3 2 2 2 2\n1.5 2 1 1 1\n2 4 1 1 1 1 1\n2.5 2 1 1 1\n",
    )
    .expect("trace");
    let mut args = cluster.replay_args(&broker.url, &dir.join("out"), 2, 60);
    args[2] = trace.display().to_string();
    args.extend(["--gangs", "--gang-size", "4", "--gang-timeout-s", "120"].map(String::from));
    let log = dir.join("replay.log");
    let status = tests::procs::loadgen(&args, &log);
    let printed = std::fs::read_to_string(&log).expect("replay log");
    assert!(status.success(), "{printed}");
    assert!(
        printed.contains("gangs: 2 submitted, 2 started together, 0 ran apart"),
        "{printed}"
    );
    assert_eq!(
        cluster.metric(&cluster.gms, "megha_gm_gangs_started_total"),
        3.0
    );
    cluster.terminate_all_cleanly();
}

/// A gang that started whole and still runs when its GM is killed: the restarted
/// GM resumes its members as ordinary tasks held by their LMs (no restart whole:
/// no member stopped, each started once). A regression guard of the service's
/// resume path for gangs: every member is held, so none runs again and it holds
/// with or without the journal's `gangs_left` record.
#[test]
fn a_gang_that_started_whole_is_not_restarted_by_its_gm_restarted() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gang-gm-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extra = tests::procs::RoleArgs {
        gm: vec![
            "--data-dir".into(),
            dir.join("gm0-data").display().to_string(),
        ],
        ..Default::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 2, 2, 2, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":8000}"#;
    let body = format!(
        r#"{{"tasks":[{}],"gang":{{"timeout_s":60}}}}"#,
        [task; 4].join(",")
    );
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    wait_until("the gang started", Duration::from_secs(30), || {
        cluster.metric(&cluster.gms, "megha_gm_gangs_started_total") == 1.0
    });
    cluster.crash_and_restart_gm(0, Duration::from_millis(500));
    wait_until("its four tasks finished", Duration::from_secs(60), || {
        cluster.metric(&cluster.workers, "megha_worker_finished_total") == 4.0
    });
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_gang_members_stopped_total"),
        0.0,
        "logs in {}",
        dir.display()
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        4.0
    );
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}
