//! Who may name a preempting priority class (issue 37): the tokens file lists, per
//! user, the preempting classes that user may name (`priority_classes`). Alice has
//! none: her `urgent` job is refused (403 naming `priority_class`, the class and
//! her) on every way in, with nothing spent (no job id, no idempotency key) and
//! nothing in the job list; bob, who has `urgent`, gets his job; another spelling
//! of the class is no class for anyone. Bob's `preempting_jobs_per_minute` caps
//! his urgent jobs per GM: one more is a 429 with `Retry-After`.

use crate::calls::{call, json, Cred};
use tests::procs::{credentials, http_raw, LoopbackCluster};

/// The GMs' classes for this phase: `batch` (the default) and `urgent`, preempting.
pub const CLASSES: &str = "batch:0,urgent:100:preempting";

/// The test credentials' tokens file with bob allowed `urgent`, at most 2 jobs of
/// it a minute, written to `dir`.
pub fn tokens_file(dir: &std::path::Path) -> std::path::PathBuf {
    let c = credentials();
    let text = std::fs::read_to_string(&c.tokens_file).expect("tokens");
    let bob = format!("token = \"{}\"\n", c.bob);
    assert!(text.contains(&bob), "bob's entry");
    let text = text.replace(
        &bob,
        &format!("{bob}priority_classes = [\"urgent\"]\npreempting_jobs_per_minute = 2\n"),
    );
    std::fs::create_dir_all(dir).expect("dir");
    let path = dir.join("tokens.toml");
    std::fs::write(&path, text).expect("tokens file");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

fn job(class: &str, kind: &str) -> String {
    format!(
        r#"{{"priority_class":{class},"tasks":[{{"kind":"{kind}","resources":{{"cpu_millis":100,"memory_mb":1}},"duration_ms":10}}]}}"#
    )
}

/// POST /v1/jobs to `gm` as the user of `token`, with `headers` besides.
fn post(gm: &str, body: &str, token: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let bearer = format!("Bearer {token}");
    let mut all = vec![("Authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    let (status, _, answer) = http_raw(
        "POST",
        &format!("{gm}/v1/jobs"),
        "application/json",
        body.as_bytes(),
        &all,
    )
    .expect("POST /v1/jobs");
    (status, String::from_utf8_lossy(&answer).into_owned())
}

/// The phase: on a cluster of 2 GMs started with [`CLASSES`] and [`tokens_file`].
pub fn only_allowed_users_name_a_preempting_class(cluster: &LoopbackCluster) {
    let c = credentials();
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let urgent = job(r#""urgent""#, "short");
    let (status, answer) = post(gm0, &job(r#""batch""#, "short"), &c.admin, &[]);
    assert_eq!(status, 202, "the admin's job: {answer}");

    // Alice: refused, on the direct path, with an Idempotency-Key, and for
    // GUARANTEED work that GM 1 would forward to the designated GM 0.
    let forwarded = job(r#""urgent""#, "guaranteed");
    for (gm, body, headers) in [
        (gm0, &urgent, vec![]),
        (gm0, &urgent, vec![("Idempotency-Key", "alice-urgent")]),
        (gm1, &forwarded, vec![]),
        (gm0, &job(r#""\u0075rgent""#, "short"), vec![]),
    ] {
        let (status, answer) = post(gm, body, &c.alice, &headers);
        assert_eq!(status, 403, "{gm} {body}: {answer}");
        let answer = json(&answer);
        assert_eq!(answer["field"], "priority_class", "{answer}");
        let why = answer["error"].as_str().expect("error");
        assert!(why.contains("urgent") && why.contains("alice"), "{why}");
    }
    // Another spelling is no class at all, for bob as for alice.
    for spelled in [r#""URGENT""#, r#""urgent ""#, r#""urgent%20""#] {
        for token in [&c.alice, &c.bob] {
            let (status, answer) = post(gm0, &job(spelled, "short"), token, &[]);
            assert_eq!(status, 400, "{spelled}: {answer}");
            assert_eq!(json(&answer)["field"], "priority_class");
        }
    }
    // Nothing was taken: the refused key is free for another body.
    let (status, answer) = post(
        gm0,
        &job(r#""batch""#, "short"),
        &c.alice,
        &[("Idempotency-Key", "alice-urgent")],
    );
    assert_eq!(
        status, 202,
        "the key was not taken by the refusal: {answer}"
    );
    let (status, answer) = post(gm0, &urgent, &c.bob, &[]);
    assert_eq!(status, 202, "bob may: {answer}");
    let (status, answer) = post(gm1, &forwarded, &c.bob, &[]);
    assert_eq!(status, 202, "bob's forwarded job: {answer}");
    // Bob's cap: GM 0 took his urgent job and the one GM 1 forwarded to it; a
    // third within the minute is refused (and creates nothing), a batch job not.
    let (status, head, answer) = http_raw(
        "POST",
        &format!("{gm0}/v1/jobs"),
        "application/json",
        urgent.as_bytes(),
        &[("Authorization", &format!("Bearer {}", c.bob))],
    )
    .expect("POST /v1/jobs");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status, 429, "over bob's cap: {answer}");
    assert!(head.to_lowercase().contains("retry-after"), "{head}");
    assert_eq!(json(&answer)["field"], "priority_class", "{answer}");
    assert!(answer.contains("at most 2"), "{answer}");
    assert!(
        cluster.metric(&cluster.gms, "megha_gm_preempting_capped_total") >= 1.0,
        "counted"
    );
    // A job naming no class gets `batch`, which does not preempt: open to alice.
    let (status, answer) = post(gm0, &job("null", "short"), &c.alice, &[]);
    assert_eq!(status, 202, "{answer}");

    // The cluster's job list (every GM's) holds the five jobs accepted (the
    // admin's, alice's two, bob's two) and none of the refused ones.
    let (_, list) = call(
        "GET",
        &format!("{gm0}/v1/jobs"),
        b"",
        false,
        Cred::User(&c.admin),
    );
    let list = json(&list);
    let users: Vec<&str> = list["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        // An admin's job names no user unless it says so.
        .map(|j| j["user"].as_str().unwrap_or("none"))
        .collect();
    let count = |who: &str| users.iter().filter(|u| **u == who).count();
    assert_eq!(
        (users.len(), count("none"), count("alice"), count("bob")),
        (5, 1, 2, 2),
        "{list}"
    );
    assert!(
        cluster.metric(
            &cluster.gms,
            "megha_auth_refused_total{reason=\"forbidden\"}"
        ) >= 4.0
    );
}
