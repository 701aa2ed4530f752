//! A standby GM (`--standby`) for GM 0 waits on the primary's data dir; the primary
//! is killed (SIGKILL) while its job has tasks queued and running. The standby
//! answered not-ready until then (healthz 503, the API 503 with Retry-After); it
//! takes the journal over, starts a newer life, resumes the job as a restarted GM
//! does (asking the LMs first), serves the full API on its own port, and every task
//! runs exactly once (the LMs know both addresses of GM 0 and send task ends to
//! whichever serves). An LM that saw the new life refuses a launch of the old one
//! (the fence). And a GM whose LMs refuse it as replaced (another process runs
//! its id with a newer life) stops without running anything.

use common::codec;
use common::messages::{LaunchBatch, LaunchRequest, Placement};
use common::protocol::GmToLm;
use common::{GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};
use std::path::Path;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{
    free_port, get_json, http, http_bytes, submit_tasks, wait_until, LoopbackCluster, Proc,
    RoleArgs,
};

/// The life a GM logged when it started (`life=N` on its "life started" line).
fn life_in_log(log: &Path) -> u64 {
    let text = std::fs::read_to_string(log).expect("GM log");
    text.lines()
        .filter(|l| l.contains("life started"))
        .find_map(|l| {
            let rest = &l[l.find("life=")? + 5..];
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `life started` line in {}", log.display()))
}

#[test]
fn a_standby_takes_over_the_journal_when_the_primary_dies_and_every_task_runs_once() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gm-standby-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logs = dir.join("logs");
    let data = dir.join("gm0-data");
    // The standby's address is known up front: the LMs get it as GM 0's second
    // address (`--gm-url PRIMARY|STANDBY`), where task ends go once it serves.
    let standby_listen = format!("127.0.0.1:{}", free_port());
    let extra = RoleArgs {
        gm: vec!["--data-dir".into(), data.display().to_string()],
        gm_standby_urls: vec![format!("http://{standby_listen}")],
        ..RoleArgs::default()
    };
    // 1 GM, 2 LMs of 2 one-core nodes, 1 worker each: 12 tasks of 1.5 s, 4 at a time.
    let mut cluster = LoopbackCluster::start_with_args(1, 2, 2, 1, &broker.url, &logs, &[], &extra);
    let lm_urls: Vec<String> = cluster.lms.iter().map(|p| p.url.clone()).collect();
    let args: Vec<String> = [
        "--id",
        "0",
        "--gms",
        "1",
        "--lm-urls",
        &lm_urls.join(","),
        "--listen",
        &standby_listen,
        "--amqp",
        &broker.url,
        "--data-dir",
        &data.display().to_string(),
        "--standby",
        "--standby-poll-ms",
        "100",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut standby = Proc::spawn("global-master", &args, &logs, "gm0-standby");
    let sb = standby.url.clone();

    // While the primary lives: not ready, the API refused with a reason to retry.
    let (status, _, body) = http("GET", &format!("{sb}/healthz"), None).expect("healthz");
    assert_eq!(status, 503, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (health["status"].as_str(), health["ready"].as_bool()),
        (Some("standby"), Some(false))
    );
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":1500}"#;
    let submit = format!(r#"{{"tasks":[{task}]}}"#);
    let (status, head, body) =
        http("POST", &format!("{sb}/v1/jobs"), Some(&submit)).expect("submit");
    assert_eq!(status, 503, "{body}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    assert!(body.contains("standby"), "{body}");
    let gauge = |url: &str, name: &str| {
        let (_, _, page) = http("GET", &format!("{url}/metrics"), None).expect("metrics");
        tests::checks::metric_sum(&page, name)
    };
    assert_eq!(gauge(&sb, "megha_gm_standby"), 1.0);
    assert_eq!(gauge(&sb, "megha_gm_takeovers_total"), 0.0);
    // The primary is a primary.
    assert_eq!(gauge(&cluster.gms[0].url, "megha_gm_standby"), 0.0);

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
    let job = submit_tasks(&cluster.gms[0].url, task, 12)["job"]
        .as_u64()
        .expect("job id");
    wait_until("four tasks running", Duration::from_secs(30), || {
        running(&cluster) == 4
    });
    cluster.gms[0].kill();
    let killed = std::time::Instant::now();
    wait_until(
        "the standby to take over and be ready",
        Duration::from_secs(30),
        || {
            http("GET", &format!("{sb}/healthz"), None)
                .ok()
                .and_then(|(s, _, b)| (s == 200).then_some(b))
                .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v["ready"] == true)
        },
    );
    // A figure, not a limit: kill -> ready (lock freed, journal read, LMs asked,
    // the view complete from their next heartbeats).
    eprintln!(
        "standby ready {} ms after the primary was killed",
        killed.elapsed().as_millis()
    );
    // The job, read back from the journal, at the standby's own address.
    let status = get_json(&format!("{sb}/v1/jobs/{job}"));
    assert_eq!(status["tasks"], 12, "{status}");
    let ready = std::time::Instant::now();
    wait_until(
        "the job to finish at the standby",
        Duration::from_secs(60),
        || get_json(&format!("{sb}/v1/jobs/{job}"))["state"] == "finished",
    );
    eprintln!(
        "job of 12 tasks finished {} ms after the standby was ready",
        ready.elapsed().as_millis()
    );
    let status = get_json(&format!("{sb}/v1/jobs/{job}"));
    assert_eq!(status["states"]["finished"], 12, "{status}");
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        12.0,
        "every task started exactly once; logs in {}",
        logs.display()
    );
    assert_eq!(gauge(&sb, "megha_gm_standby"), 0.0);
    assert_eq!(gauge(&sb, "megha_gm_takeovers_total"), 1.0);
    assert_eq!(gauge(&sb, "megha_gm_journal_jobs"), 0.0);

    // The fence: the standby's life is above the primary's, and an LM that saw
    // it refuses a launch of the primary's life (409, counted, nothing applied).
    let old = life_in_log(&logs.join("gm0.log"));
    let new = life_in_log(&logs.join("gm0-standby.log"));
    assert!(new > old, "standby life {new} <= primary life {old}");
    let mut refused = 0;
    for (l, url) in lm_urls.iter().enumerate() {
        let batch = GmToLm::Launch(LaunchBatch {
            gm: GmId(0),
            life: old,
            lm: LmId(l as u16),
            seq: old + 1_000,
            resend: false,
            requests: vec![LaunchRequest {
                task: TaskSpec::short(
                    TaskId::new(999_999, 0),
                    Resources::cores(1, 16),
                    Micros(1_000),
                ),
                node: NodeId(0),
                placement: Placement::Internal,
            }],
        });
        let body = codec::encode(&common::ClusterName::default(), &batch).expect("encode");
        let (status, _, answer) = http_bytes(
            "POST",
            &format!("{url}/v1/messages"),
            codec::CONTENT_TYPE,
            &body,
        )
        .expect("post");
        let answer = String::from_utf8_lossy(&answer);
        // Both LMs ran resumed tasks, so both saw the new life.
        assert_eq!(status, 409, "LM {l}: {answer}");
        assert!(answer.contains("refused"), "{answer}");
        refused += 1;
    }
    assert_eq!(
        cluster.metric(&cluster.lms, "megha_lm_older_gm_life_refused_total"),
        f64::from(refused)
    );
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        12.0
    );
    let status = standby.terminate(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| s.success()),
        "standby exit: {status:?}"
    );
    // The killed primary's slot: terminate_all_cleanly expects live GMs.
    cluster.gms.clear();
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two processes run GM 0 on different data dirs (a misconfiguration, or a primary
/// whose lock on a network volume lapsed): the later one's life is newer. Once the
/// LMs have seen it, the older one's launches are refused (409) and it stops
/// without draining (exit status non-zero); none of its tasks runs.
#[test]
fn a_gm_replaced_by_a_newer_life_of_its_id_is_fenced_and_stops() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-gm-fenced-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logs = dir.join("logs");
    let extra = RoleArgs {
        gm: vec!["--data-dir".into(), dir.join("old").display().to_string()],
        ..RoleArgs::default()
    };
    let mut cluster = LoopbackCluster::start_with_args(1, 2, 2, 1, &broker.url, &logs, &[], &extra);
    let lm_urls: Vec<String> = cluster.lms.iter().map(|p| p.url.clone()).collect();
    let args: Vec<String> = [
        "--id",
        "0",
        "--gms",
        "1",
        "--lm-urls",
        &lm_urls.join(","),
        "--listen",
        "127.0.0.1:0",
        "--amqp",
        &broker.url,
        "--data-dir",
        &dir.join("new").display().to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let newer = Proc::spawn("global-master", &args, &logs, "gm0-newer");
    wait_until(
        "the newer GM 0 to be ready",
        Duration::from_secs(30),
        || get_json(&format!("{}/healthz", newer.url))["ready"] == true,
    );
    // Four short tasks through the newer life: both LMs see it.
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":128},"duration_ms":200}"#;
    submit_tasks(&newer.url, task, 4);
    wait_until(
        "the newer life's four tasks to start",
        Duration::from_secs(30),
        || cluster.metric(&cluster.workers, "megha_worker_started_total") == 4.0,
    );
    // The older life accepts a job (journalled) but cannot launch it: it stops.
    submit_tasks(&cluster.gms[0].url, task, 4);
    let status = cluster.gms[0].wait_exit(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| !s.success()),
        "the fenced GM should stop with an error: {status:?}; logs in {}",
        logs.display()
    );
    let log = std::fs::read_to_string(logs.join("gm0.log")).expect("log");
    assert!(log.contains("fenced"), "no fence line in gm0.log");
    assert!(cluster.metric(&cluster.lms, "megha_lm_older_gm_life_refused_total") >= 1.0);
    assert_eq!(
        cluster.metric(&cluster.workers, "megha_worker_started_total"),
        4.0,
        "nothing of the fenced life ran"
    );
    drop(newer);
    cluster.gms.clear();
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}
