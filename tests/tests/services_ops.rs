//! Operators see failures and accounting (issue 38 items 3 and 4), through the
//! services: one GM with a journal, one LM with a data dir, one worker of two
//! 1-core nodes, on loopback with a real RabbitMQ, exec tasks, `megha` run as a
//! process with each user's token.
//!
//! - `megha node drain`: a non-admin is refused (403), an unknown node or LM is 404
//!   naming it, a repeat changes nothing; the drained node takes no new task while
//!   the other does, and the task running there finishes there; `megha nodes` and
//!   `megha top` mark it; undrained, it takes work again; an LM restarted on its data dir keeps it
//!   drained;
//! - `GET /v1/usage` (`megha usage`): per user, the runs and their reserved CPU and
//!   memory x run time match the tasks' own start and end times (within 1 ms per
//!   run: the accounting keeps milliseconds); a user sees their own usage only
//!   (another's is 403); a GM killed with -9 and restarted on its journal answers
//!   the same;
//! - a pipeline's child outgrowing the task's memory limit ends the task failed,
//!   out of memory, as `megha wait` (137) and `megha status` say; the accounting
//!   has what the runs used as their worker measured it (CPU time, peak memory);
//!   a worker killed with -9 shows its nodes `down` in `megha nodes` and `megha top`.

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::run_megha as run;
use tests::procs::{
    credentials, get_json, http, job_of, megha_as, wait_until, LoopbackCluster, RoleArgs,
};

/// (node, started_at_us, ended_at_us) of each task of `job` (`tasks` of them).
fn runs_of(gm: &str, job: u64, tasks: u32) -> Vec<(u64, u64, u64)> {
    (0..tasks)
        .map(|i| {
            let t = get_json(&format!("{gm}/v1/tasks/{job}/{i}"));
            assert_eq!(t["state"], "finished", "{t}");
            assert_eq!(t["attempt"], 1, "{t}");
            let field = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k}: {t}"));
            (field("node"), field("started_at_us"), field("ended_at_us"))
        })
        .collect()
}

