//! Chaos in the docker-compose.yml cluster (issue 14), the last phase of
//! `compose_cluster_runs_every_task_exactly_once` (same cluster: the images and the
//! start are paid once). While the `loadgen` service replays the 183-task sample
//! trace again (speedup 4, its report in `out/chaos`), three faults are injected:
//!
//! 1. a worker container of LM 0 is killed (`docker kill`) and left dead: LM 0 marks
//!    its 3 nodes down and reports its runs lost; their GMs run them again (the
//!    compose default MEGHA_MAX_ATTEMPTS=3);
//! 2. GM 1's container is killed (SIGKILL) while it has an unfinished job and started
//!    again on the same journal volume (gm-data-1): it resumes the jobs it accepted;
//! 3. LM 2's container is disconnected from the compose network for 20 s, then
//!    reconnected (with its service alias): its workers register again, the GMs take
//!    its states again.
//!
//! Asserted: loadgen's own judgement (every accepted task ended, none started more
//! than once per run: once, plus once per retry or preemption), every job of the
//! phase ended at its GM (none left `active`) and every task that did not finish
//! failed there with a reason, no node ran two tasks at once, LM 0 declared the
//! killed worker lost with its 3 nodes down and reported at least one run lost.
//! Printed per fault: tasks submitted / finished once / run twice / lost / retried and
//! the time from the fault to recovery (measured, never asserted against a limit).

use super::report::Report;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tests::checks::{metric_sum, Row};
use tests::compose::{docker, gm_ready, metric, say, Cluster, Project};
use tests::procs::http_raw;

const TAG: &str = "[docker_compose chaos]";
/// How long LM 2 stays off the network.
const DISCONNECTED: Duration = Duration::from_secs(20);
/// The replay's speedup: long enough (~60 s) for the three faults.
pub(crate) const SPEEDUP: &str = "4";

/// Polls `check` every 100 ms until it holds; panics naming `what` after `limit`.
pub(crate) fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// host:port a container's `port` is published on now (ports are 0: it changes when
/// the container starts again), if it is.
pub(crate) fn published(container: &str, port: u16) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["port", container, &format!("{port}/tcp")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(first.replace("0.0.0.0:", "127.0.0.1:"))
}

/// The metrics page of the service at host:port `url`, `None` while it does not answer.
fn page(url: &str) -> Option<String> {
    let (status, _, body) = http_raw("GET", &format!("http://{url}/metrics"), "", b"", &[]).ok()?;
    (status == 200).then(|| String::from_utf8_lossy(&body).into_owned())
}

/// A metric family's sum at one service, `None` while it does not answer.
pub(crate) fn try_metric(url: &str, name: &str) -> Option<f64> {
    page(url).map(|p| metric_sum(&p, name))
}

/// The sample `name{label}` (e.g. `lm="2"`) at one service.
fn labelled(url: &str, name: &str, label: &str) -> Option<f64> {
    let prefix = format!("{name}{{{label}}} ");
    page(url)?
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// The one container of a (not scaled) service.
pub(crate) fn container(project: &Project, service: &str) -> String {
    project.containers(service)[0].clone()
}

/// host:port of every LM's (or GM's) HTTP port, now.
pub(crate) fn urls(project: &Project, service: &str, port: u16) -> Vec<String> {
    (0..3)
        .map(|i| project.published(&format!("{service}-{i}"), port))
        .collect()
}

/// `compose run` arguments of a replay of the 183-task sample trace at [`SPEEDUP`]
/// by the loadgen service against `gms` (its `--gm`), its report in `out` (under
/// the container's /out).
pub(crate) fn replay_args<'a>(gms: &'a str, out: &'a str) -> [&'a str; 14] {
    [
        "run",
        "--rm",
        "--no-deps",
        "loadgen",
        "loadgen",
        "replay",
        "--trace",
        "data/traces/YH_small.tr",
        "--gm",
        gms,
        "--speedup",
        SPEEDUP,
        "--out",
        out,
    ]
}

/// What the LMs and GMs counted before the phase (the first replay's counts stay in
/// the counters), and the jobs the GMs knew then: (GM, job).
struct Before {
    lost: Vec<f64>,
    retried: Vec<f64>,
    jobs: HashSet<(usize, u64)>,
}

