//! The cluster answers as one (issue 38 item 1), through the services: two GMs with
//! users' tokens, one LM, one worker, exec tasks, on loopback with a real RabbitMQ.
//!
//! - alice's jobs submitted to GM 1 are read, their tasks read, their logs fetched
//!   (also followed, streamed to the end) and cancelled through GM 0, with her token;
//! - through GM 0, bob gets for alice's GM 1 job exactly the answer of a missing one
//!   (404, the same body), and his DELETE leaves it running;
//! - `GET /v1/jobs` on either GM lists both GMs' jobs, newest first (or oldest), and
//!   pages of one job each list every job once; `all_gms=false` lists one GM's;
//! - a request claiming to be forwarded without the cluster credential is refused;
//!   one forwarded for a job of a third GM is a 421, never forwarded again;
//! - a job on GM 0 runs after jobs of GM 1 (`after_jobs`, issue 35): held
//!   (`blocked`) while the other runs, released when GM 0 hears from GM 1 that it
//!   ended, at once for one that ended already; bob naming alice's job gets the
//!   400 of a missing job;
//! - GM 1 down: GM 0 answers 503 naming GM 1 for its job, lists its own jobs with
//!   GM 1 named in `unreachable`, and refuses (503) a job after one of GM 1's.

use serde_json::Value;
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{credentials, http_raw, wait_until, LoopbackCluster};

/// `method url` with `token` (and exactly the extra `headers`): (status, body).
fn call(
    method: &str,
    url: &str,
    token: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let bearer = format!("Bearer {token}");
    let mut all = vec![("Authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    let (status, _, body) = http_raw(method, url, "application/json", body.as_bytes(), &all)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn get(url: &str, token: &str) -> (u16, Value) {
    let (status, body) = call("GET", url, token, "", &[]);
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, value)
}

/// `POST {gm}/v1/jobs` with `job` as `token`: (status, body).
fn post(gm: &str, token: &str, job: &Value) -> (u16, String) {
    call(
        "POST",
        &format!("{gm}/v1/jobs"),
        token,
        &job.to_string(),
        &[],
    )
}

/// One exec task running `command`, after the jobs `after` (`(job, when)`).
fn job_of(command: &str, after: &[(u64, &str)]) -> Value {
    let after: Vec<Value> = after
        .iter()
        .map(|(job, when)| serde_json::json!({"job": job, "when": when}))
        .collect();
    let mut job = serde_json::json!({"tasks": [{
        "resources": {"cpu_millis": 500, "memory_mb": 64},
        "executor": {"type": "exec", "command": ["sh", "-c", command]}}]});
    if !after.is_empty() {
        job["after_jobs"] = Value::Array(after);
    }
    job
}

/// Submits `job` to `gm` as `token`: its job id (the answer must be 202).
fn accepted(gm: &str, token: &str, job: &Value) -> u64 {
    let (status, body) = post(gm, token, job);
    assert_eq!(status, 202, "{body}");
    serde_json::from_str::<Value>(&body).expect("json")["job"]
        .as_u64()
        .expect("job id")
}

/// Submits one exec task running `command` to `gm` as `token`: its job id.
fn submit(gm: &str, token: &str, command: &str) -> u64 {
    accepted(gm, token, &job_of(command, &[]))
}

fn state(gm: &str, token: &str, job: u64) -> String {
    let (status, v) = get(&format!("{gm}/v1/jobs/{job}"), token);
    assert_eq!(status, 200, "{v}");
    v["state"].as_str().unwrap_or("?").to_owned()
}

fn ids(page: &Value) -> Vec<u64> {
    page["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs in {page}"))
        .iter()
        .map(|j| j["job"].as_u64().expect("id"))
        .collect()
}

/// Every page of `GET {gm}/v1/jobs?{query}` with one job per page.
fn paged(gm: &str, token: &str, query: &str) -> Vec<u64> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) = get(&format!("{gm}/v1/jobs?limit=1&{query}{after}"), token);
        assert_eq!(status, 200, "{page}");
        all.extend(ids(&page));
        match page["next"].as_u64() {
            Some(n) => after = format!("&after={n}"),
            None => return all,
        }
        assert!(all.len() < 100, "paging does not end: {all:?}");
    }
}