#[test]
fn drained_nodes_take_no_new_work_and_usage_adds_up_across_a_restart() {
    let broker = require_rabbitmq();
    let (mut cluster, dir) = LoopbackCluster::start_small_journaled("megha-ops", &broker.url);
    let gm = cluster.gms[0].url.clone();
    let c = credentials();
    let as_user = |token: &str, args: &[&str]| run(megha_as(&gm, token, args));
    let submit = |token: &str, count: &str, cpu_millis: &str, seconds: &str| {
        let args = [
            "--json",
            "run",
            "--count",
            count,
            "--cpu-millis",
            cpu_millis,
            "--memory-mb",
            "64",
            "--",
            "sleep",
            seconds,
        ];
        let (code, out, err) = as_user(token, &args);
        assert_eq!(code, 0, "{err}");
        job_of(&out)
    };
    let wait = |token: &str, job: u64| {
        let (code, out, err) = as_user(token, &["wait", &job.to_string()]);
        assert_eq!(code, 0, "job {job}: {out}{err}");
    };

    // A long task of alice's holds half of one node (1 core each).
    let long = submit(&c.alice, "1", "500", "8");
    wait_until("the long task to run", Duration::from_secs(30), || {
        get_json(&format!("{gm}/v1/tasks/{long}/0"))["state"] == "running"
    });
    let x = get_json(&format!("{gm}/v1/tasks/{long}/0"))["node"]
        .as_u64()
        .expect("its node");
    let name = format!("lm0/node{x}");

    // Refusals: a non-admin (403), an unknown node or LM (404 naming it).
    let (code, _, err) = as_user(&c.alice, &["node", "drain", &name]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("403") && err.contains("admin"), "{err}");
    let (code, _, err) = as_user(&c.admin, &["node", "drain", "lm0/node9"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("404") && err.contains("node: node 9"), "{err}");
    let (code, _, err) = as_user(&c.admin, &["node", "drain", "lm7/node0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("404") && err.contains("lm: lm 7"), "{err}");
    for (path, field) in [("lms/x/nodes/0", "lm"), ("lms/0/nodes/-1", "node")] {
        let url = format!("{gm}/v1/{path}/drain");
        let (status, _, body) = http("POST", &url, None).expect("post");
        assert_eq!(status, 400, "{url}: {body}");
        assert!(
            body.contains(&format!(r#""field":"{field}""#)),
            "{url}: {body}"
        );
    }

    // Drained (a repeat changes nothing); its running task runs on.
    let (code, out, err) = as_user(&c.admin, &["--json", "node", "drain", &name]);
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (
            &answer["drained"],
            &answer["changed"],
            &answer["running_tasks"],
            &answer["durable"]
        ),
        (
            &Value::Bool(true),
            &Value::Bool(true),
            &Value::from(1),
            &Value::Bool(true)
        ),
        "{answer}"
    );
    let (code, out, err) = as_user(&c.admin, &["node", "drain", &name]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("was already drained"), "{out}");
    let (code, out, err) = as_user(&c.admin, &["nodes"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        (out.lines()).any(|l| l.split_whitespace().nth(2) == Some(&*x.to_string())
            && l.ends_with("drained")),
        "{out}"
    );

    let (code, out, err) = as_user(&c.admin, &["--json", "top", "--once"]);
    assert_eq!(code, 0, "{err}");
    let top: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (&top["lms"][0]["drained"], &top["lms"][0]["down"]),
        (&Value::from(1), &Value::from(0)),
        "{top}"
    );

    // New work lands on the other node only (three half-core tasks: two at a time
    // there, the third waits although the drained node has half a core free),
    // while the drained one finishes its task.
    let during = submit(&c.alice, "3", "500", "1");
    wait(&c.alice, during);
    let during_runs = runs_of(&gm, during, 3);
    assert!(
        during_runs.iter().all(|(node, _, _)| *node != x),
        "{during_runs:?}"
    );
    wait(&c.alice, long);
    let long_runs = runs_of(&gm, long, 1);
    assert_eq!(long_runs[0].0, x, "the drained node's task finished there");
    assert!(
        during_runs.iter().all(|(_, _, end)| *end < long_runs[0].2),
        "the drained node had room all along: {during_runs:?} {long_runs:?}"
    );

    // Undrained: both nodes take work (two tasks at once, one on each).
    let (code, out, err) = as_user(&c.admin, &["node", "undrain", &name]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("undrained"), "{out}");
    let after = submit(&c.bob, "2", "1000", "2");
    wait(&c.bob, after);
    let after_runs = runs_of(&gm, after, 2);
    let nodes: BTreeSet<u64> = after_runs.iter().map(|r| r.0).collect();
    assert!(nodes.contains(&x), "{after_runs:?}");

    // Usage: the reserved resources (alice's half a core, bob's one; 64 MiB) x
    // each run's own run time.
    let expect = |runs: &[(u64, u64, u64)]| -> (u64, f64) {
        let wall: u64 = runs.iter().map(|(_, s, e)| e - s).sum();
        (runs.len() as u64, wall as f64 / 1e6)
    };
    let alice_runs: Vec<_> = long_runs.iter().chain(&during_runs).copied().collect();
    let (alice_n, alice_wall) = expect(&alice_runs);
    let (bob_n, bob_wall) = expect(&after_runs);
    let check = |line: &Value, runs: u64, wall: f64, cores: f64| {
        assert_eq!(line["runs"], runs, "{line}");
        // The accounting keeps whole milliseconds of each run.
        let tolerance = 0.001 * runs as f64 + 1e-9;
        let close = |key: &str, want: f64, scale: f64| {
            let got = line[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: {line}"));
            assert!(
                (got - want).abs() <= tolerance * scale,
                "{key}: {got}, expected {want} ± {}: {line}",
                tolerance * scale
            );
        };
        close("wall_seconds", wall, 1.0);
        close("cpu_seconds_reserved", wall * cores, cores);
        close("memory_mb_seconds_reserved", wall * 64.0, 64.0);
    };
    let usage = get_json(&format!("{gm}/v1/usage"));
    let lines = usage["lines"].as_array().expect("lines");
    assert_eq!(lines.len(), 2, "{usage}");
    let line_of = |report: &Value, user: &str| -> Value {
        (report["lines"].as_array().into_iter().flatten())
            .find(|l| l["user"] == user)
            .cloned()
            .unwrap_or_else(|| panic!("no line of {user}: {report}"))
    };
    check(&line_of(&usage, "alice"), alice_n, alice_wall, 0.5);
    check(&line_of(&usage, "bob"), bob_n, bob_wall, 1.0);
    assert_eq!(line_of(&usage, "alice")["queue"], "default", "{usage}");
    // Sleeping runs, measured: next to no CPU.
    for (user, runs) in [("alice", alice_n), ("bob", bob_n)] {
        let line = line_of(&usage, user);
        assert_eq!(line["runs_measured"], runs, "{line}");
        let cpu = line["cpu_seconds_used"].as_f64().expect("cpu used");
        assert!((0.0..0.2 * runs as f64).contains(&cpu), "{line}");
    }
    let total = &usage["total"];
    assert_eq!(total["runs"], alice_n + bob_n, "{usage}");
    let want = alice_wall * 0.5 + bob_wall;
    let got = total["cpu_seconds_reserved"].as_f64().expect("total cpu");
    assert!(
        (got - want).abs() <= 0.001 * (alice_n + bob_n) as f64,
        "{got} vs {want}: {usage}"
    );
    // A time range after every run: nothing.
    let later = get_json(&format!("{gm}/v1/usage?since={}", u64::MAX / 2));
    assert_eq!(later["lines"], Value::Array(vec![]), "{later}");

    // Users see their own usage only.
    let (code, out, err) = as_user(&c.alice, &["--json", "usage", "--since", "7d"]);
    assert_eq!(code, 0, "{err}");
    let own: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(own["lines"].as_array().map(Vec::len), Some(1), "{own}");
    check(&line_of(&own, "alice"), alice_n, alice_wall, 0.5);
    let (code, _, err) = as_user(&c.alice, &["usage", "--user", "bob"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("403") && err.contains("user"), "{err}");
    let (code, out, err) = as_user(&c.admin, &["usage", "--user", "bob"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("bob") && !out.contains("alice"), "{out}");
    let (status, _, body) =
        http("GET", &format!("{gm}/v1/usage?since=yesterday"), None).expect("get");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(r#""field":"since""#), "{body}");

    // Kept in the journal: a GM killed with -9 and restarted answers the same.
    cluster.crash_and_restart_gm(0, Duration::from_millis(300));
    wait_until(
        "the restarted GM to answer",
        Duration::from_secs(30),
        || http("GET", &format!("{gm}/v1/usage"), None).is_ok_and(|(s, _, _)| s == 200),
    );
    let again = get_json(&format!("{gm}/v1/usage"));
    assert_eq!(again["lines"], usage["lines"], "after the restart");

    // Kept in the LM's data dir: an LM restarted keeps the node drained.
    let (code, _, err) = as_user(&c.admin, &["node", "drain", &name]);
    assert_eq!(code, 0, "{err}");
    cluster.crash_and_restart_lm(0);
    let drained_at_lm = || {
        let view = get_json(&format!("{gm}/v1/cluster"));
        view["lms"][0]["state"]["nodes"][x as usize]["drained"] == true
    };
    wait_until(
        "the restarted LM to answer, node still drained",
        Duration::from_secs(30),
        drained_at_lm,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Failures as an operator and a user see them (issue 38 item 3): a task whose
/// child (not the command itself: a pipeline) outgrows its memory limit ends
/// `failed`, out of memory, and `megha wait` and `megha status` say so; a worker
/// killed with -9 shows its nodes `down` in `megha nodes` and `megha top` once its
/// LM declared it dead.
#[test]
fn an_oom_kill_and_a_dead_worker_show_as_such() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-ops-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A worker silent for 4 s is dead (the default is 10 s; a shorter lease
    // fences a worker of a loaded machine).
    let extra = RoleArgs {
        lm: vec!["--worker-timeout-ms".into(), "4000".into()],
        ..RoleArgs::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let gm = cluster.gms[0].url.clone();
    let c = credentials();
    let as_user = |token: &str, args: &[&str]| run(megha_as(&gm, token, args));

    let grow = "python3 -c 'b = bytearray(512 << 20); import time; time.sleep(5)' | cat";
    let (code, out, err) = as_user(
        &c.alice,
        &["--json", "run", "--memory-mb", "64", "--", "sh", "-c", grow],
    );
    assert_eq!(code, 0, "{err}");
    let job = job_of(&out);
    let (code, out, err) = as_user(&c.alice, &["wait", &job.to_string()]);
    // 128 + SIGKILL, with the reason.
    assert_eq!(code, 137, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("ran out of memory"),
        "{out}{err}"
    );
    let t = get_json(&format!("{gm}/v1/tasks/{job}/0"));
    assert_eq!(t["state"], "failed", "{t}");
    assert_eq!(t["failure"]["signal"]["out_of_memory"], true, "{t}");
    let (_, out, err) = as_user(&c.alice, &["status", &job.to_string()]);
    assert!(out.contains("out of memory"), "{out}{err}");

    // What runs used, as their workers measured it: a task that spins on the CPU
    // for half a second of its own CPU time, then the accounting of both runs.
    let spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass";
    let (code, out, err) = as_user(
        &c.alice,
        &[
            "--json",
            "run",
            "--wait",
            "--memory-mb",
            "64",
            "--",
            "python3",
            "-c",
            spin,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let usage = get_json(&format!("{gm}/v1/usage?user=alice"));
    let line = &usage["lines"][0];
    assert_eq!(
        (&line["runs"], &line["runs_measured"]),
        (&Value::from(2), &Value::from(2)),
        "{usage}"
    );
    let cpu = line["cpu_seconds_used"].as_f64().expect("cpu used");
    let wall = line["wall_seconds"].as_f64().expect("wall");
    assert!(cpu >= 0.5 && cpu <= wall + 0.5, "{usage}");
    // The OOM-killed run reached its 64 MiB limit.
    let peak = line["memory_peak_mb"].as_u64().expect("a peak");
    assert!((60..=65).contains(&peak), "{usage}");
    assert!(
        usage["used"]
            .as_str()
            .is_some_and(|u| u.starts_with("measured")),
        "{usage}"
    );

    // The worker killed: its LM declares it dead, and both its nodes show down.
    cluster.workers[0].kill();
    let (mut nodes, mut top) = (String::new(), Value::Null);
    wait_until(
        "megha nodes and top to show the worker's nodes down",
        Duration::from_secs(30),
        || {
            nodes = as_user(&c.admin, &["nodes"]).1;
            top = serde_json::from_str(&as_user(&c.admin, &["--json", "top", "--once"]).1)
                .unwrap_or_default();
            let down_rows = nodes.lines().filter(|l| l.ends_with("down")).count();
            down_rows == 2 && top["lms"][0]["down"] == 2
        },
    );
    assert!(!nodes.contains("drained"), "{nodes}");
    let _ = std::fs::remove_dir_all(&dir);
}
