//! GM 0's standby in the docker-compose.yml cluster (profile `standby`, issue 14 item
//! 5), the last phase of `compose_cluster_runs_every_task_exactly_once`, after
//! [`super::chaos`] (same cluster: `global-master-0-standby` was started with it,
//! waiting on the journal volume gm-data-0). While the `loadgen` service replays the
//! 183-task sample trace again (speedup 4, GM 0 given as
//! `http://global-master-0:8080|http://global-master-0-standby:8080`, its report in
//! `out/standby`), GM 0's primary container is killed (SIGKILL) once it holds an
//! unfinished job some of whose tasks it launched, and left dead.
//!
//! Asserted: the standby stood by until then (`/healthz` 503 `standby`,
//! `megha_gm_standby 1`), then took the journal over (`megha_gm_takeovers_total 1`),
//! became ready and serves GM 0's id: it launches GM 0's queued tasks, and the jobs
//! the primary accepted in the phase are listed at the standby under the same ids;
//! `megha status` in the loadgen container (MEGHA_GM names both addresses) answers
//! from the standby; loadgen's own judgement (every accepted task ended, none
//! started twice),
//! every job of the phase ended at its GM, no node ran two tasks at once.
//! Printed: tasks submitted / finished once / run twice / lost, and the time from the
//! kill to the standby ready and to its first launch (the queue resumed), measured,
//! never asserted against a limit.

use super::chaos::{
    assert_gms_ended_every_job, container, published, replay_args, try_metric, urls, wait_for, Api,
    SPEEDUP,
};
use super::report::Report;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tests::compose::{docker, gm_ready, say, Cluster};
use tests::procs::http_raw;

const TAG: &str = "[docker_compose standby]";
/// The compose service of GM 0's standby.
pub const STANDBY: &str = "global-master-0-standby";

/// The standby's `/healthz`: (HTTP status, body).
fn healthz(url: &str) -> Option<(u16, serde_json::Value)> {
    let (status, _, body) = http_raw("GET", &format!("http://{url}/healthz"), "", b"", &[]).ok()?;
    Some((status, serde_json::from_slice(&body).ok()?))
}

