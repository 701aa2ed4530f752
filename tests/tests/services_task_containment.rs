//! Issue 31 through the services: with 8 exec tasks running on one worker, the
//! worker is killed (SIGKILL) and started again. Its tasks die with it (each task's
//! helper sees the worker go and kills its run), the LM reports the runs lost, the
//! GM runs them again: every task ends finished once, no old run writes after its
//! retry started, and no process of the old runs is left.
//!
//! The tasks append to a marker file: `start T`, a `tick T` every 100 ms, `end T`.
//!
//! And a user's task (alice's, not an admin's) probes what the issue found
//! reachable: the worker's environment, the cluster's credential files,
//! `/proc/<worker>/environ` and `/cwd`, another running task's directory and logs,
//! the worker's data directory. Every attempt fails; alice reads what it got
//! through the API.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::procs::{
    credentials, get_json, http_raw, submit_tasks, wait_until, LoopbackCluster, MarkedCluster,
    Proc, RoleArgs,
};
use worker::exec::helper::processes_with;

#[test]
fn a_killed_workers_tasks_die_with_it_and_each_runs_to_its_end_once() {
    // 1 GM, 1 LM of 8 one-core nodes, 1 worker.
    let MarkedCluster {
        broker: _broker,
        mut cluster,
        markers,
        dir,
        logs,
    } = MarkedCluster::start("task-containment", 1);
    let gm = cluster.gms[0].url.clone();
    let lm = cluster.lms[0].url.clone();
    // A unique word in each command line, to find its processes in /proc.
    let tag = format!("megha-contain-{}", std::process::id());
    let task = markers.task_json("$MEGHA_TASK", 60, &tag);
    let job = submit_tasks(&gm, &task, 8)["job"].as_u64().expect("job id");
    wait_until("the 8 tasks running", Duration::from_secs(60), || {
        markers.starts() == 8
    });
    assert!(!processes_with(&tag).is_empty(), "the tasks' processes run");
    let worker_args: Vec<String> = {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", cluster.workers[0].pid()))
            .expect("worker cmdline");
        String::from_utf8_lossy(&cmdline)
            .split('\0')
            .skip(1)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    };
    cluster.workers[0].kill();
    let killed_at = Instant::now();
    // Every process of the old runs goes, well before the LM would report them lost.
    let mut left = processes_with(&tag);
    while !left.is_empty() && killed_at.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(&tag);
    }
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "processes of the dead worker's runs"
    );
    let ticks_at_death = markers.read();
    cluster.workers[0] = Proc::spawn("worker", &worker_args, &logs, "worker0.0-again");
    wait_until("the job finished", Duration::from_secs(120), || {
        get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished"
    });
    let text = markers.read();
    // Nothing of an old run wrote after the kill: the lines written since are the
    // retries' own (each retry starts with `start`).
    let since = &text[ticks_at_death.len()..];
    let mut per_task: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for line in since.lines() {
        let (word, task) = line.split_once(' ').expect("marker line");
        per_task.entry(task.to_owned()).or_default().push(word);
    }
    assert_eq!(per_task.len(), 8, "every task ran again: {per_task:?}");
    for (task, words) in &per_task {
        assert_eq!(
            words.first(),
            Some(&"start"),
            "task {task}: an old run wrote after its worker died: {words:?}"
        );
        assert_eq!(
            words.iter().filter(|w| **w == "start").count(),
            1,
            "task {task} started twice after the kill"
        );
        assert_eq!(
            words.last(),
            Some(&"end"),
            "task {task} did not run to its end"
        );
    }
    let ends = text.lines().filter(|l| l.starts_with("end ")).count();
    assert_eq!(ends, 8, "each task ran to its end once");
    for i in 0..8 {
        let t = get_json(&format!("{gm}/v1/tasks/{job}/{i}"));
        assert_eq!(t["state"], "finished", "{t}");
    }
    assert_eq!(processes_with(&tag), Vec::<u32>::new());
    assert_eq!(
        get_json(&format!("{lm}/healthz"))["running"].as_u64(),
        Some(0)
    );
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `method url` as alice (a user, not an admin): (status, body).
fn as_alice(method: &str, url: &str, body: &str) -> (u16, String) {
    let bearer = format!("Bearer {}", credentials().alice);
    let (status, _, answer) = http_raw(
        method,
        url,
        "application/json",
        body.as_bytes(),
        &[("Authorization", bearer.as_str())],
    )
    .expect("call");
    (status, String::from_utf8_lossy(&answer).into_owned())
}

fn exec_task(script: &str) -> String {
    format!(
        r#"{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"executor":{{"type":"exec","command":["sh","-c",{}]}}}}"#,
        serde_json::to_string(script).expect("json")
    )
}

