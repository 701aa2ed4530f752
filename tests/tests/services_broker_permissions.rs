//! The broker enforces who may write what (issue 32): the users of a cluster are
//! made from the definitions file `loadgen broker-users` writes (what docker compose
//! loads at the broker's start, and what the loopback script sets with rabbitmqctl),
//! with hashed passwords and the permissions of their kind: only an LM writes the
//! state exchange, only LMs and GMs the event exchange, an observer reads events.
//!
//! A GM (GM user), an LM (LM user) and an observer (observer user) run a job: the
//! GM's view has the LM's state, the observer sees the GM's and the LM's events, and
//! the designated GM hears its LRA container end (it reads the task events).
//! Then an intruder LM, also numbered 0 but with fewer nodes, logs in as the
//! observer: the broker refuses its state, and the GM's view of LM 0 never changes,
//! although the GM runs without `--lm-broker-user` (only the broker guards it here).
//! With every user allowed `.*` (as before), the intruder's state reached the view.

use common::events::TaskEventKind;
use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::lone_lm::LoneLm;
use tests::observer::Observer;
use tests::procs::{bin_dir, get_json, http, random_hex, submit_tasks, LoopbackCluster, RoleArgs};

#[test]
fn only_an_lm_writes_state_and_the_cluster_runs_under_these_permissions() {
    let broker = require_rabbitmq();
    let tag = std::process::id();
    let dir = std::env::temp_dir().join(format!("megha-broker-perms-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let users = [("gm", "gm"), ("lm0", "lm"), ("obs", "observer")];
    let name = |who: &str| format!("megha-p{tag}-{who}");
    let mut passwords = Vec::new();
    let mut args: Vec<String> = vec![
        "broker-users".into(),
        "--cluster-name".into(),
        "megha".into(),
        "--vhost".into(),
        broker.vhost().into(),
    ];
    for (who, kind) in users {
        let password = random_hex(12);
        let file = dir.join(format!("password-{who}"));
        std::fs::write(&file, &password).expect("password file");
        args.extend([
            "--user".into(),
            format!("{}={kind}={}", name(who), file.display()),
        ]);
        passwords.push((who, password));
    }
    let out = std::process::Command::new(bin_dir().join("loadgen"))
        .args(&args)
        .output()
        .expect("run loadgen broker-users");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let definitions = dir.join("definitions.json");
    std::fs::write(&definitions, &out.stdout).expect("definitions");
    let names: Vec<String> = users.iter().map(|(who, _)| name(who)).collect();
    broker.import_users(
        &definitions,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let url = |who: &str| {
        let password = &passwords.iter().find(|(w, _)| *w == who).expect("user").1;
        broker.url_of(&name(who), password)
    };

    // The observer logs in with its hashed password and may read events.
    let observer = Observer::start(&url("obs"));
    let cluster = LoopbackCluster::start_with_args(
        1,
        1,
        3,
        1,
        &url("gm"),
        &dir.join("logs"),
        &[],
        &RoleArgs {
            lm_amqp: vec![url("lm0")],
            ..RoleArgs::default()
        },
    );
    let gm = cluster.gms[0].url.clone();
    let lm0_nodes = || {
        let view = get_json(&format!("{gm}/v1/nodes?summary=true"));
        let lm = &view["lms"][0];
        (lm["known"] == true)
            .then(|| lm["nodes"].as_u64())
            .flatten()
    };
    assert_eq!(lm0_nodes(), Some(3), "the GM reads the LM's state");
    let accepted = submit_tasks(
        &gm,
        r#"{"resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":10}"#,
        2,
    );
    let job = accepted["job"].as_u64().expect("job id");
    let has = |kinds: &Vec<TaskEventKind>, what: fn(&TaskEventKind) -> bool| kinds.iter().any(what);
    let events = observer.settle(job, |e| {
        e.len() == 2
            && e.values().all(|k| {
                has(k, |k| matches!(k, TaskEventKind::Queued { .. }))
                    && has(k, |k| matches!(k, TaskEventKind::Finished { .. }))
            })
    });
    for index in 0..2 {
        let kinds = events.get(&index).cloned().unwrap_or_default();
        assert!(
            has(&kinds, |k| matches!(k, TaskEventKind::Queued { .. }))
                && has(&kinds, |k| matches!(k, TaskEventKind::Started { .. }))
                && has(&kinds, |k| matches!(k, TaskEventKind::Finished { .. })),
            "task {index}: the GM's (queued) and the LM's (started, finished) events reach the observer: {kinds:?}"
        );
    }

    // The designated GM (GM 0) learns that its LRA containers ended from the task
    // events, so the GM's broker user must be able to read them: before, its read
    // permission left the event exchange out, the subscription was refused
    // (ACCESS_REFUSED, retried for ever) and an ended container's tags counted on.
    let lra = r#"{"containers":[{"resources":{"cpu_millis":100,"memory_mb":1},"tags":["w"],
        "count":1,"duration_ms":100}]}"#;
    let (status, _, body) = http("POST", &format!("{gm}/v1/lras"), Some(lra)).expect("post");
    assert_eq!(status, 202, "{body}");
    let ended = || cluster.metric(&cluster.gms, "megha_gm_lra_containers_ended_total");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ended() < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the designated GM never heard its LRA container end (the task events under the GM's broker permissions); logs in {}",
            dir.join("logs").display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // An intruder LM 0 of 2 nodes (heartbeat 50 ms) logging in as the observer.
    let mut intruder = LoneLm::spawn_lm(&dir.join("intruder"), &url("obs"), &[]);
    let mut intruder_worker = LoneLm::spawn_worker(&dir.join("intruder"), &intruder.url, &[]);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        assert_eq!(
            lm0_nodes(),
            Some(3),
            "the intruder's state (an observer's broker user) reached the GM's view"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let health = get_json(&format!("{gm}/healthz"));
    assert_eq!(health["ready"], true, "{health}");
    intruder_worker.kill();
    intruder.kill();
    observer.close();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
