//! Chaos in the docker-compose.yml cluster (issue 14): while the `loadgen` service
//! replays the 183-task sample trace (speedup 4), three faults are injected:
//!
//! 1. a worker container of LM 0 is killed (`docker kill`) and left dead: LM 0 marks
//!    its nodes down and reports its runs lost; their GMs run them again (the
//!    compose default MEGHA_MAX_ATTEMPTS=3);
//! 2. GM 1's container is killed (SIGKILL) and started again on the same journal
//!    volume (gm-data-1): it resumes the jobs it had accepted;
//! 3. LM 2's container is disconnected from the compose network for 20 s, then
//!    reconnected (with its service alias): its workers re-register, the GMs take its
//!    states again.
//!
//! Asserted: loadgen's own judgement (every accepted task ended, none started more
//! than once per run: once, plus once per retry or preemption), every task finished
//! or failed with a reason, no node ran two tasks at once, LM 0 declared the killed
//! worker lost with its 3 nodes down. Printed per fault: tasks submitted / finished
//! once / run twice / lost / retried and the time from the fault to recovery
//! (measured, never asserted against a limit).
//!
//! Skipped (says "SKIPPED" on stderr) without a Docker engine, as docker_compose.rs.

use std::collections::HashSet;
use std::time::{Duration, Instant};
use tests::checks::{assert_no_overlap_on_nodes, read_tasks_csv, Row};
use tests::compose::{docker, docker_unavailable, gm_ready, metric, say, start_cluster, Project};
use tests::procs::http_raw;

const TAG: &str = "[docker_compose_chaos]";
/// How long LM 2 stays off the network.
const DISCONNECTED: Duration = Duration::from_secs(20);

/// Polls `check` every 100 ms until it holds; panics naming `what` after `limit`.
fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// host:port a container's port 8080/9100 is published on now (0: it changes when the
/// container starts again), if it is.
fn published(container: &str, port: u16) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["port", container, &format!("{port}/tcp")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().find(|l| l.starts_with("0.0.0.0:"))?;
    Some(first.replace("0.0.0.0:", "127.0.0.1:"))
}

