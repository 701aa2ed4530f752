//! Jobs a script can drive (issue 38 item 2), through the services: one GM with a
//! journal, one LM, one worker of two 1-core nodes, on loopback with a real
//! RabbitMQ, exec tasks, the `megha` client run as a process with a user's token.
//!
//! - a non-admin whose login (`$USER`) differs from their token's user runs
//!   `megha run --wait` and gets 0; the job is recorded as the token's user; its
//!   tasks see `--env`, `--cwd` and the `MEGHA_*` variables (job, index, count, run);
//! - `wait` exits with the exit code of the first failed task by index (not the
//!   first to fail in time), 128 + N for a task killed by signal N, 130 for a
//!   cancelled job, 127 for an unknown job and for another user's job;
//! - `status JOB --exit-code` answers 124 while the job runs (as `wait --timeout`
//!   that runs out), then its outcome;
//! - jobs carry a name and labels (`megha run --name --label`), shown in their
//!   status and found by `GET /v1/jobs?name=&label=K=V` (`megha status --name
//!   --label`), another user's never; bad ones are 422 naming the field;
//! - `GET /v1/jobs` (and `megha status`) lists newest first, `order=oldest`
//!   (`--oldest`) in submission order, `next` paging on in either order;
//! - `wait` outlives a GM restart (it asks again), and gives up with 1 on a GM that
//!   never answers;
//! - `megha describe` shows a job's spec, its tasks' timelines and failures;
//!   `megha resubmit` runs a failed job again from its spec after a GM restart (the
//!   journal keeps it), as its user only.

use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::run_megha as run;
use tests::procs::{credentials, get_json, job_of, megha_as, wait_until, LoopbackCluster};

