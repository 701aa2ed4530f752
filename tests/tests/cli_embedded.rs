//! The `megha` client against an embedded cluster (1 GM, 1 LM, 2 one-core nodes on
//! 2 workers running exec tasks for real), its GM behind the real HTTP API on
//! loopback: each subcommand, its `--json` output parsed and checked.
//!
//! - `run -- echo hello` ends `finished` and its log says hello (read from the
//!   worker's directory: embedded GMs have no LM URL to proxy logs through, and
//!   `megha logs` says so);
//! - `run -- sh -c 'exit 3'` ends `failed` with exit code 3;
//! - three `sleep` tasks on two nodes: `status`, `pending`, `top --once` and `nodes`
//!   show two running and one pending; `cancel` (twice) ends the job `cancelled`.

use common::cluster::ClusterSpec;
use common::{GmId, Resources, TaskId};
use loadgen::cli::replay::in_actix_system;
use loadgen::replay::embedded::{self, EmbeddedConfig};
use serde_json::Value;
use service_kit::links::Sink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tests::embedded_config;
use tests::gm_http::serve_gm_apis;
use tests::procs::bin_dir;
use worker::exec::logs::Stream;
use worker::exec::ExecSettings;

/// Runs `megha ARGS` against `gm` (off the async runtime); (success, stdout, stderr).
async fn megha(gm: &str, args: &[&str]) -> (bool, String, String) {
    let exe = bin_dir().join("megha");
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let gm = gm.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(exe)
            .args(&args)
            .env("MEGHA_GM", gm)
            .env_remove("MEGHA_TOKEN")
            .env_remove("MEGHA_TOKEN_FILE")
            .output()
            .expect("megha runs")
    })
    .await
    .expect("join");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `megha --json ARGS`, which must succeed, parsed.