/// The chaos phase on a running cluster (every node up, nothing running).
pub fn faults_during_a_replay(cluster: &Cluster) {
    let project = &cluster.project;
    let t0 = Instant::now();
    let lms = urls(project, "local-master", 9100);
    let gms = urls(project, "global-master", 8080);
    let api = Api::new(project);
    let before = Before {
        lost: lms
            .iter()
            .map(|u| metric(std::slice::from_ref(u), "megha_lm_tasks_lost_total"))
            .collect(),
        retried: gms
            .iter()
            .map(|u| metric(std::slice::from_ref(u), "megha_gm_tasks_retried_total"))
            .collect(),
        jobs: api.known_jobs(&gms),
    };
    let workers0 = project.containers("worker-0");
    assert_eq!(workers0.len(), 2, "two workers for LM 0: {workers0:?}");
    let gm1 = container(project, "global-master-1");
    let lm2 = container(project, "local-master-2");
    let out = cluster.out.join("chaos");
    say(&format!(
        "{TAG} loadgen seed 42 (its default), trace data/traces/YH_small.tr, speedup {SPEEDUP}, report in {}",
        out.display()
    ));
    let gm_list =
        "http://global-master-0:8080,http://global-master-1:8080,http://global-master-2:8080";
    let replay_args = replay_args(gm_list, "/out/chaos");

    let mut notes = Vec::new();
    let replay = std::thread::scope(|s| {
        let replay = s.spawn(|| project.try_run(&replay_args));
        let running = |l: usize| {
            tests::procs::get_json(&format!("http://{}/healthz", lms[l]))["running"]
                .as_u64()
                .unwrap_or(0)
        };
        // Both workers of LM 0 busy (3 nodes each); GM 1 with a job not ended, some of
        // whose tasks it launched in this replay (the others queued or launching).
        let launched_before = metric(&gms[1..2], "megha_gm_launched_total");
        wait_for(
            "LM 0 running 4 tasks and GM 1 holding a job it launched from",
            Duration::from_secs(90),
            || {
                running(0) >= 4
                    && try_metric(&gms[1], "megha_gm_journal_jobs").is_some_and(|j| j >= 1.0)
                    && try_metric(&gms[1], "megha_gm_launched_total")
                        .is_some_and(|l| l >= launched_before + 3.0)
            },
        );
        let journal = metric(&gms[1..2], "megha_gm_journal_jobs");
        let launched = metric(&gms[1..2], "megha_gm_launched_total") - launched_before;

        // Faults 1 and 2 at once: a worker of LM 0 dies for good, GM 1 is killed and
        // started again on its journal.
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
        notes.push(format!(
            "nodes marked down (the worker declared lost) {:.1} s after the kill",
            worker_down.unwrap_or_default().as_secs_f64()
        ));
        notes.push(format!(
            "killed with {journal} unfinished jobs in its journal, {launched} of their tasks launched; ready again {:.1} s after the kill (started again at once)",
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
        let off = cut.elapsed();
        // Recovered: every GM took a state of LM 2 newer than the reconnection, and
        // LM 2 has every node up (its workers checked in or registered again).
        let gms_now: Vec<String> = ["global-master-0", "global-master-1", "global-master-2"]
            .iter()
            .map(|g| published(&container(project, g), 8080).expect("GM port"))
            .collect();
        let mut states_back = None;
        let mut nodes_back = None;
        wait_for(
            "LM 2 back: its states at every GM, its nodes up",
            Duration::from_secs(120),
            || {
                let since = joined.elapsed().as_secs_f64();
                if states_back.is_none()
                    && gms_now.iter().all(|gm| {
                        labelled(gm, "megha_gm_heartbeat_age_seconds", "lm=\"2\"")
                            .is_some_and(|age| age < since)
                    })
                {
                    states_back = Some(joined.elapsed());
                }
                if nodes_back.is_none()
                    && published(&lm2, 9100)
                        .is_some_and(|lm| try_metric(&lm, "megha_lm_nodes_down") == Some(0.0))
                {
                    nodes_back = Some(joined.elapsed());
                }
                states_back.is_some() && nodes_back.is_some()
            },
        );
        notes.push(format!(
            "off the network {:.1} s; its states taken by every GM {:.1} s after reconnecting, every node up {:.1} s after",
            off.as_secs_f64(),
            states_back.unwrap_or_default().as_secs_f64(),
            nodes_back.unwrap_or_default().as_secs_f64()
        ));
        replay.join().expect("replay thread")
    });
    say(&format!(
        "{TAG} replay:\n{}",
        String::from_utf8_lossy(&replay.stdout)
    ));
    judge(project, &api, &out, &before, &notes, &replay);
    say(&format!(
        "{TAG} phase done in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
}

/// One fault's scope in the replay's report and what the services counted.
struct Figures<'a> {
    fault: &'static str,
    scope: &'static str,
    rows: Vec<&'a Row>,
    retried: String,
    recovery: &'a str,
}

/// Prints the per-fault figures and asserts that nothing was lost or ran twice.
fn judge(
    project: &Project,
    api: &Api,
    out: &std::path::Path,
    before: &Before,
    notes: &[String],
    replay: &std::process::Output,
) {
    let report = Report::read(out);
    let rows = &report.rows;
    let lms = urls(project, "local-master", 9100);
    let gms = urls(project, "global-master", 8080);
    let lost_at = |l: usize| metric(&lms[l..=l], "megha_lm_tasks_lost_total") - before.lost[l];
    // GM 1's counters started again with it.
    let retried = |g: usize| {
        let now = metric(&gms[g..=g], "megha_gm_tasks_retried_total");
        if g == 1 {
            now
        } else {
            now - before.retried[g]
        }
    };
    let recovered = metric(&gms[1..2], "megha_gm_recovered_tasks_total");
    let scope = |keep: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| keep(r)).collect();
    let figures = [
        Figures {
            fault: "worker kill",
            scope: "tasks last placed on LM 0",
            rows: scope(&|r| r.lm == Some(0)),
            retried: format!("{} runs reported lost by LM 0", lost_at(0)),
            recovery: &notes[0],
        },
        Figures {
            fault: "GM kill",
            scope: "tasks queued by GM 1",
            rows: scope(&|r| r.gm == Some(1)),
            retried: format!(
                "{recovered} resumed from its journal, {} retried after its restart",
                retried(1)
            ),
            recovery: &notes[1],
        },
        Figures {
            fault: "LM disconnect",
            scope: "tasks last placed on LM 2",
            rows: scope(&|r| r.lm == Some(2)),
            retried: format!("{} runs reported lost by LM 2", lost_at(2)),
            recovery: &notes[2],
        },
    ];
    for f in &figures {
        say(&format!(
            "{TAG} figures, {}: {}: {}; retried: {}; recovery: {}",
            f.fault,
            f.scope,
            report.figures(&f.rows),
            f.retried,
            f.recovery
        ));
    }
    report.say_all(
        TAG,
        &format!(
            ", retried by the GMs {}, runs reported lost by the LMs {}",
            (0..3).map(retried).sum::<f64>(),
            (0..3).map(lost_at).sum::<f64>()
        ),
    );
    report.assert_nothing_lost("chaos", replay);
    assert!(lost_at(0) >= 1.0, "the killed worker ran nothing");
    assert_gms_ended_every_job(TAG, api, &gms, &before.jobs, rows);
}

/// The GMs' job API, read with the cluster's admin token.
pub(crate) struct Api {
    bearer: String,
}

impl Api {
    pub(crate) fn new(project: &Project) -> Api {
        let token = project.run(&[
            "run",
            "--rm",
            "--no-deps",
            "--entrypoint",
            "cat",
            "secrets",
            "/secrets/admin-token",
        ]);
        let token = String::from_utf8_lossy(&token.stdout).trim().to_owned();
        Api {
            bearer: format!("Bearer {token}"),
        }
    }

    pub(crate) fn get(&self, url: &str) -> serde_json::Value {
        let (status, _, body) = http_raw("GET", url, "", b"", &[("Authorization", &self.bearer)])
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(status, 200, "GET {url}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// (GM, job) for every job the GMs at host:port `gms` (in GM-id order) show.
    pub(crate) fn known_jobs(&self, gms: &[String]) -> HashSet<(usize, u64)> {
        gms.iter()
            .enumerate()
            .flat_map(|(g, gm)| {
                self.jobs(gm)
                    .into_iter()
                    .filter_map(move |j| j["job"].as_u64().map(|id| (g, id)))
            })
            .collect()
    }

    /// Every job the GM at host:port `gm` shows (its status), page by page.
    pub(crate) fn jobs(&self, gm: &str) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        let mut after = String::new();
        loop {
            let page = self.get(&format!("http://{gm}/v1/jobs?limit=1000{after}"));
            all.extend(page["jobs"].as_array().cloned().unwrap_or_default());
            match page["next"].as_u64() {
                Some(next) => after = format!("&after={next}"),
                None => return all,
            }
        }
    }
}

/// Every job of the phase ended at its GM (none still `active`: an accepted task
/// left unended is lost), and every task that did not finish (loadgen's report)
/// failed at its GM with a reason, after its retries. `known`: (GM, job) pairs from
/// before the phase.
pub(crate) fn assert_gms_ended_every_job(
    tag: &str,
    api: &Api,
    gms: &[String],
    known: &HashSet<(usize, u64)>,
    rows: &[Row],
) {
    let (mut jobs, mut tasks, mut failed, mut active) = (0, 0, 0, Vec::new());
    for (g, gm) in gms.iter().enumerate() {
        for job in api.jobs(gm) {
            let id = job["job"].as_u64().expect("job id");
            if known.contains(&(g, id)) {
                continue;
            }
            jobs += 1;
            tasks += job["tasks"].as_u64().unwrap_or(0);
            if job["state"] == "active" {
                active.push(format!("GM {g}: {job}"));
            }
            if job["states"]["failed"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            for i in 0..job["tasks"].as_u64().unwrap_or(0) {
                let t = api.get(&format!("http://{gm}/v1/tasks/{id}/{i}"));
                if t["state"] == "failed" {
                    failed += 1;
                    say(&format!(
                        "{tag} GM {g}: task {id}.{i} failed in run {} of {}: {}",
                        t["attempt"], t["max_attempts"], t["failure"]
                    ));
                    assert!(!t["failure"].is_null(), "failed with no reason: {t}");
                }
            }
        }
    }
    say(&format!(
        "{tag} the GMs show {jobs} jobs of the phase ({tasks} tasks; a restarted GM forgets its jobs that ended before), {failed} tasks failed"
    ));
    assert!(active.is_empty(), "jobs never ended: {active:?}");
    let unfinished = rows.iter().filter(|r| r.finish.is_none()).count();
    assert_eq!(
        failed, unfinished,
        "every task that did not finish failed at its GM, with a reason"
    );
}