fn exec_json(script: &str) -> String {
    format!(r#"{{"tasks":[{}]}}"#, exec_task(script))
}

#[test]
fn a_users_task_reaches_nothing_of_the_worker_the_cluster_or_other_tasks() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-task-reach-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logs = dir.join("logs");
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &logs, &[], &RoleArgs::default());
    let gm = cluster.gms[0].url.clone();
    // Another user's task keeps a file in its directory and runs while alice's pries.
    let victim = submit_tasks(
        &gm,
        &exec_task("echo victim-secret > mine; echo ready; sleep 60"),
        1,
    );
    let victim = victim["job"].as_u64().expect("job id");
    let worker_log = logs.join("worker0.0.log");
    let data_dir: String = {
        let mut found = None;
        wait_until(
            "the worker to name its data dir",
            Duration::from_secs(10),
            || {
                found = std::fs::read_to_string(&worker_log).ok().and_then(|t| {
                    let at = t.find("data_dir=")? + "data_dir=".len();
                    Some(t[at..].split_whitespace().next()?.to_owned())
                });
                found.is_some()
            },
        );
        found.expect("data dir")
    };
    let victim_dir = format!("{data_dir}/tasks/{victim}.0");
    wait_until("the victim running", Duration::from_secs(30), || {
        std::path::Path::new(&format!("{victim_dir}/work/mine")).exists()
    });
    let worker_pid = cluster.workers[0].pid();
    let c = credentials();
    let targets = [
        c.secret_file.display().to_string(),
        c.tokens_file.display().to_string(),
        format!("/proc/{worker_pid}/environ"),
        format!("/proc/{worker_pid}/cwd/"),
        format!("{victim_dir}/work/mine"),
        format!("{victim_dir}/stdout"),
        format!("{data_dir}/ended-runs"),
        format!("{data_dir}/tasks/"),
    ];
    let script = tests::procs::reach::probe_script(&targets);
    let (status, answer) = as_alice("POST", &format!("{gm}/v1/jobs"), &exec_json(&script));
    assert_eq!(status, 202, "{answer}");
    let job = serde_json::from_str::<serde_json::Value>(&answer).expect("json")["job"]
        .as_u64()
        .expect("job id");
    wait_until("alice's probe to finish", Duration::from_secs(60), || {
        let (_, t) = as_alice("GET", &format!("{gm}/v1/jobs/{job}"), "");
        t.contains("\"finished\"") || t.contains("\"failed\"")
    });
    let (status, got) = as_alice("GET", &format!("{gm}/v1/tasks/{job}/0/logs"), "");
    assert_eq!(status, 200, "{got}");
    let got: String = serde_json::from_str::<serde_json::Value>(&got)
        .ok()
        .and_then(|v| v["stdout"].as_str().map(str::to_owned))
        .unwrap_or(got);
    println!("what alice's task got:\n{got}");
    let uid = tests::procs::reach::check_probe(&got, &targets);
    assert_ne!(uid, 0, "the task ran as root");
    if worker::exec::identity::is_root() {
        let (first, last) =
            worker::exec::identity::IdentityConfig::parse_range(tests::procs::TASK_UIDS)
                .expect("range");
        assert!((first..=last).contains(&uid), "uid {uid} is not a task uid");
    }
    // The cluster is unaffected: the victim still runs.
    let v = get_json(&format!("{gm}/v1/tasks/{victim}/0"));
    assert_eq!(v["state"], "running", "{v}");
    let _ = http_raw(
        "DELETE",
        &format!("{gm}/v1/jobs/{victim}"),
        "application/json",
        b"",
        &[("Authorization", &format!("Bearer {}", credentials().admin))],
    );
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A worker whose data directory is a planted symlink, or a directory another user
/// owns, refuses to start, saying why, and writes nothing through it.
#[test]
fn a_planted_symlink_or_a_foreign_data_directory_stops_the_worker() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = std::env::temp_dir().join(format!("megha-data-dir-attack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let target = dir.join("target");
    std::fs::create_dir_all(&target).expect("target");
    std::fs::write(target.join("precious"), "keep me").expect("file");
    let link = dir.join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let target_mode = std::fs::metadata(&target).expect("target").mode();
    let foreign = dir.join("foreign");
    std::fs::create_dir_all(&foreign).expect("foreign");
    if worker::exec::identity::is_root() {
        std::os::unix::fs::chown(&foreign, Some(3_201_999), Some(3_201_999)).expect("chown");
    }
    let run = |data_dir: &std::path::Path| {
        let mut args = vec![
            "--lm-url".to_owned(),
            "http://127.0.0.1:1".to_owned(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--data-dir".to_owned(),
            data_dir.display().to_string(),
        ];
        args.extend(tests::procs::task_identity_args());
        let out = std::process::Command::new(tests::procs::bin_dir().join("worker"))
            .args(&args)
            .env("MEGHA_CLUSTER_SECRET_FILE", &credentials().secret_file)
            .output()
            .expect("run the worker");
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stderr) = run(&link);
    assert!(
        !status.success(),
        "the worker started on a symlink: {stderr}"
    );
    assert!(stderr.contains("is a symlink"), "{stderr}");
    let listed: Vec<_> = std::fs::read_dir(&target)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        listed,
        ["precious"],
        "something was written through the link"
    );
    assert_eq!(
        std::fs::metadata(&target).expect("target").mode(),
        target_mode,
        "the link's target was changed"
    );
    if worker::exec::identity::is_root() {
        let (status, stderr) = run(&foreign);
        assert!(
            !status.success(),
            "the worker started in a foreign directory: {stderr}"
        );
        assert!(stderr.contains("belongs to uid 3201999"), "{stderr}");
        assert_eq!(std::fs::read_dir(&foreign).expect("list").count(), 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
