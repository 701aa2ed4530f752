//! Fairness across processes on loopback with a real RabbitMQ: 2 GMs, 1 LM and 2
//! workers (4 one-core nodes), queues `a` (GM 0) and `b` (GM 1) with 50 % each. `a`
//! fills the cluster with long tasks; a task of `b` then preempts one of them over
//! HTTP (GM -> LM `GmToLm::Preempt` on `/v1/messages`, LM -> worker `LmToWorker::Kill`, LM -> GM
//! `LmToGm::Requeue` on `/v1/internal/messages`), and every task finishes, the victim after running again.
//! Fails (never skips) when RabbitMQ is not running.

use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{
    get_json, replay_sample_trace, submit_tasks, wait_until, LoopbackCluster, RoleArgs,
};

/// Submits one job; returns its id.
fn submit(gm: &str, queue: &str, tasks: usize, duration_ms: u64) -> u64 {
    let task = format!(
        r#"{{"queue":"{queue}","resources":{{"cpu_millis":1000,"memory_mb":512}},"duration_ms":{duration_ms}}}"#
    );
    submit_tasks(gm, &task, tasks)["job"]
        .as_u64()
        .expect("a job id")
}

/// `GET /v1/tasks/{job}/{index}` for every task of `job`.
fn tasks_of(gm: &str, job: u64, n: u32) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| get_json(&format!("{gm}/v1/tasks/{job}/{i}")))
        .collect()
}

