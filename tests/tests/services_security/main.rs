//! Who may call what (issue 16), over processes on loopback with a real RabbitMQ:
//! a table over every endpoint of every role (no credential, wrong credential,
//! another user's credential, the right one), and the attacks of the issue, each
//! refused with nothing applied: a forged `finished` report to the LM, a launch sent
//! straight to an LM, a start sent straight to a worker, a slot takeover through a
//! registration naming a foreign callback, a spoofed forwarding header, work pushed
//! into a GM through its internal endpoint. Also: `/healthz` and `/metrics` stay open
//! and no log line or page shows a credential.
//!
//! Also: only the users the tokens file lets may name a preempting priority class
//! ([`classes`]).
//!
//! Layout: [`calls`] (credentials and calls), the phases [`attacks`], [`users`],
//! [`table`] and [`classes`]; the tests (here) run them on one loopback cluster each.

/// A message as bincode on the wire, for the default cluster name.
macro_rules! enc {
    ($v:expr) => {
        common::codec::encode(&common::ClusterName::default(), $v).expect("encode")
    };
}

mod attacks;
mod calls;
mod classes;
mod ownership;
mod table;
mod users;

use calls::{call, json, Cred};
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{credentials, wait_until, LoopbackCluster};

#[test]
fn only_who_may_calls_each_endpoint_and_the_attacks_are_refused() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-security-{}", std::process::id()));
    let logs = dir.join("logs");
    let cluster =
        LoopbackCluster::start_with_queues(2, 1, 2, 1, &broker.url, &logs, &["a:0.5:0", "b:0.5:1"]);
    let c = credentials();
    attacks::are_refused_with_nothing_applied(&cluster);
    let work = users::alice_submits_to_her_queue(&cluster);
    table::every_endpoint_answers_only_who_may_call(&cluster, &work);
    ownership::every_route_naming_a_job_hides_other_users_jobs(&cluster, &work);
    ownership::the_cluster_view_shows_a_user_only_their_tasks(&cluster);
    users::a_users_jobs_stay_hidden_from_others(&cluster, work.job);
    users::a_new_token_works_after_sighup(&cluster);

    // No credential in any log line.
    for entry in std::fs::read_dir(&logs).expect("logs") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for secret in [&c.secret, &c.admin, &c.alice, &c.bob] {
            assert!(
                !text.contains(secret.as_str()),
                "{} shows a credential",
                path.display()
            );
        }
        assert!(!text.contains("OPEN MODE"), "{} runs open", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ownership survives a GM restart: the job's user is in the GM's journal, so after a
/// crash its submitter still sees it and another user still gets 404.
#[test]
fn a_users_job_stays_theirs_across_a_gm_restart() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-security-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extra = tests::procs::RoleArgs {
        gm: vec![
            "--data-dir".into(),
            dir.join("gm0-data").display().to_string(),
        ],
        ..Default::default()
    };
    let mut cluster =
        LoopbackCluster::start_with_args(1, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    let c = credentials();
    let task = r#"{"tasks":[{"resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}]}"#;
    let gm = cluster.gms[0].url.clone();
    let (status, answer) = call(
        "POST",
        &format!("{gm}/v1/jobs"),
        task.as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let job = json(&answer)["job"].as_u64().expect("job id");
    cluster.crash_and_restart_gm(0, Duration::from_millis(200));
    let gm = cluster.gms[0].url.clone();
    let url = format!("{gm}/v1/jobs/{job}");
    wait_until(
        "the restarted GM to know alice's job",
        Duration::from_secs(20),
        || call("GET", &url, b"", false, Cred::User(&c.admin)).0 == 200,
    );
    assert_eq!(call("GET", &url, b"", false, Cred::User(&c.alice)).0, 200);
    assert_eq!(call("GET", &url, b"", false, Cred::User(&c.bob)).0, 404);
    let (_, list) = call(
        "GET",
        &format!("{gm}/v1/jobs"),
        b"",
        false,
        Cred::User(&c.alice),
    );
    assert!(
        list.contains(&job.to_string()),
        "alice lists her job: {list}"
    );
    let (_, list) = call(
        "GET",
        &format!("{gm}/v1/jobs"),
        b"",
        false,
        Cred::User(&c.bob),
    );
    assert!(!list.contains(&job.to_string()), "bob does not: {list}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 37: a preempting priority class is for the users the tokens file lets
/// name it (and admins); see [`classes`].
#[test]
fn only_users_allowed_a_preempting_class_may_name_it() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-security-classes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tokens = classes::tokens_file(&dir);
    let extra = tests::procs::RoleArgs {
        gm: vec![
            "--priority-class".into(),
            classes::CLASSES.into(),
            "--tokens-file".into(),
            tokens.display().to_string(),
        ],
        ..Default::default()
    };
    let cluster =
        LoopbackCluster::start_with_args(2, 1, 2, 1, &broker.url, &dir.join("logs"), &[], &extra);
    classes::only_allowed_users_name_a_preempting_class(&cluster);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
