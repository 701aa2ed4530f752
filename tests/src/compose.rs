//! The docker-compose.yml cluster for the compose tests (tests/tests/docker_compose*.rs):
//! finding the compose CLI, the one sanctioned skip (no Docker engine), the offline
//! image settings, and [`Project`], a compose project of the test's own (own name,
//! every published port 0) that removes everything it created when dropped.
//!
//! [`start_cluster`] builds the offline images (scripts/docker-local-images.sh, the
//! host's binaries staged), starts RabbitMQ + 3 GMs + GM 0's standby (profile
//! `standby`) + 3 LMs + 2 workers per LM and waits until every GM has the state of
//! every LM.

use crate::procs::{bin_dir, http, workspace_root};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Says something on the real stderr: libtest captures `eprintln!` of passing tests,
/// and a skip (or a figure) must be visible without `--nocapture`.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// `docker compose` (v2 plugin) or `docker-compose` (v1), whichever answers.
pub fn compose_cli() -> Option<Vec<String>> {
    let candidates: [&[&str]; 2] = [&["docker", "compose"], &["docker-compose"]];
    candidates.into_iter().find_map(|c| {
        let ok = Command::new(c[0])
            .args(&c[1..])
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| c.iter().map(|s| s.to_string()).collect())
    })
}

/// Why the Docker tests cannot run, if they cannot.
pub fn docker_unavailable() -> Option<String> {
    let flag = std::env::var("MEGHA_DOCKER").unwrap_or_default();
    if flag != "1" {
        return Some(format!(
            "MEGHA_DOCKER={flag:?}; scripts/test.sh sets it to 1 when `docker info` works"
        ));
    }
    let info = Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match info {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("`docker info` failed: {s}")),
        Err(e) => Some(format!("cannot run docker: {e}")),
    }
}

/// Settings that make docker-compose.yml build from the local images.
pub fn offline_env(image: &str) -> Vec<(&'static str, String)> {
    vec![
        ("BUILDER_IMAGE", "megha/debian:bookworm".into()),
        ("RUNTIME_IMAGE", "megha/debian:bookworm".into()),
        ("RABBITMQ_IMAGE", "megha/rabbitmq:local".into()),
        ("PREBUILT", "docker/prebuilt".into()),
        ("MEGHA_IMAGE", image.into()),
    ]
}

/// Every published port at 0 (any free host port), so runs and a user's cluster do
/// not collide (and the host's 5672 stays free).
pub fn any_free_ports() -> Vec<(&'static str, String)> {
    [
        "MEGHA_GM0_PORT",
        "MEGHA_GM1_PORT",
        "MEGHA_GM2_PORT",
        "MEGHA_GM0_STANDBY_PORT",
        "MEGHA_LM0_PORT",
        "MEGHA_LM1_PORT",
        "MEGHA_LM2_PORT",
        "MEGHA_AMQP_PORT",
    ]
    .into_iter()
    .map(|v| (v, "0".to_owned()))
    .collect()
}

/// Every variable docker-compose.yml reads, so the caller's environment does not leak in.
pub const COMPOSE_VARS: &[&str] = &[
    "BUILDER_IMAGE",
    "RUNTIME_IMAGE",
    "RABBITMQ_IMAGE",
    "PREBUILT",
    "MEGHA_IMAGE",
    "MEGHA_BIND",
    "MEGHA_GM0_PORT",
    "MEGHA_GM1_PORT",
    "MEGHA_GM2_PORT",
    "MEGHA_GM0_STANDBY_PORT",
    "MEGHA_LM0_PORT",
    "MEGHA_LM1_PORT",
    "MEGHA_LM2_PORT",
    "MEGHA_AMQP_PORT",
    "MEGHA_PARTITION_SIZE",
    "MEGHA_NODE_CPUS",
    "MEGHA_WORKERS_PER_LM",
    "MEGHA_WORKER_SLOT",
    "MEGHA_TRACE",
    "MEGHA_SPEEDUP",
    "MEGHA_REPLAY_OUT",
    "MEGHA_QUEUES",
    "MEGHA_SHARE_POLICY",
    "MEGHA_QUEUEABLE",
    "MEGHA_TASK_TYPES",
    "MEGHA_MAX_ATTEMPTS",
    "MEGHA_WORKER_TIMEOUT_MS",
    "MEGHA_CLUSTER_NAME",
    "RUST_LOG",
];