/// A metric sample `name{label="value"}` in the page of the service at `url`.
fn labelled(url: &str, name: &str, label: &str) -> Option<f64> {
    let (status, _, page) = http_raw("GET", &format!("http://{url}/metrics"), "", b"", &[]).ok()?;
    if status != 200 {
        return None;
    }
    let page = String::from_utf8_lossy(&page).into_owned();
    let prefix = format!("{name}{{{label}}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// A metric of one service, `None` while it does not answer.
fn try_metric(url: &str, name: &str) -> Option<f64> {
    let (status, _, page) = http_raw("GET", &format!("http://{url}/metrics"), "", b"", &[]).ok()?;
    (status == 200).then(|| tests::checks::metric_sum(&String::from_utf8_lossy(&page), name))
}

/// One fault's figures, from the replay's report and the services' counters.
struct Figures {
    fault: &'static str,
    scope: String,
    rows: Vec<Row>,
    retried: String,
    recovery: String,
}

#[test]
fn compose_cluster_loses_nothing_across_worker_gm_and_lm_faults() {
    if let Some(why) = docker_unavailable() {
        say(&format!(
            "docker compose chaos test SKIPPED: no Docker engine reachable ({why})"
        ));
        return;
    }
    let cluster = start_cluster("megha-chaos", TAG, &[("MEGHA_SPEEDUP", "4".into())]);
    let project = &cluster.project;
    let lm_container = |l: usize| project.containers(&format!("local-master-{l}"))[0].clone();
    let lms: Vec<String> = (0..3)
        .map(|l| project.published(&format!("local-master-{l}"), 9100))
        .collect();
    let workers0 = project.containers("worker-0");
    assert_eq!(workers0.len(), 2, "two workers for LM 0: {workers0:?}");
    let gm1 = project.containers("global-master-1")[0].clone();
    let lm2 = lm_container(2);
    say(&format!(
        "{TAG} loadgen seed 42 (its default), trace data/traces/YH_small.tr, speedup 4"
    ));

    let mut notes = Vec::new();
    let replay = std::thread::scope(|s| {
        let replay = s.spawn(|| project.try_run(&["run", "--rm", "--no-deps", "loadgen"]));
        let running = |l: usize| {
            tests::procs::get_json(&format!("http://{}/healthz", lms[l]))["running"]
                .as_u64()
                .unwrap_or(0)
        };
        wait_for(
            "LM 0 running 5 of its 6 nodes",
            Duration::from_secs(90),
            || running(0) >= 5,
        );

        // Faults 1 and 2 at once: a worker of LM 0 dies for good, GM 1 is killed and
        // started again on its journal.
        let lost_before = metric(&lms[..1], "megha_lm_tasks_lost_total");
        let killed = Instant::now();
        docker(&["kill", &workers0[0]]);
        docker(&["kill", "-s", "KILL", &gm1]);
        let gm_killed = Instant::now();
        docker(&["start", &gm1]);
        let mut worker_down = None;
        let mut gm_back = None;
        wait_for(
            "the dead worker declared lost and GM 1 ready again",
            Duration::from_secs(120),
            || {
                if worker_down.is_none()
                    && try_metric(&lms[0], "megha_lm_workers_lost_total") >= Some(1.0)
                {
                    worker_down = Some(killed.elapsed());
                }
                if gm_back.is_none() && published(&gm1, 8080).is_some_and(|gm| gm_ready(&gm)) {
                    gm_back = Some(gm_killed.elapsed());
                }
                worker_down.is_some() && gm_back.is_some()
            },
        );
        let nodes_down = metric(&lms[..1], "megha_lm_nodes_down");
        assert_eq!(nodes_down, 3.0, "LM 0 marks the dead worker's 3 nodes down");
        let lost0 = metric(&lms[..1], "megha_lm_tasks_lost_total") - lost_before;
        notes.push(format!(
            "worker: declared lost (its {nodes_down} nodes down) {:.1} s after the kill; {lost0} runs reported lost",
            worker_down.unwrap_or_default().as_secs_f64()
        ));
        notes.push(format!(
            "GM 1: ready again {:.1} s after the kill (started again at once)",
            gm_back.unwrap_or_default().as_secs_f64()
        ));

        // Fault 3: LM 2 off the network for 20 s.
        let network = project.network();
        docker(&["network", "disconnect", &network, &lm2]);
        let cut = Instant::now();
        std::thread::sleep(DISCONNECTED);
        docker(&[
            "network",
            "connect",
            "--alias",
            "local-master-2",
            &network,
            &lm2,
        ]);
        let joined = Instant::now();
        say(&format!(
            "{TAG} LM 2 disconnected for {:.1} s",
            cut.elapsed().as_secs_f64()
        ));
        // Recovered: every GM took a state of LM 2 newer than the reconnection, and
        // LM 2 has every node up again (its workers registered again).
        let gms_now = || -> Vec<Option<String>> {
            (0..3)
                .map(|g| {
                    let c = project.containers(&format!("global-master-{g}"))[0].clone();
                    published(&c, 8080)
                })
                .collect()
        };
        let gms = gms_now();
        let mut states_back = None;
        let mut nodes_back = None;
        wait_for(
            "LM 2 back: its states at every GM, its nodes up",
            Duration::from_secs(120),
            || {
                let since = joined.elapsed().as_secs_f64();
                if states_back.is_none()
                    && gms.iter().all(|gm| {
                        gm.as_ref().is_some_and(|gm| {
                            labelled(gm, "megha_gm_heartbeat_age_seconds", "lm=\"2\"")
                                .is_some_and(|age| age < since)
                        })
                    })
                {
                    states_back = Some(joined.elapsed());
                }
                if nodes_back.is_none() {
                    let lm = published(&lm2, 9100);
                    if lm.is_some_and(|lm| try_metric(&lm, "megha_lm_nodes_down") == Some(0.0)) {
                        nodes_back = Some(joined.elapsed());
                    }
                }
                states_back.is_some() && nodes_back.is_some()
            },
        );
        notes.push(format!(
            "LM 2: states accepted again by every GM {:.1} s after reconnecting, every node up {:.1} s after",
            states_back.unwrap_or_default().as_secs_f64(),
            nodes_back.unwrap_or_default().as_secs_f64()
        ));
        replay.join().expect("replay thread")
    });
    say(&format!(
        "{TAG} replay:\n{}",
        String::from_utf8_lossy(&replay.stdout)
    ));
    let out = &cluster.out;
    let problems = std::fs::read_to_string(out.join("problems.txt")).unwrap_or_default();
    let rows = read_tasks_csv(out);
    let lms_now: Vec<String> = (0..3)
        .map(|l| project.published(&format!("local-master-{l}"), 9100))
        .collect();
    let gms_now: Vec<String> = (0..3)
        .map(|g| project.published(&format!("global-master-{g}"), 8080))
        .collect();
    let lost_at = |l: usize| metric(&lms_now[l..=l], "megha_lm_tasks_lost_total");
    let retried = |g: usize| metric(&gms_now[g..=g], "megha_gm_tasks_retried_total");
    let recovered = metric(&gms_now[1..2], "megha_gm_recovered_tasks_total");
    let in_scope = |keep: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| keep(r)).cloned().collect();
    let figures = [
        Figures {
            fault: "worker kill",
            scope: "tasks last placed on LM 0".into(),
            rows: in_scope(&|r| r.lm == Some(0)),
            retried: format!("{} runs lost at LM 0", lost_at(0)),
            recovery: notes[0].clone(),
        },
        Figures {
            fault: "GM kill",
            scope: "tasks queued by GM 1".into(),
            rows: in_scope(&|r| r.gm == Some(1)),
            retried: format!(
                "{recovered} resumed from its journal, {} retried since its restart",
                retried(1)
            ),
            recovery: notes[1].clone(),
        },
        Figures {
            fault: "LM disconnect",
            scope: "tasks last placed on LM 2".into(),
            rows: in_scope(&|r| r.lm == Some(2)),
            retried: format!("{} runs lost at LM 2", lost_at(2)),
            recovery: notes[2].clone(),
        },
    ];
    let twice = listed(&problems, "tasks started more than once");
    let never = listed(&problems, "submitted tasks never finished");
    for f in &figures {
        let ids: HashSet<(u64, u32)> = f.rows.iter().map(|r| (r.job, r.task)).collect();
        let finished = f.rows.iter().filter(|r| r.finish.is_some()).count();
        let run_twice = twice.iter().filter(|t| ids.contains(t)).count();
        say(&format!(
            "{TAG} chaos figures, {}: {} ({}) submitted {}, finished once {}, failed {}, run twice {run_twice}, lost {}, retried: {}; recovery: {}",
            f.fault,
            f.scope,
            ids.len(),
            ids.len(),
            finished - run_twice.min(finished),
            f.rows.len() - finished,
            never.iter().filter(|t| ids.contains(t)).count(),
            f.retried,
            f.recovery
        ));
    }
    say(&format!(
        "{TAG} all: submitted {}, finished {}, retried by the GMs {}, runs lost at LMs {}",
        rows.len(),
        rows.iter().filter(|r| r.finish.is_some()).count(),
        (0..3).map(retried).sum::<f64>(),
        (0..3).map(lost_at).sum::<f64>()
    ));

    assert!(
        replay.status.success(),
        "the replay failed ({}): {problems}\n{}",
        replay.status,
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(rows.len(), 183, "YH_small has 183 tasks");
    assert!(twice.is_empty() && never.is_empty(), "{problems}");
    assert_no_overlap_on_nodes(&rows);
    assert!(lost_at(0) >= 1.0, "the killed worker ran nothing");
    assert_failures_have_reasons(project, &gms_now, &rows);

    let dir = cluster.dir.clone();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The (trace job, task) pairs loadgen's problems.txt lists under `title`.
fn listed(problems: &str, title: &str) -> Vec<(u64, u32)> {
    let mut lines = problems
        .lines()
        .skip_while(|l| !l.ends_with(&format!("{title}:")));
    lines.next();
    lines
        .map_while(|l| l.trim().strip_prefix("trace job "))
        .filter_map(|l| {
            let (job, task) = l.split_once(" task ")?;
            Some((job.parse().ok()?, task.parse().ok()?))
        })
        .collect()
}

/// A task that did not finish failed with a reason, as its GM says (after its
/// retries): read through the GMs' job API with the admin token.
fn assert_failures_have_reasons(project: &Project, gms: &[String], rows: &[Row]) {
    let unfinished = rows.iter().filter(|r| r.finish.is_none()).count();
    if unfinished == 0 {
        return;
    }
    let token = project.run(&[
        "run",
        "--rm",
        "--no-deps",
        "--entrypoint",
        "cat",
        "secrets",
        "/secrets/admin-token",
    ]);
    let bearer = format!("Bearer {}", String::from_utf8_lossy(&token.stdout).trim());
    let get = |url: &str| -> serde_json::Value {
        let (status, _, body) = http_raw("GET", url, "", b"", &[("Authorization", &bearer)])
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(status, 200, "GET {url}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("GET {url}: {e}"))
    };
    let mut failed = 0;
    for gm in gms {
        let list = get(&format!("http://{gm}/v1/jobs?state=failed&limit=1000"));
        for job in list["jobs"].as_array().into_iter().flatten() {
            let id = &job["job"];
            let status = get(&format!("http://{gm}/v1/jobs/{id}"));
            for t in status["tasks"].as_array().into_iter().flatten() {
                if t["state"] == "failed" {
                    failed += 1;
                    say(&format!(
                        "{TAG} failed task of job {id} at {gm}: {}",
                        t["failure"]
                    ));
                    assert!(!t["failure"].is_null(), "no reason: {t}");
                }
            }
        }
    }
    assert_eq!(
        failed, unfinished,
        "every task that did not finish failed with a reason at its GM"
    );
}
