//! docker-compose.yml end to end: the offline images (scripts/docker-local-images.sh,
//! binaries built on the host), RabbitMQ + 3 GMs + 3 LMs + 2 workers per LM (scaled
//! replicas taking `--slot auto`), the `loadgen` profile service replaying
//! data/traces/YH_small.tr, and every task run exactly once; then exec tasks and a
//! map-reduce DAG whose stages pass files through the workers' `/shared`; then,
//! on the same cluster (it saves the image build and the start, ~80 s), the chaos
//! phase of [`chaos`]: a worker killed, a GM killed and restarted, an LM cut off the
//! network during a second replay (issue 14); then the phase of [`standby`]: GM 0's
//! primary killed during a third replay, its standby (profile `standby`, started
//! with the cluster) taking over.
//!
//! The one sanctioned skip: without a Docker engine (`MEGHA_DOCKER` is not "1", as
//! scripts/test.sh sets it, or `docker info` fails) the end-to-end test says
//! "SKIPPED" on stderr and returns. `compose_file_is_accepted` needs only the compose
//! CLI and says "SKIPPED" the same way when there is none.
//!
//! Everything a run creates (containers, network, volumes, the scheduler image, which is
//! tagged per run) is removed by a guard, also when an assertion fails; the reusable
//! base images (megha/debian:bookworm, megha/rabbitmq:local) are kept.

mod chaos;
mod report;
mod secrets;
mod standby;

use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tests::checks::{assert_all_finished, assert_no_overlap_on_nodes, read_tasks_csv};
use tests::compose::{
    compose_cli, docker_unavailable, metric, offline_env, start_cluster, Project, COMPOSE_VARS,
};
use tests::procs::workspace_root;

macro_rules! say {
    ($($arg:tt)*) => {
        tests::compose::say(&format!($($arg)*))
    };
}