#[test]
fn any_gm_answers_for_any_job_of_the_cluster() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-any-gm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = LoopbackCluster::start(2, 1, 2, 1, &broker.url, &dir.join("logs"));
    let (gm0, gm1) = (cluster.gms[0].url.clone(), cluster.gms[1].url.clone());
    let c = credentials();

    // Alice's jobs: one on GM 0, then two on GM 1 (one short with output, one long).
    let first = submit(&gm0, &c.alice, "true");
    let short = submit(&gm1, &c.alice, "echo hello-from-gm1; sleep 1; echo bye");
    let long = submit(&gm1, &c.alice, "echo started; exec sleep 600");
    assert_eq!(short >> 48, 1, "GM 1 numbers its jobs");
    assert_eq!(first >> 48, 0);

    // Read, task, logs (plain and followed) through GM 0.
    let (status, job) = get(&format!("{gm0}/v1/jobs/{short}"), &c.alice);
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["job"].as_u64(), Some(short), "{job}");
    let (status, task) = get(&format!("{gm0}/v1/tasks/{short}/0"), &c.alice);
    assert_eq!(status, 200, "{task}");
    // A log exists once the task started (409 before).
    wait_until(
        "the short job's task starts",
        Duration::from_secs(30),
        || get(&format!("{gm0}/v1/tasks/{short}/0"), &c.alice).1["started_at_us"].is_u64(),
    );
    let (status, followed) = call(
        "GET",
        &format!("{gm0}/v1/tasks/{short}/0/logs?follow=true"),
        &c.alice,
        "",
        &[],
    );
    assert_eq!(status, 200, "{followed}");
    assert!(
        followed.contains("hello-from-gm1") && followed.contains("bye"),
        "the followed log, relayed by GM 0, holds the whole output: {followed}"
    );
    wait_until("the short job finishes", Duration::from_secs(30), || {
        state(&gm0, &c.alice, short) == "finished"
    });
    let (status, log) = call(
        "GET",
        &format!("{gm0}/v1/tasks/{short}/0/logs"),
        &c.alice,
        "",
        &[],
    );
    assert_eq!(status, 200, "{log}");
    assert_eq!(log, "hello-from-gm1\nbye\n");

    // Its spec as submitted, through GM 0.
    let (status, spec) = get(&format!("{gm0}/v1/jobs/{short}/spec"), &c.alice);
    assert_eq!(status, 200, "{spec}");
    assert_eq!(
        spec["tasks"][0]["executor"]["command"][2], "echo hello-from-gm1; sleep 1; echo bye",
        "{spec}"
    );

    // Bob through GM 0: alice's GM 1 job answers like a missing one, and stays hers.
    wait_until("the long job's task runs", Duration::from_secs(30), || {
        get(&format!("{gm1}/v1/tasks/{long}/0"), &c.alice).1["state"] == "running"
    });
    let missing = long + 1_000_000;
    for (method, path) in [
        ("GET", "/v1/jobs/{}"),
        ("GET", "/v1/tasks/{}/0"),
        ("GET", "/v1/tasks/{}/0/logs"),
        ("GET", "/v1/jobs/{}/spec"),
        ("DELETE", "/v1/jobs/{}"),
    ] {
        let theirs = call(
            method,
            &format!("{gm0}{}", path.replace("{}", &long.to_string())),
            &c.bob,
            "",
            &[],
        );
        let nobodys = call(
            method,
            &format!("{gm0}{}", path.replace("{}", &missing.to_string())),
            &c.bob,
            "",
            &[],
        );
        assert_eq!(
            theirs.0, 404,
            "bob's {method} {path} on alice's job: {theirs:?}"
        );
        assert_eq!(
            (theirs.0, theirs.1.replace(&long.to_string(), "N")),
            (nobodys.0, nobodys.1.replace(&missing.to_string(), "N")),
            "bob's {method} {path} answers unlike a missing job"
        );
    }
    let (_, task) = get(&format!("{gm1}/v1/tasks/{long}/0"), &c.alice);
    assert_eq!(task["state"], "running", "bob's DELETE did nothing: {task}");

    // A forwarding claimed without the cluster credential is refused; a forwarded
    // request (with it) for a job of another GM than the one asked is a 421.
    let (status, body) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{long}"),
        &c.alice,
        "",
        &[("x-megha-forwarded-by", "1")],
    );
    assert!(
        matches!(status, 401 | 403),
        "a spoofed forwarding: {status} {body}"
    );
    let (status, body) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{long}"),
        &c.alice,
        "",
        &[
            ("x-megha-forwarded-by", "1"),
            ("x-megha-cluster-token", &c.secret),
        ],
    );
    assert_eq!(
        status, 421,
        "a forwarded request is never forwarded again: {body}"
    );

    // The cluster's list, from either GM, newest first; paged; one GM's on request.
    for gm in [&gm0, &gm1] {
        let (status, page) = get(&format!("{gm}/v1/jobs"), &c.alice);
        assert_eq!(status, 200, "{page}");
        assert_eq!(ids(&page), vec![long, short, first], "{page}");
        assert_eq!(paged(gm, &c.alice, ""), vec![long, short, first]);
        assert_eq!(
            paged(gm, &c.alice, "order=oldest"),
            vec![first, short, long]
        );
    }
    let (_, page) = get(&format!("{gm0}/v1/jobs?all_gms=false"), &c.alice);
    assert_eq!(ids(&page), vec![first], "{page}");
    let (_, page) = get(&format!("{gm0}/v1/jobs"), &c.bob);
    assert_eq!(
        ids(&page),
        Vec::<u64>::new(),
        "bob sees none of alice's jobs: {page}"
    );

    // A job on GM 0 that runs after a job of GM 1 (issue 35): held while that runs;
    // bob naming alice's job gets the answer of a missing one.
    let waiting = accepted(&gm0, &c.alice, &job_of("true", &[(long, "any")]));
    let theirs = post(&gm0, &c.bob, &job_of("true", &[(long, "any")]));
    let nobodys = post(&gm0, &c.bob, &job_of("true", &[(missing, "any")]));
    assert_eq!(theirs.0, 400, "{theirs:?}");
    assert_eq!(
        (theirs.0, theirs.1.replace(&long.to_string(), "N")),
        (nobodys.0, nobodys.1.replace(&missing.to_string(), "N")),
        "bob naming alice's job answers unlike a missing job"
    );
    assert!(theirs.1.contains("after_jobs[0].job"), "{theirs:?}");
    std::thread::sleep(Duration::from_secs(3));
    let (_, task) = get(&format!("{gm0}/v1/tasks/{waiting}/0"), &c.alice);
    assert_eq!(
        task["state"], "blocked",
        "held while GM 1's job runs: {task}"
    );
    // After a job of GM 1 that finished already: runs at once.
    let after_done = accepted(&gm0, &c.alice, &job_of("true", &[(short, "ok")]));
    wait_until(
        "the job after a finished job of GM 1 runs",
        Duration::from_secs(30),
        || state(&gm0, &c.alice, after_done) == "finished",
    );

    // Cancel through GM 0.
    let (status, body) = call(
        "DELETE",
        &format!("{gm0}/v1/jobs/{long}"),
        &c.alice,
        "",
        &[],
    );
    assert_eq!(status, 202, "{body}");
    wait_until("the long job is cancelled", Duration::from_secs(30), || {
        state(&gm1, &c.alice, long) == "cancelled"
    });
    // GM 0 learns it from GM 1 and runs the job waiting for it.
    wait_until(
        "the job after GM 1's job runs",
        Duration::from_secs(30),
        || state(&gm0, &c.alice, waiting) == "finished",
    );

    // Usage (issue 38 item 4) through either GM sums both GMs' runs of alice's.
    let runs = |url: String| {
        let (status, v) = get(&url, &c.alice);
        assert_eq!(status, 200, "{v}");
        v["total"]["runs"].as_u64().unwrap_or_else(|| panic!("{v}"))
    };
    wait_until(
        "the cancelled run is charged",
        Duration::from_secs(30),
        || runs(format!("{gm1}/v1/usage?all_gms=false")) >= 2,
    );
    let own0 = runs(format!("{gm0}/v1/usage?all_gms=false"));
    let own1 = runs(format!("{gm1}/v1/usage?all_gms=false"));
    assert!(
        own0 >= 3 && own1 >= 2,
        "GM 0 ran 3 of alice's jobs, GM 1 2: {own0} {own1}"
    );
    assert_eq!(runs(format!("{gm0}/v1/usage")), own0 + own1);
    assert_eq!(runs(format!("{gm1}/v1/usage")), own0 + own1);

    // GM 1 down: 503 naming it; GM 0's own jobs still listed, GM 1 named as missing.
    cluster.gms[1].kill();
    let (status, body) = get(&format!("{gm0}/v1/jobs/{short}"), &c.alice);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["gm"], 1, "{body}");
    assert!(
        body["error"].as_str().unwrap_or("").contains("GM 1"),
        "{body}"
    );
    let (status, page) = get(&format!("{gm0}/v1/jobs"), &c.alice);
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), vec![after_done, waiting, first], "{page}");
    assert_eq!(page["unreachable"][0]["gm"], 1, "{page}");
    let (status, usage) = get(&format!("{gm0}/v1/usage"), &c.alice);
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["unreachable"][0]["gm"], 1, "{usage}");
    assert_eq!(usage["total"]["runs"].as_u64(), Some(own0), "{usage}");
    // A job after a job of the GM that is down: not accepted, 503 naming the field.
    let (status, body) = post(&gm0, &c.alice, &job_of("true", &[(short, "ok")]));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("after_jobs[0].job"), "{body}");

    // GM 1 was killed: the rest are stopped as the cluster drops.
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