/// The standby phase on a running cluster started with the standby.
pub fn primary_killed_during_a_replay(cluster: &Cluster) {
    let project = &cluster.project;
    let t0 = Instant::now();
    let api = Api::new(project);
    let gms = urls(project, "global-master", 8080);
    let standby = project.published(STANDBY, 8080);
    // (GM, job) known before the phase.
    let known = api.known_jobs(&gms);

    // Standing by: not ready, serving nothing.
    let (status, health) = healthz(&standby).expect("the standby answers /healthz");
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["status"], "standby", "{health}");
    assert_eq!(try_metric(&standby, "megha_gm_standby"), Some(1.0));
    assert_eq!(try_metric(&standby, "megha_gm_takeovers_total"), Some(0.0));

    let gm0 = container(project, "global-master-0");
    let out = cluster.out.join("standby");
    say(&format!(
        "{TAG} loadgen seed 42 (its default), trace data/traces/YH_small.tr, speedup {SPEEDUP}, report in {}",
        out.display()
    ));
    let gm_list = format!(
        "http://global-master-0:8080|http://{STANDBY}:8080,http://global-master-1:8080,http://global-master-2:8080"
    );
    let args = replay_args(&gm_list, "/out/standby");
    let mut accepted_by_primary = Vec::new();
    let (replay, ready_after, resumed_after) = std::thread::scope(|s| {
        let replay = s.spawn(|| project.try_run(&args));
        let launched_before = try_metric(&gms[0], "megha_gm_launched_total").unwrap_or(0.0);
        wait_for(
            "GM 0 holding a job it launched from",
            Duration::from_secs(90),
            || {
                try_metric(&gms[0], "megha_gm_journal_jobs").is_some_and(|j| j >= 1.0)
                    && try_metric(&gms[0], "megha_gm_launched_total")
                        .is_some_and(|l| l >= launched_before + 3.0)
            },
        );
        accepted_by_primary = api
            .jobs(&gms[0])
            .into_iter()
            .filter_map(|j| j["job"].as_u64())
            .filter(|id| !known.contains(&(0, *id)))
            .collect();
        let journal = try_metric(&gms[0], "megha_gm_journal_jobs").unwrap_or(0.0);
        docker(&["kill", "-s", "KILL", &gm0]);
        let killed = Instant::now();
        say(&format!(
            "{TAG} GM 0's primary killed with {journal} unfinished jobs in its journal ({} jobs of the phase accepted)",
            accepted_by_primary.len()
        ));
        let (mut ready, mut resumed) = (None, None);
        wait_for(
            "the standby ready and launching GM 0's tasks",
            Duration::from_secs(120),
            || {
                if ready.is_none() && gm_ready(&standby) {
                    ready = Some(killed.elapsed());
                }
                if resumed.is_none()
                    && try_metric(&standby, "megha_gm_launched_total").is_some_and(|l| l >= 1.0)
                {
                    resumed = Some(killed.elapsed());
                }
                ready.is_some() && resumed.is_some()
            },
        );
        let replay = replay.join().expect("replay thread");
        (
            replay,
            ready.unwrap_or_default(),
            resumed.unwrap_or_default(),
        )
    });
    say(&format!(
        "{TAG} replay:\n{}",
        String::from_utf8_lossy(&replay.stdout)
    ));
    assert!(published(&gm0, 8080).is_none(), "GM 0's primary stays dead");
    assert_eq!(try_metric(&standby, "megha_gm_standby"), Some(0.0));
    assert_eq!(try_metric(&standby, "megha_gm_takeovers_total"), Some(1.0));
    let recovered = try_metric(&standby, "megha_gm_recovered_tasks_total").unwrap_or(0.0);

    // Loadgen's judgement and GM 0's figures.
    let report = Report::read(&out);
    let of_gm0: Vec<_> = report.rows.iter().filter(|r| r.gm == Some(0)).collect();
    say(&format!(
        "{TAG} figures, GM 0 primary kill: tasks queued by GM 0: {}; {recovered} resumed from its journal by the standby; standby ready {:.1} s after the kill, its first launch (queue resumed) {:.1} s after",
        report.figures(&of_gm0),
        ready_after.as_secs_f64(),
        resumed_after.as_secs_f64()
    ));
    report.say_all(TAG, "");
    report.assert_nothing_lost("standby", &replay);

    // The standby serves GM 0's id: the primary's jobs under the same ids.
    let at_standby: HashSet<u64> = api
        .jobs(&standby)
        .into_iter()
        .filter_map(|j| j["job"].as_u64())
        .collect();
    let missing: Vec<_> = accepted_by_primary
        .iter()
        .filter(|id| !at_standby.contains(id))
        .collect();
    assert!(
        !accepted_by_primary.is_empty() && missing.is_empty(),
        "jobs the primary accepted, not at the standby: {missing:?} (standby: {at_standby:?})"
    );
    // `megha` in the loadgen container (its MEGHA_GM names both addresses of GM 0)
    // reaches the standby: the dead primary's address is skipped.
    let job = accepted_by_primary[0].to_string();
    let status = project.run(&[
        "run",
        "--rm",
        "--no-deps",
        "loadgen",
        "megha",
        "--json",
        "status",
        &job,
    ]);
    let status: serde_json::Value =
        serde_json::from_slice(&status.stdout).expect("megha --json status is JSON");
    assert_eq!(status["job"]["job"].to_string(), job, "{status}");
    assert_eq!(status["job"]["state"], "finished", "{status}");
    let gms_now = [standby, gms[1].clone(), gms[2].clone()];
    assert_gms_ended_every_job(TAG, &api, &gms_now, &known, &report.rows);
    say(&format!(
        "{TAG} phase done in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
}