async fn megha_json(gm: &str, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (ok, out, err) = megha(gm, &all).await;
    assert!(ok, "megha {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("megha {args:?}: not JSON ({e}): {out}"))
}

/// Polls `megha --json status JOB` until the job is no longer active.
async fn ended(gm: &str, job: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = megha_json(gm, &["status", &job.to_string()]).await;
        if status["job"]["state"] != "active" {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "job {job} still active: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(gm: &str, command: &[&str]) -> u64 {
    let mut args = vec!["run", "--cpu-millis", "1000", "--memory-mb", "64", "--"];
    args.extend_from_slice(command);
    let answer = megha_json(gm, &args).await;
    answer["job"].as_u64().expect("a job id")
}

async fn scenario(gm: String, data_dir: PathBuf) {
    // echo hello: finished, and the log says hello.
    let hello = run(&gm, &["echo", "hello"]).await;
    let status = ended(&gm, hello).await;
    assert_eq!(status["job"]["state"], "finished", "{status}");
    assert_eq!(status["tasks"][0]["state"], "finished", "{status}");
    let log = embedded::task_log(&data_dir, TaskId::new(hello, 0), Stream::Stdout, None);
    assert_eq!(log.as_deref(), Some("hello\n"));
    // The GM cannot proxy logs in embedded mode, and megha says why.
    let (ok, _, err) = megha(&gm, &["logs", &hello.to_string(), "0"]).await;
    assert!(!ok && err.contains("embedded mode"), "{err}");

    // exit 3: failed with exit code 3, in words in the table.
    let three = run(&gm, &["sh", "-c", "exit 3"]).await;
    let status = ended(&gm, three).await;
    assert_eq!(status["job"]["state"], "failed", "{status}");
    assert_eq!(status["tasks"][0]["failure"]["exit"]["code"], 3, "{status}");
    let (ok, table, _) = megha(&gm, &["status", &three.to_string()]).await;
    assert!(ok && table.contains("exited with code 3"), "{table}");

    // status: both jobs, newest first; --oldest in submission order.
    let ids_of = |page: &Value| -> Vec<u64> {
        page["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter_map(|j| j["job"].as_u64())
            .collect()
    };
    let page = megha_json(&gm, &["status"]).await;
    assert_eq!(ids_of(&page), [three, hello], "{page}");
    let page = megha_json(&gm, &["status", "--oldest"]).await;
    assert_eq!(ids_of(&page), [hello, three], "{page}");

    // Three sleeps on two one-core nodes: two run, one waits.
    let sleeps = megha_json(
        &gm,
        &[
            "run",
            "--count",
            "3",
            "--cpu-millis",
            "1000",
            "--",
            "sleep",
            "30",
        ],
    )
    .await["job"]
        .as_u64()
        .expect("a job id");
    let deadline = Instant::now() + Duration::from_secs(30);
    let job = loop {
        let s = megha_json(&gm, &["status", &sleeps.to_string()]).await;
        if s["job"]["states"]["running"] == 2 {
            break s;
        }
        assert!(Instant::now() < deadline, "two never ran: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(job["job"]["states"]["queued"], 1, "{job}");

    let pending = megha_json(&gm, &["pending"]).await;
    assert_eq!(pending["total"], 1, "{pending}");
    assert_eq!(pending["shown"][0]["job"], sleeps, "{pending}");
    assert!(pending["shown"][0]["reason"].is_string(), "{pending}");
    let (ok, table, _) = megha(&gm, &["pending"]).await;
    assert!(ok && table.contains("1 pending in all"), "{table}");

    let top = megha_json(&gm, &["top", "--once"]).await;
    assert_eq!(
        top["tasks"],
        serde_json::json!({"running": 2, "starting": 0, "pending": 1}),
        "{top}"
    );
    assert_eq!(top["jobs_by_state"]["finished"], 1, "{top}");
    assert_eq!(top["jobs_by_state"]["failed"], 1, "{top}");
    assert_eq!(top["lms"][0]["status"], "ok", "{top}");
    assert_eq!(top["lms"][0]["full"], 2, "{top}");
    assert_eq!(top["recent_jobs"][0]["job"], sleeps, "{top}");
    let (ok, table, _) = megha(&gm, &["top", "--once"]).await;
    assert!(
        ok && table.contains("2 running, 0 starting, 1 pending") && table.contains("lm0"),
        "{table}"
    );

    let nodes = megha_json(&gm, &["nodes"]).await;
    let used: u64 = nodes["lms"][0]["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .flat_map(|p| p["nodes"].as_array().cloned().unwrap_or_default())
        .filter_map(|n| n["used"]["cpu_millis"].as_u64())
        .sum();
    assert_eq!(used, 2000, "{nodes}");

    // cancel: every task ends cancelled; a second cancel answers the same.
    let first = megha_json(&gm, &["cancel", &sleeps.to_string()]).await;
    assert_eq!(first["job"], sleeps, "{first}");
    let status = ended(&gm, sleeps).await;
    assert_eq!(status["job"]["state"], "cancelled", "{status}");
    assert_eq!(status["job"]["states"]["cancelled"], 3, "{status}");
    let again = megha_json(&gm, &["cancel", &sleeps.to_string()]).await;
    assert_eq!(again["state"], "cancelled", "{again}");
    // A job the GM does not know: megha fails naming it.
    let (ok, _, err) = megha(&gm, &["cancel", "12345"]).await;
    assert!(!ok && err.contains("12345"), "{err}");
}

fn exec_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("megha-cli-embedded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn megha_subcommands_against_an_embedded_cluster() {
    bin_dir();
    let data_dir = exec_dir();
    let cfg = EmbeddedConfig {
        workers_per_lm: 2,
        exec: Some(ExecSettings {
            grace: Duration::from_millis(200),
            keep_logs: 100,
            cgroups: false,
            identity: tests::procs::task_identity(),
            ..ExecSettings::as_self(data_dir.clone())
        }),
        ..embedded_config(ClusterSpec::generate(1, 1, 2, Resources::cores(1, 4096), 1))
    };
    let dir = data_dir.clone();
    in_actix_system(async move {
        let sink: Sink<Vec<common::events::TaskEvent>> = Arc::new(|_| {});
        let cluster = embedded::start(&cfg, sink).await.expect("cluster starts");
        let urls = serve_gm_apis(&cluster, GmId(0)).await;
        scenario(urls[0].clone(), dir).await;
    });
    let _ = std::fs::remove_dir_all(Path::new(&data_dir));
}