fn config_ok(cli: &[String], env: &[(&'static str, String)]) -> Output {
    config_of(cli, &["docker-compose.yml"], env)
}

/// `compose -f FILE... --profile loadgen config`, which must succeed.
fn config_of(cli: &[String], files: &[&str], env: &[(&'static str, String)]) -> Output {
    let mut cmd = Command::new(&cli[0]);
    cmd.args(&cli[1..]).current_dir(workspace_root());
    for f in files {
        cmd.args(["-f", f]);
    }
    cmd.args(["--profile", "loadgen", "config"]);
    for v in COMPOSE_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = cmd.output().expect("compose config runs");
    assert!(
        out.status.success(),
        "compose config refused the file with {env:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn compose_file_is_accepted() {
    let Some(cli) = compose_cli() else {
        say!(
            "docker compose config test SKIPPED: no compose CLI (neither `docker compose` nor `docker-compose` runs)"
        );
        return;
    };
    let defaults = String::from_utf8_lossy(&config_ok(&cli, &[]).stdout).into_owned();
    for expected in [
        "rust:1-bookworm",
        "debian:bookworm-slim",
        "rabbitmq:3-management",
        "global-master-2",
        "local-master-2",
        "worker-2",
        "loadgen",
        "127.0.0.1",
    ] {
        assert!(
            defaults.contains(expected),
            "default config lacks {expected}:\n{defaults}"
        );
    }
    let offline = config_ok(&cli, &offline_env("megha/scheduler:config-check"));
    let offline = String::from_utf8_lossy(&offline.stdout);
    for expected in [
        "megha/debian:bookworm",
        "megha/rabbitmq:local",
        "docker/prebuilt",
        "megha/scheduler:config-check",
    ] {
        assert!(
            offline.contains(expected),
            "offline config lacks {expected}:\n{offline}"
        );
    }
    assert!(!offline.contains("rust:1-bookworm"));
    assert_each_role_reads_only_its_own_credentials(&defaults);
    // GM 0's standby starts once its primary holds the journal (started together it
    // could take it first); the clients in the loadgen service know both addresses.
    let standby = service_block(&defaults, "global-master-0-standby");
    for expected in [
        "global-master-0:\n        condition: service_healthy",
        "MEGHA_GM_STANDBY",
        "gm-data-0:/data",
    ] {
        assert!(
            standby.contains(expected),
            "the standby lacks {expected}:\n{standby}"
        );
    }
    let loadgen = service_block(&defaults, "loadgen");
    let both = "http://global-master-0:8080|http://global-master-0-standby:8080";
    assert_eq!(
        loadgen.matches(both).count(),
        2,
        "--gm and MEGHA_GM:\n{loadgen}"
    );

    // The TLS overlay: still valid, offline too, and every link is TLS.
    let files = ["docker-compose.yml", "docker-compose.tls.yml"];
    config_of(&cli, &files, &offline_env("megha/scheduler:config-check"));
    let tls = String::from_utf8_lossy(&config_of(&cli, &files, &[]).stdout).into_owned();
    assert_each_role_reads_only_its_own_credentials(&tls);
    assert_tls_everywhere(&tls);
}

/// docker-compose.tls.yml over docker-compose.yml: every role serves HTTPS with its
/// own certificate (workers: issued at start), calls https:// and amqps:// peers
/// trusting the CA; the broker has a TLS port; no plain URL is left.
fn assert_tls_everywhere(config: &str) {
    assert!(
        !config.contains("http://") && !config.contains("amqp://"),
        "a plain URL is left in the TLS configuration:\n{config}"
    );
    let ca = "MEGHA_TLS_CA_FILE: /secrets/ca.pem";
    for (service, role) in [("global-master", "gm"), ("local-master", "lm")] {
        for i in 0..3 {
            let block = service_block(config, &format!("{service}-{i}"));
            for expected in [
                format!("MEGHA_TLS_CERT_FILE: /secrets/{role}.pem"),
                format!("MEGHA_TLS_KEY_FILE: /secrets/{role}-key.pem"),
                ca.to_owned(),
                "MEGHA_AMQP_URL: amqps://rabbitmq:5671/".to_owned(),
                // GM 0's standby too (profile `standby`): whichever serves.
                "MEGHA_GM_URLS: https://global-master-0:8080|https://global-master-0-standby:8080,https://global-master-1:8080,https://global-master-2:8080".to_owned(),
                "megha-healthcheck".to_owned(),
            ] {
                assert!(block.contains(&expected), "{service}-{i} lacks {expected}:\n{block}");
            }
        }
    }
    for i in 0..3 {
        let block = service_block(config, &format!("global-master-{i}"));
        let lms = "MEGHA_LM_URLS: https://local-master-0:9100,https://local-master-1:9100,https://local-master-2:9100";
        assert!(block.contains(lms), "{block}");
        let block = service_block(config, &format!("worker-{i}"));
        for expected in [
            "MEGHA_TLS_ISSUER_CERT_FILE: /secrets/worker-issuer.pem",
            "MEGHA_TLS_ISSUER_KEY_FILE: /secrets/worker-issuer-key.pem",
            ca,
            "--advertise-url https://",
        ] {
            assert!(
                block.contains(expected),
                "worker-{i} lacks {expected}:\n{block}"
            );
        }
        let lm = format!("MEGHA_WORKER_LM_URL: https://local-master-{i}:9100");
        assert!(block.contains(&lm), "{block}");
        assert!(!block.contains("MEGHA_TLS_CERT_FILE"), "{block}");
    }
    let secrets = service_block(config, "secrets");
    assert!(
        secrets.contains("MEGHA_TLS: '1'") || secrets.contains("MEGHA_TLS: \"1\""),
        "{secrets}"
    );
    let broker = service_block(config, "rabbitmq");
    assert!(broker.contains(":5671"), "{broker}");
    let loadgen = service_block(config, "loadgen");
    assert!(
        loadgen.contains(ca) && loadgen.contains("amqps://"),
        "{loadgen}"
    );
}

/// The lines of service `name` in the output of `compose config` (services sit at
/// two spaces of indentation, their settings deeper).
fn service_block(config: &str, name: &str) -> String {
    let header = format!("  {name}:");
    let mut lines = config.lines().skip_while(|l| *l != header);
    assert!(lines.next().is_some(), "no service {name} in:\n{config}");
    lines
        .take_while(|l| l.starts_with("   ") || l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Per-role credentials (docs/security.md): every GM, LM and worker reads its own
/// role's file from a volume that holds nothing of the other roles; only `secrets`
/// mounts the volume with everything.
fn assert_each_role_reads_only_its_own_credentials(config: &str) {
    let roles = [
        ("global-master", "gm"),
        ("local-master", "lm"),
        ("worker", "worker"),
    ];
    for (service, role) in roles {
        for i in 0..3 {
            let block = service_block(config, &format!("{service}-{i}"));
            let file = format!("MEGHA_CLUSTER_SECRET_FILE: /secrets/{role}.toml");
            assert!(
                block.contains(&file),
                "{service}-{i} lacks {file}:\n{block}"
            );
            assert!(
                block.contains(&format!("secrets-{role}")),
                "{service}-{i} does not mount secrets-{role}:\n{block}"
            );
            // Each GM and LM its own credential's volume, none of another's.
            if role != "worker" {
                for j in 0..3 {
                    let volume = format!("secrets-{role}-{j}:");
                    assert_eq!(
                        block.contains(&volume),
                        i == j,
                        "{service}-{i} and {volume}:\n{block}"
                    );
                }
            }
            for (_, other) in roles.iter().filter(|(_, r)| *r != role) {
                for leak in [format!("secrets-{other}"), format!("{other}.toml")] {
                    assert!(
                        !block.contains(&leak),
                        "{service}-{i} sees {leak}:\n{block}"
                    );
                }
            }
            assert!(
                !block.contains("megha-secrets"),
                "{service}-{i} mounts megha-secrets"
            );
            assert!(
                !block.contains("cluster-secret"),
                "{service}-{i}: a shared secret"
            );
        }
    }
    let secrets = service_block(config, "secrets");
    assert!(secrets.contains("megha-make-secrets"), "{secrets}");
    let loadgen = service_block(config, "loadgen");
    assert!(loadgen.contains("secrets-loadgen"), "{loadgen}");
    assert!(
        !loadgen.contains("megha-secrets") && !loadgen.contains(".toml"),
        "{loadgen}"
    );
}

#[test]
fn compose_cluster_runs_every_task_exactly_once() {
    if let Some(why) = docker_unavailable() {
        say!("docker compose end-to-end test SKIPPED: no Docker engine reachable ({why})");
        return;
    }
    let cluster = start_cluster(
        "megha-e2e",
        "[docker_compose]",
        &[("MEGHA_SPEEDUP", "50".into())],
    );
    let (project, gms, out, t0) = (&cluster.project, &cluster.gms, &cluster.out, cluster.t0);

    // The loadgen profile service replays YH_small.tr and writes the report to `out`.
    let replay = project.run(&["run", "--rm", "--no-deps", "loadgen"]);
    say!("{}", String::from_utf8_lossy(&replay.stdout));

    let rows = read_tasks_csv(out);
    assert_eq!(rows.len(), 183, "YH_small has 183 tasks");
    assert_all_finished(&rows);
    assert_no_overlap_on_nodes(&rows);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    assert_eq!(summary["tasks"], 183);
    assert_eq!(summary["finished"], 183);
    assert_eq!(summary["never_finished"], 0);
    assert_eq!(summary["over_commits"], 0);

    // The broker knows exactly the users of definitions.json: no guest, no default
    // user allowed everything.
    let users = project.run(&["exec", "-T", "rabbitmq", "rabbitmqctl", "-q", "list_users"]);
    let users = String::from_utf8_lossy(&users.stdout);
    let mut names: Vec<&str> = users
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "user")
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "megha-gm",
            "megha-lm0",
            "megha-lm1",
            "megha-lm2",
            "megha-loadgen"
        ],
        "{users}"
    );

    // /metrics of the published services agree: each task launched and placed once.
    assert_eq!(metric(gms, "megha_gm_launched_total"), 183.0);
    let lms: Vec<String> = (0..3)
        .map(|l| project.published(&format!("local-master-{l}"), 9100))
        .collect();
    assert_eq!(metric(&lms, "megha_lm_placements_total"), 183.0);

    // Both replicas of each worker service got a slot of their own (auto slots).
    let logs = project.run(&["logs", "--no-color", "worker-0", "worker-1", "worker-2"]);
    let logs = String::from_utf8_lossy(&logs.stdout);
    let assigned = logs
        .lines()
        .filter(|l| l.contains("nodes assigned"))
        .count();
    assert_eq!(assigned, 6, "6 workers should have registered:\n{logs}");

    exec_tasks_run_in_the_cluster(project);
    chaos::faults_during_a_replay(&cluster);
    standby::primary_killed_during_a_replay(&cluster);

    let dir = cluster.dir.clone();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    say!(
        "[docker_compose] end to end done in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// `exec` tasks in the compose cluster, through the `megha` CLI of the image (run in
/// the loadgen service's container, which holds the admin token): a command's output
/// comes back through GM, LM and worker, and a failing one ends `failed` with its
/// exit code.
fn exec_tasks_run_in_the_cluster(project: &Project) {
    // A DAG job file (issue 35 item 5), bind-mounted into the `megha` container.
    let job_dir = std::env::temp_dir().join(format!("megha-compose-dag-{}", std::process::id()));
    std::fs::create_dir_all(&job_dir).expect("job dir");
    std::fs::write(job_dir.join("dag.json"), map_reduce_job()).expect("job file");
    let mount = format!("{}:/job:ro", job_dir.display());
    // `megha ARGS` in a container of the loadgen service, which must succeed.
    let megha_out = |args: &[&str]| -> String {
        let mut all = vec![
            "run",
            "--rm",
            "--no-deps",
            "-v",
            &mount,
            "-e",
            "MEGHA_GM=http://global-master-0:8080",
            "loadgen",
            "megha",
        ];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&project.run(&all).stdout).into_owned()
    };
    let megha = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let text = megha_out(&all);
        serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("megha {args:?}: not JSON ({e}): {text}"))
    };
    let submit = |command: &[&str]| -> u64 {
        let mut args = vec!["run", "--cpu-millis", "100", "--memory-mb", "64", "--"];
        args.extend_from_slice(command);
        let answer = megha(&args);
        answer["job"]
            .as_u64()
            .unwrap_or_else(|| panic!("no job id in {answer}"))
    };
    let hello = submit(&["sh", "-c", "echo hello from exec; uname -s"]);
    let three = submit(&["sh", "-c", "echo oops >&2; exit 3"]);
    // Issue 31: what a task reaches in the worker's container (the worker is pid 1).
    let targets = ["/secrets/worker.toml", "/proc/1/environ", "/proc/1/cwd/"].map(String::from);
    let script = tests::procs::reach::probe_script(&targets);
    let probe = submit(&["sh", "-c", &script]);
    let dag = megha(&["run", "/job/dag.json"])["job"]
        .as_u64()
        .expect("the DAG job's id");
    let ended = |job: u64| -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let status = megha(&["status", &job.to_string()]);
            if status["job"]["state"] != "active" {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "job {job} still active after 90 s: {status}"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    };
    let status = ended(hello);
    assert_eq!(status["job"]["state"], "finished", "{status}");
    assert_eq!(status["tasks"][0]["state"], "finished", "{status}");
    let status = ended(three);
    assert_eq!(status["job"]["state"], "failed", "{status}");
    assert_eq!(status["tasks"][0]["failure"]["exit"]["code"], 3, "{status}");
    // The output, read from the worker through the LM.
    let (hello, three) = (hello.to_string(), three.to_string());
    assert_eq!(
        megha_out(&["logs", &hello, "0"]),
        "hello from exec\nLinux\n"
    );
    assert_eq!(megha_out(&["logs", "--stderr", &three, "0"]), "oops\n");
    let status = ended(probe);
    assert_eq!(status["job"]["state"], "finished", "{status}");
    let got = megha_out(&["logs", &probe.to_string(), "0"]);
    say!("[docker_compose] what a task reached in the worker's container:\n{got}");
    let uid = tests::procs::reach::check_probe(&got, &targets);
    assert!(
        (20_000..=20_999).contains(&uid),
        "the task ran as uid {uid}, not a task uid"
    );
    // The map-reduce DAG: three map tasks (each a uid of its own, on any of the six
    // workers) left a part each in the shared scratch volume; the reduce task, run
    // only once every map task ended, read all three.
    let status = ended(dag);
    assert_eq!(status["job"]["state"], "finished", "{status}");
    assert_eq!(
        megha_out(&["logs", &dag.to_string(), "3"]),
        "3\n33\n",
        "3 parts, 1 + 11 + 21"
    );
    let _ = std::fs::remove_dir_all(&job_dir);
    say!("[docker_compose] exec tasks: output and exit code 3 came back through the cluster; a map-reduce DAG passed its parts through /shared");
}

/// A map stage of three exec tasks, each writing a part into the workers' shared
/// scratch volume (`/shared`, docker-compose.yml), and a reduce stage that counts
/// and sums the parts: the body of `POST /v1/jobs`, as `megha run FILE` takes it.
fn map_reduce_job() -> String {
    let exec = |stage: &str, command: &str| {
        serde_json::json!({
            "stage": stage,
            "resources": {"cpu_millis": 100, "memory_mb": 64},
            "executor": {"type": "exec", "command": ["sh", "-c", command]},
        })
    };
    let map = "umask 022; sleep 1; echo $((MEGHA_TASK_INDEX * 10 + 1)) > /shared/$MEGHA_JOB.part-$MEGHA_TASK_INDEX";
    let reduce = "ls /shared/$MEGHA_JOB.part-* | wc -l; cat /shared/$MEGHA_JOB.part-* | awk '{s += $1} END {print s}'";
    serde_json::json!({
        "name": "compose-map-reduce",
        "stages": [{"name": "map"}, {"name": "reduce", "after": ["map"]}],
        "tasks": [exec("map", map), exec("map", map), exec("map", map), exec("reduce", reduce)],
    })
    .to_string()
}