#[test]
fn wait_and_exit_codes_through_the_services() {
    let broker = require_rabbitmq();
    let (mut cluster, dir) = LoopbackCluster::start_small_journaled("megha-cli-wait", &broker.url);
    let gm = cluster.gms[0].url.clone();
    let c = credentials();
    let alice = |args: &[&str]| megha_as(&gm, &c.alice, args);
    let small = ["--cpu-millis", "500", "--memory-mb", "64"];
    let submit = |command: &str| {
        let mut args = vec!["--json", "run"];
        args.extend_from_slice(&small);
        args.extend(["--", "sh", "-c", command]);
        let (code, out, err) = run(alice(&args));
        assert_eq!(code, 0, "{err}");
        job_of(&out)
    };

    // A non-admin whose login is not their token's user: 0, recorded as alice, the
    // tasks see --env, --cwd and their MEGHA_* variables.
    let mut args = vec!["--json", "run", "--wait", "--count", "2"];
    args.extend_from_slice(&small);
    args.extend([
        "--env",
        "GREETING=hi",
        "--cwd",
        "/tmp",
        "--",
        "sh",
        "-c",
        "echo $GREETING $MEGHA_JOB $MEGHA_TASK_INDEX $MEGHA_TASK_COUNT $MEGHA_ATTEMPT $(pwd)",
    ]);
    let (code, out, err) = run(alice(&args));
    assert_eq!(code, 0, "{out}{err}");
    let job = job_of(&out);
    assert!(out.contains(r#""outcome":"finished""#), "{out}");
    let status = get_json(&format!("{gm}/v1/jobs/{job}"));
    assert_eq!(status["user"], "alice", "{status}");
    assert_eq!(status["first_failed"], Value::Null, "{status}");
    for index in 0..2 {
        let (code, log, err) = run(alice(&["logs", &job.to_string(), &index.to_string()]));
        assert_eq!(code, 0, "{err}");
        assert_eq!(log, format!("hi {job} {index} 2 1 /tmp\n"));
    }

    // One task exits 3: wait (here through run --wait) exits 3 and says why.
    let mut args = vec!["run", "--wait"];
    args.extend_from_slice(&small);
    args.extend(["--", "sh", "-c", "exit 3"]);
    let (code, out, err) = run(alice(&args));
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("failed: task 0 exited with code 3"), "{out}");
    let failed_3: u64 = out
        .split_whitespace()
        .nth(2)
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("submitted job ID: {out}"));

    // describe: the spec as submitted, the timeline, the failure.
    let (code, out, err) = run(alice(&["describe", &failed_3.to_string()]));
    assert_eq!(code, 0, "{err}");
    for part in [
        "\"exit 3\"",
        "submitted",
        "started (run 1)",
        "failed: exited with code 3",
    ] {
        assert!(out.contains(part), "describe shows {part}: {out}");
    }

    // Two failed tasks: the lower index decides, although it failed later.
    let body = dir.join("two.json");
    let task = |command: &str| {
        serde_json::json!({"resources": {"cpu_millis": 500, "memory_mb": 64},
            "executor": {"type": "exec", "command": ["sh", "-c", command]}})
    };
    let two = serde_json::json!({"tasks": [task("sleep 1; exit 5"), task("exit 4")]});
    std::fs::write(&body, two.to_string()).expect("job file");
    let (code, out, err) = run(alice(&["--json", "run", body.to_str().expect("utf-8")]));
    assert_eq!(code, 0, "{err}");
    let two_failed = job_of(&out);
    let (code, out, err) = run(alice(&["wait", &two_failed.to_string()]));
    assert_eq!(code, 5, "{out}{err}");
    assert!(out.contains("task 0 exited with code 5"), "{out}");
    let status = get_json(&format!("{gm}/v1/jobs/{two_failed}"));
    assert_eq!(status["first_failed"]["index"], 0, "{status}");
    assert_eq!(status["states"]["failed"], 2, "{status}");

    // Killed by a signal: 128 + 9.
    let killed = submit("kill -9 $$");
    let (code, out, err) = run(alice(&["wait", &killed.to_string()]));
    assert_eq!(code, 137, "{out}{err}");

    // Cancelled: a waiter started before the cancel exits 130; status --exit-code
    // says 124 while the job runs.
    let sleeper = submit("sleep 60");
    let id = sleeper.to_string();
    wait_until("the sleeper to run", Duration::from_secs(30), || {
        get_json(&format!("{gm}/v1/tasks/{sleeper}/0"))["state"] == "running"
    });
    let (code, _, err) = run(alice(&["status", &id, "--exit-code"]));
    assert_eq!(code, 124, "{err}");
    let (code, _, err) = run(alice(&["wait", "--timeout", "0.3", &id]));
    assert_eq!(code, 124, "{err}");
    assert!(err.contains("not ended yet"), "{err}");
    let waiter = alice(&["wait", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("megha wait");
    let (code, _, err) = run(alice(&["cancel", &id]));
    assert_eq!(code, 0, "{err}");
    let waited = waiter.wait_with_output().expect("megha wait ends");
    assert_eq!(waited.status.code(), Some(130), "{waited:?}");
    assert!(
        String::from_utf8_lossy(&waited.stdout).contains("cancelled"),
        "{waited:?}"
    );

    // status --exit-code without waiting: the same codes.
    for (job, expected) in [(job, 0), (failed_3, 3), (sleeper, 130), (killed, 137)] {
        let (code, _, err) = run(alice(&["status", &job.to_string(), "--exit-code"]));
        assert_eq!(code, expected, "job {job}: {err}");
    }
    // Without --exit-code, a failed job's status is still a success.
    let (code, _, err) = run(alice(&["status", &failed_3.to_string()]));
    assert_eq!(code, 0, "{err}");

    // Unknown, and another user's job (the same answer): 127 at once.
    let (code, _, err) = run(alice(&["wait", "12345"]));
    assert_eq!(code, 127, "{err}");
    assert!(err.contains("job 12345 is unknown"), "{err}");
    let (code, out, err) = run(megha_as(&gm, &c.bob, &["wait", &job.to_string()]));
    assert_eq!(code, 127, "bob waits on alice's job: {out}{err}");
    assert!(!out.contains("finished"), "{out}");
    let (code, _, err) = run(megha_as(
        &gm,
        &c.bob,
        &["status", &failed_3.to_string(), "--exit-code"],
    ));
    assert_eq!(code, 127, "bob reads alice's outcome: {err}");
    // Several jobs: the first in the order given that did not finish decides.
    let (code, _, err) = run(alice(&[
        "wait",
        &job.to_string(),
        &two_failed.to_string(),
        &failed_3.to_string(),
    ]));
    assert_eq!(code, 5, "{err}");

    // A non-admin naming another user is refused (403), not silently submitted.
    let mut args = vec!["run", "--user", "bob"];
    args.extend_from_slice(&small);
    args.extend(["--", "true"]);
    let (code, _, err) = run(alice(&args));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("403"), "{err}");

    // Jobs list newest first; `next` pages on towards older ones; order=oldest
    // (megha status --oldest) in submission order.
    let ids = |page: &Value| -> Vec<u64> {
        page["jobs"]
            .as_array()
            .map(|j| j.iter().filter_map(|j| j["job"].as_u64()).collect())
            .unwrap_or_default()
    };
    let page = get_json(&format!("{gm}/v1/jobs?limit=2"));
    assert_eq!(ids(&page), vec![sleeper, killed], "{page}");
    let next = page["next"].as_u64().expect("a next page");
    let page = get_json(&format!("{gm}/v1/jobs?limit=2&after={next}"));
    assert_eq!(ids(&page), vec![two_failed, failed_3], "{page}");
    let page = get_json(&format!("{gm}/v1/jobs?limit=2&order=oldest"));
    assert_eq!(ids(&page), vec![job, failed_3], "{page}");
    let next = page["next"].as_u64().expect("a next page");
    let page = get_json(&format!("{gm}/v1/jobs?limit=2&order=oldest&after={next}"));
    assert_eq!(ids(&page), vec![two_failed, killed], "{page}");
    let (code, out, err) = run(alice(&["--json", "status", "--limit", "1"]));
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(ids(&page), vec![sleeper], "{page}");
    let (code, out, err) = run(alice(&["--json", "status", "--limit", "1", "--oldest"]));
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(ids(&page), vec![job], "{page}");

    // Names and labels: shown in the job's status, found by name or label.
    let named = |name: &str, label: &str| {
        let mut args = vec![
            "--json", "run", "--name", name, "--label", label, "--label", "site=x",
        ];
        args.extend_from_slice(&small);
        args.extend(["--", "true"]);
        let (code, out, err) = run(alice(&args));
        assert_eq!(code, 0, "{err}");
        job_of(&out)
    };
    let (train_a, eval, train_b) = (
        named("train", "team=ml"),
        named("eval", "team=ml"),
        named("train", "team=db"),
    );
    let status = get_json(&format!("{gm}/v1/jobs/{train_a}"));
    assert_eq!(status["name"], "train", "{status}");
    assert_eq!(status["labels"]["team"], "ml", "{status}");
    assert_eq!(status["labels"]["site"], "x", "{status}");
    let found = |query: &str| ids(&get_json(&format!("{gm}/v1/jobs?{query}")));
    assert_eq!(found("name=train"), vec![train_b, train_a]);
    assert_eq!(found("label=team=ml"), vec![eval, train_a]);
    assert_eq!(found("name=train&label=team=db"), vec![train_b]);
    assert_eq!(found("name=nothing"), Vec::<u64>::new());
    let (code, out, err) = run(alice(&["--json", "status", "--name", "eval"]));
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(ids(&page), vec![eval], "{page}");
    let (code, out, err) = run(alice(&["--json", "status", "--label", "team=db"]));
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(ids(&page), vec![train_b], "{page}");
    // Bob's list by the same name does not show alice's jobs.
    let (code, out, err) = run(megha_as(
        &gm,
        &c.bob,
        &["--json", "status", "--name", "train"],
    ));
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(ids(&page), Vec::<u64>::new(), "{page}");
    // Refusals name the field.
    for (extra, field) in [
        (r#""name":"""#.to_owned(), "name".to_owned()),
        (
            format!(r#""name":"{}""#, "n".repeat(129)),
            "name".to_owned(),
        ),
        (
            r#""labels":{"a=b":"1"}"#.to_owned(),
            "labels.a=b".to_owned(),
        ),
        (
            format!(
                r#""labels":{{{}}}"#,
                (0..33)
                    .map(|i| format!(r#""k{i}":"v""#))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            "labels".to_owned(),
        ),
    ] {
        let body = format!(
            r#"{{"tasks":[{{"resources":{{"cpu_millis":500,"memory_mb":64}},"executor":{{"type":"exec","command":["true"]}}}}],{extra}}}"#
        );
        let (status, _, answer) =
            tests::procs::http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
        let answer: Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(
            (status, answer["field"].as_str()),
            (422, Some(field.as_str())),
            "{answer}"
        );
    }
    let (status, _, answer) =
        tests::procs::http("GET", &format!("{gm}/v1/jobs?label=nokey"), None).expect("get");
    assert!(status == 400 && answer.contains("label"), "{answer}");

    // A GM restart while waiting: the waiter asks again and gets the outcome.
    let job = submit("sleep 4; exit 6");
    // Polling every 100 ms, it asks while the GM is down.
    let waiter = alice(&["wait", "--poll-interval", "0.1", &job.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("megha wait");
    wait_until("the task to run", Duration::from_secs(30), || {
        get_json(&format!("{gm}/v1/tasks/{job}/0"))["state"] == "running"
    });
    cluster.stop_and_restart_gm(0, Duration::from_millis(500));
    let waited = waiter.wait_with_output().expect("megha wait ends");
    assert_eq!(waited.status.code(), Some(6), "{waited:?}");
    assert!(
        String::from_utf8_lossy(&waited.stderr).contains("asking again"),
        "the waiter saw the GM go: {waited:?}"
    );

    // The spec outlives its job and the GM restart (the journal keeps it):
    // resubmit runs it again as a new job, which fails the same way; bob can
    // neither read alice's spec nor resubmit her job.
    let (code, out, err) = run(alice(&["resubmit", "--wait", &failed_3.to_string()]));
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("submitted job"), "{out}");
    let (code, _, err) = run(megha_as(&gm, &c.bob, &["resubmit", &failed_3.to_string()]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("404"), "{err}");

    // A GM that never answers: 1, after --give-up-after.
    let (code, _, err) = run(megha_as(
        "http://127.0.0.1:1",
        &c.alice,
        &["wait", "--give-up-after", "0.5", "7"],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("giving up"), "{err}");

    cluster.terminate_all_cleanly();
}