#[test]
fn preemption_over_http_between_processes() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-loopback-fair-{}", std::process::id()));
    // No preemption hold (GMs and LMs alike): this follows Algorithm 2's
    // immediate kill; `services_fairness.rs` serves a held request.
    let no_hold = || vec!["--preempt-hold-s".to_owned(), "0".to_owned()];
    let extra = RoleArgs {
        gm: no_hold(),
        lm: no_hold(),
        ..RoleArgs::default()
    };
    let mut cluster = LoopbackCluster::start_with_args(
        2,
        1,
        2,
        2,
        &broker.url,
        &dir.join("logs"),
        &["a:0.5:0", "b:0.5:1"],
        &extra,
    );
    let (gm0, gm1) = (cluster.gms[0].url.clone(), cluster.gms[1].url.clone());
    // Each GM reports the cluster it sees (what `loadgen replay` reads for its
    // summary and fairness index): 4 one-core nodes.
    let health = get_json(&format!("{gm1}/healthz"));
    assert_eq!(health["nodes"], 4, "{health}");
    assert_eq!(health["capacity"]["cpu_millis"], 4000, "{health}");
    let a = submit(&gm0, "a", 4, 4000);
    wait_until("a's tasks to start", Duration::from_secs(10), || {
        cluster.metric(&cluster.workers, "megha_worker_started_total") == 4.0
    });
    submit(&gm1, "b", 1, 2000);
    // The victim shows `killed` at its GM, with the reason, while b's task holds its
    // node (2 s); its job counts it so, in GET /v1/jobs/{id} too.
    let mut victim = None;
    wait_until(
        "a task of a to show killed",
        Duration::from_secs(10),
        || {
            victim = tasks_of(&gm0, a, 4)
                .into_iter()
                .find(|t| t["state"] == "killed");
            victim.is_some()
        },
    );
    let victim = victim.expect("killed");
    // Why it was killed stays with the run; `reason` says why it still waits.
    assert!(
        victim["killed_runs"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("preempted")),
        "{victim}"
    );
    assert!(victim["reason"].is_string(), "{victim}");
    let index = victim["index"].as_u64().expect("index");
    assert_eq!(victim["killed_runs"][0]["attempt"], 1, "{victim}");
    let job = get_json(&format!("{gm0}/v1/jobs/{a}"));
    assert_eq!(job["states"]["killed"], 1, "{job}");
    assert_eq!(job["state"], "active", "{job}");
    wait_until("every task to finish", Duration::from_secs(30), || {
        cluster.metric(&cluster.workers, "megha_worker_finished_total") == 5.0
    });
    // It ran again and finished; its history keeps the killed run. The worker
    // counts the finish before its report has travelled through the LM to the
    // GM, so the GM's answer is awaited, not read once.
    let mut after = serde_json::Value::Null;
    wait_until(
        "the victim to show finished at its GM",
        Duration::from_secs(10),
        || {
            after = get_json(&format!("{gm0}/v1/tasks/{a}/{index}"));
            after["state"] == "finished"
        },
    );
    assert_eq!(after["state"], "finished", "{after}");
    assert_eq!(
        after["killed_runs"].as_array().map(Vec::len),
        Some(1),
        "{after}"
    );
    let m = |role: &[tests::procs::Proc], name: &str| cluster.metric(role, name);
    assert_eq!(m(&cluster.lms, "megha_lm_preemptions_total"), 1.0);
    assert_eq!(m(&cluster.lms, "megha_lm_kills_sent_total"), 1.0);
    assert_eq!(m(&cluster.workers, "megha_worker_killed_total"), 1.0);
    assert_eq!(m(&cluster.workers, "megha_worker_refused_total"), 0.0);
    // b's task plus a's tasks, the victim twice.
    assert_eq!(m(&cluster.workers, "megha_worker_started_total"), 6.0);
    assert_eq!(m(&cluster.gms[1..], "megha_gm_preemptions_total"), 1.0);
    assert_eq!(
        m(&cluster.gms[..1], "megha_gm_preempted_requeued_total"),
        1.0
    );
    assert!(m(&cluster.lms, "megha_lm_wasted_task_seconds_total") > 0.0);

    // `loadgen replay --queue` names each job's queue and sends it to that queue's GM
    // (a wrong GM would answer 421 and the replay would fail); every task runs to the
    // end exactly once per preemption, and the report counts the preemptions.
    let out = dir.join("out");
    let mut args = cluster.replay_args(&broker.url, &out, 100, 60);
    args.extend(["--queue", "a:0.5:0", "--queue", "b:0.5:1"].map(String::from));
    let kills_before = m(&cluster.lms, "megha_lm_kills_sent_total");
    let requeued_before = m(&cluster.lms, "megha_lm_preempted_requeued_total");
    let summary = replay_sample_trace(&args, &out, &dir);
    // One `preempted` event per kill a worker confirmed (each such task went back to
    // its GM); a victim that finished before its kill landed keeps its finish.
    let preempted = summary["preemptions"].as_f64().expect("preemptions");
    assert_eq!(
        preempted,
        m(&cluster.lms, "megha_lm_preempted_requeued_total") - requeued_before
    );
    assert!(preempted <= m(&cluster.lms, "megha_lm_kills_sent_total") - kills_before);
    // Preemption attempts are GM decisions, read from the GMs' counters for the
    // replay alone (the preemption above is not counted): each preemption was one.
    let attempts = summary["preempt_attempts"]
        .as_f64()
        .expect("preempt_attempts");
    assert!(attempts >= preempted, "{summary}");
    // Per-queue shares over 60 trace-second windows, and Jain's index over them.
    let fairness = &summary["fairness"];
    let windows = fairness["windows"].as_u64().expect("fairness windows");
    let jain = fairness["jain_mean"].as_f64().expect("jain_mean");
    assert!(windows >= 1 && jain > 0.0 && jain <= 1.0, "{summary}");
    let shares = std::fs::read_to_string(out.join("shares.csv")).expect("shares.csv");
    let rows: Vec<&str> = shares.lines().skip(1).collect();
    assert!(rows.iter().any(|r| r.contains(",a,")) && rows.iter().any(|r| r.contains(",b,")));
    let used: f64 = rows
        .iter()
        .filter_map(|r| r.split(',').nth(4)?.parse::<f64>().ok())
        .sum();
    assert!(used > 0.0, "the queues used the cluster: {shares}");
    cluster.terminate_all_cleanly();
}