/// A compose project; `down` (containers, network, volumes, its image) on drop.
#[derive(Debug)]
pub struct Project {
    pub cli: Vec<String>,
    pub name: String,
    pub env: Vec<(&'static str, String)>,
    pub image: String,
    /// What the test's messages start with, e.g. "[docker_compose]".
    pub tag: String,
}

impl Project {
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cli[0]);
        cmd.args(&self.cli[1..])
            .current_dir(workspace_root())
            .args([
                "-f",
                "docker-compose.yml",
                "-p",
                &self.name,
                "--profile",
                "loadgen",
                "--profile",
                "standby",
            ])
            .args(args);
        for v in COMPOSE_VARS {
            cmd.env_remove(v);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Runs a compose command, panicking with its output when it fails.
    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.try_run(args);
        assert!(
            out.status.success(),
            "`{} {}` failed: {}\n{}\n{}",
            self.cli.join(" "),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Runs a compose command and returns its output, whatever its exit status.
    pub fn try_run(&self, args: &[&str]) -> Output {
        let started = Instant::now();
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", self.cli));
        say(&format!(
            "{} {} {} ({:.1} s)",
            self.tag,
            self.cli.join(" "),
            args.join(" "),
            started.elapsed().as_secs_f64()
        ));
        out
    }

    /// host:port a service's container port is published on (it changes when the
    /// container restarts: ports are 0).
    pub fn published(&self, service: &str, port: u16) -> String {
        // `docker port` on the service's first container answers in milliseconds;
        // the compose CLI (docker-compose 1.29 is Python) takes 1-3 s per call, and
        // the test asks dozens of times. Compose answers when the labels find nothing.
        let fast = self
            .containers_by_label(service)
            .first()
            .and_then(|id| docker_try(&["port", id, &port.to_string()]))
            .and_then(|text| {
                // "127.0.0.1:32786" or "0.0.0.0:32786", then maybe "[::]:32786".
                let first = text.lines().find(|l| !l.starts_with('['))?;
                Some(first.trim().to_owned())
            });
        let text = fast.unwrap_or_else(|| {
            let out = self.run(&["port", service, &port.to_string()]);
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        });
        assert!(!text.is_empty(), "{service}:{port} is not published");
        text.replace("0.0.0.0:", "127.0.0.1:")
    }

    /// The ids of the containers of `service` (replicas in order).
    pub fn containers(&self, service: &str) -> Vec<String> {
        let fast = self.containers_by_label(service);
        if !fast.is_empty() {
            return fast;
        }
        let out = self.run(&["ps", "-q", service]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// What `compose ps -q SERVICE` answers (full ids of the service's containers,
    /// stopped ones too, not `run` one-offs, by replica number), from the labels
    /// compose puts on them; empty when docker fails or finds none.
    fn containers_by_label(&self, service: &str) -> Vec<String> {
        let project = format!("label=com.docker.compose.project={}", self.name);
        let service = format!("label=com.docker.compose.service={service}");
        let Some(text) = docker_try(&[
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &project,
            "--filter",
            &service,
            "--filter",
            "label=com.docker.compose.oneoff=False",
            "--format",
            "{{.Label \"com.docker.compose.container-number\"}} {{.ID}}",
        ]) else {
            return Vec::new();
        };
        let mut found: Vec<(u32, String)> = text
            .lines()
            .filter_map(|l| {
                let (number, id) = l.trim().split_once(' ')?;
                Some((number.parse().ok()?, id.to_owned()))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, id)| id).collect()
    }

    /// The project's network (compose names it `<project>_default`).
    pub fn network(&self) -> String {
        format!("{}_default", self.name)
    }

    /// Every service's last 40 log lines on stderr, all of them in
    /// `$TMPDIR/<project>.log` (kept: the evidence of a failed run).
    pub fn dump_logs(&self) {
        if let Ok(out) = self
            .command(&["logs", "--no-color", "--tail", "40"])
            .output()
        {
            say(&String::from_utf8_lossy(&out.stdout));
        }
        let file = std::env::temp_dir().join(format!("{}.log", self.name));
        if let Ok(out) = self.command(&["logs", "--no-color", "-t"]).output() {
            match std::fs::write(&file, &out.stdout) {
                Ok(()) => say(&format!("{} every log line: {}", self.tag, file.display())),
                Err(e) => say(&format!(
                    "{} cannot write {}: {e}",
                    self.tag,
                    file.display()
                )),
            }
        }
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        let _ = self
            .command(&[
                "down",
                "-v",
                "--rmi",
                "local",
                "--remove-orphans",
                "-t",
                "20",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("docker")
            .args(["image", "rm", "-f", &self.image])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // The untagged images the classic builder leaves for the build stage.
        let _ = Command::new("docker")
            .args([
                "image",
                "prune",
                "-f",
                "--filter",
                "label=io.megha.stage=build",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// `docker ARGS`'s stdout, or None when it cannot run or fails.
fn docker_try(args: &[&str]) -> Option<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `docker ARGS`, which must succeed; returns its stdout.
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run docker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "`docker {}` failed: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A started compose cluster: the project, its GMs' published host:port, the host
/// directory the loadgen service writes its reports to (mounted at /out).
#[derive(Debug)]
pub struct Cluster {
    pub project: Project,
    pub gms: Vec<String>,
    pub out: PathBuf,
    pub dir: PathBuf,
    pub t0: Instant,
}

/// Builds the images and starts the cluster under a project name starting with
/// `prefix`, with `extra` settings (over the offline images and port 0 everywhere)
/// and 2 workers per LM; waits until every GM is ready (has every LM's state).
pub fn start_cluster(prefix: &str, tag: &str, extra: &[(&'static str, String)]) -> Cluster {
    let cli = compose_cli()
        .expect("a Docker engine but no compose CLI (docker compose / docker-compose)");
    let root = workspace_root();
    let t0 = Instant::now();

    // Base images (debootstrap the first time) and the host's binaries, staged.
    let bins = bin_dir();
    let status = Command::new(root.join("scripts/docker-local-images.sh"))
        .arg("--binaries")
        .arg(&bins)
        .current_dir(&root)
        .status()
        .expect("scripts/docker-local-images.sh runs");
    assert!(status.success(), "scripts/docker-local-images.sh failed");
    say(&format!(
        "{tag} local images ready after {:.1} s",
        t0.elapsed().as_secs_f64()
    ));

    let unique = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let dir = std::env::temp_dir().join(&unique);
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("output dir");
    let image = format!("megha/scheduler:{unique}");
    let mut env = offline_env(&image);
    env.extend(any_free_ports());
    env.extend([
        ("MEGHA_WORKERS_PER_LM", "2".into()),
        ("MEGHA_REPLAY_OUT", out.to_string_lossy().into_owned()),
    ]);
    for (k, v) in extra {
        env.retain(|(key, _)| key != k);
        env.push((k, v.clone()));
    }
    let project = Project {
        cli,
        name: unique,
        env,
        image,
        tag: tag.to_owned(),
    };

    project.run(&["build", "global-master-0"]);
    project.run(&[
        "up",
        "-d",
        "--no-build",
        "--scale",
        "worker-0=2",
        "--scale",
        "worker-1=2",
        "--scale",
        "worker-2=2",
        "rabbitmq",
        "local-master-0",
        "local-master-1",
        "local-master-2",
        "worker-0",
        "worker-1",
        "worker-2",
        "global-master-0",
        "global-master-1",
        "global-master-2",
        // GM 0's standby (profile `standby`), started once global-master-0 is healthy.
        "global-master-0-standby",
    ]);

    // Health: every GM has the state of every LM (so all 6 workers registered).
    let gms: Vec<String> = (0..3)
        .map(|g| project.published(&format!("global-master-{g}"), 8080))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    for gm in &gms {
        while !gm_ready(gm) {
            assert!(Instant::now() < deadline, "GM at {gm} never became ready");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    say(&format!(
        "{tag} cluster healthy after {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
    Cluster {
        project,
        gms,
        out,
        dir,
        t0,
    }
}

/// The GM at host:port `gm` answers `/healthz` with `ready: true`.
pub fn gm_ready(gm: &str) -> bool {
    http("GET", &format!("http://{gm}/healthz"), None)
        .ok()
        .and_then(|(_, _, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["ready"] == true)
}

/// The sum of metric family `name` over the services at host:port `urls`.
pub fn metric(urls: &[String], name: &str) -> f64 {
    urls.iter()
        .map(|u| {
            let (status, _, page) =
                http("GET", &format!("http://{u}/metrics"), None).expect("GET /metrics");
            assert_eq!(status, 200, "{u}/metrics");
            crate::checks::metric_sum(&page, name)
        })
        .sum()
}
