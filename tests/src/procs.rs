//! Running the service binaries as child processes on loopback.
//!
//! Binaries: `CARGO_BIN_EXE_*` only exists for binaries of the test's own package, so
//! [`bin_dir`] runs `cargo build --bins` for the four packages once per test binary
//! (same profile and target directory as the tests: it is the directory two levels
//! above the running test executable) and returns that directory. Every service
//! listens on port 0 and prints `listening on http://ADDR`, which is how the tests
//! learn the ports. Children are killed when their [`Proc`] drops.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Builds the binaries (once) and returns the directory holding them.
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps/<test>")
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace_root()).args([
            "build",
            "--bins",
            "-p",
            "global-master",
            "-p",
            "local-master",
            "-p",
            "worker",
            "-p",
            "loadgen",
        ]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("cargo build runs");
        assert!(
            status.success(),
            "cargo build of the service binaries failed"
        );
        dir
    })
    .clone()
}

/// The credentials of this test process's clusters (one set per test binary): a
/// cluster secret and an API tokens file with an admin and two users, in a fresh
/// directory. Every [`Proc`] gets them through the environment
/// (`MEGHA_CLUSTER_SECRET_FILE`, `MEGHA_TOKENS_FILE`), [`loadgen`] gets the admin
/// token (`MEGHA_TOKEN`), and [`http`] / [`http_bytes`] send the admin token and the
/// cluster secret; [`http_raw`] sends only what it is given.
#[derive(Debug)]
pub struct Credentials {
    pub dir: PathBuf,
    pub secret_file: PathBuf,
    pub tokens_file: PathBuf,
    pub secret: String,
    /// An admin: sees every job, may use every queue.
    pub admin: String,
    /// User `alice`: queues `default` and `a`.
    pub alice: String,
    /// User `bob`: any queue.
    pub bob: String,
}

/// `bytes` random bytes from /dev/urandom, as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("read /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn credentials() -> &'static Credentials {
    static CREDS: OnceLock<Credentials> = OnceLock::new();
    CREDS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!(
            "megha-test-creds-{}-{}",
            std::process::id(),
            random_hex(4)
        ));
        std::fs::create_dir_all(&dir).expect("credentials dir");
        let c = Credentials {
            secret_file: dir.join("cluster-secret"),
            tokens_file: dir.join("tokens.toml"),
            dir,
            secret: random_hex(24),
            admin: format!("admin-{}", random_hex(16)),
            alice: format!("alice-{}", random_hex(16)),
            bob: format!("bob-{}", random_hex(16)),
        };
        std::fs::write(&c.secret_file, format!("{}\n", c.secret)).expect("secret file");
        let tokens = format!(
            "[[users]]\nname = \"admin\"\ntoken = \"{}\"\nadmin = true\n\n\
             [[users]]\nname = \"alice\"\ntoken = \"{}\"\nqueues = [\"default\", \"a\"]\n\n\
             [[users]]\nname = \"bob\"\ntoken = \"{}\"\nqueues = [\"*\"]\n",
            c.admin, c.alice, c.bob
        );
        std::fs::write(&c.tokens_file, tokens).expect("tokens file");
        c
    })
}

/// A running service process.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    pub url: String,
    child: Child,
}

impl Proc {
    /// Starts `bin` with `args`, stderr to `log_dir/name.log`, and waits for its
    /// `listening on` line.
    pub fn spawn(bin: &str, args: &[String], log_dir: &Path, name: &str) -> Proc {
        let c = credentials();
        let env = [
            ("MEGHA_CLUSTER_SECRET_FILE", Some(c.secret_file.as_os_str())),
            ("MEGHA_TOKENS_FILE", Some(c.tokens_file.as_os_str())),
        ];
        Self::spawn_env(bin, args, log_dir, name, &env)
    }

    /// [`Proc::spawn`] with these environment variables instead of the test
    /// credentials (`None` removes one).
    pub fn spawn_env(
        bin: &str,
        args: &[String],
        log_dir: &Path,
        name: &str,
        env: &[(&str, Option<&std::ffi::OsStr>)],
    ) -> Proc {
        std::fs::create_dir_all(log_dir).expect("log dir");
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log file");
        let mut cmd = Command::new(bin_dir().join(bin));
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .args(args)
            .current_dir(workspace_root())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                    break;
                }
            }
            for _ in lines {}
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "{name} did not start; see {}",
                    log_dir.join(format!("{name}.log")).display()
                )
            });
        Proc {
            name: name.to_owned(),
            url,
            child,
        }
    }

    /// The process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// SIGTERM, then wait (up to `timeout`, then SIGKILL).
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A minimal HTTP/1.1 client over std (no runtime needed): returns (status, body).
pub fn http(method: &str, url: &str, body: Option<&str>) -> std::io::Result<(u16, String, String)> {
    let body = body.unwrap_or("").as_bytes();
    let (status, head, body) = http_bytes(method, url, "application/json", body)?;
    Ok((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// [`http`] with a binary body of `content_type` (the internal bincode endpoints).
pub fn http_bytes(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let c = credentials();
    let bearer = format!("Bearer {}", c.admin);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("x-megha-cluster-token", c.secret.as_str()),
    ];
    http_raw(method, url, content_type, body, &headers)
}

/// An HTTP/1.1 call with exactly these extra `headers` (no credential of its own).
pub fn http_raw(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    if url.starts_with("https://") {
        return https_raw(method, url, content_type, body, headers);
    }
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let body = response.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head, body))
}

/// [`http_raw`] over TLS (reqwest on a runtime of its own), trusting the CA the test
/// gave `service_kit::tls::trust_ca`. The head is the status line only.
fn https_raw(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let io = |e: &dyn std::fmt::Display| std::io::Error::other(format!("{url}: {e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = service_kit::tls::client_builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| io(&e))?;
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| io(&e))?;
        let mut req = client
            .request(method, url)
            .header("content-type", content_type)
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.map_err(|e| io(&e))?;
        let status = resp.status().as_u16();
        let head = format!("HTTP/1.1 {status}");
        let bytes = resp.bytes().await.map_err(|e| io(&e))?;
        Ok((status, head, bytes.to_vec()))
    })
}

/// Runs `loadgen` with `args` (a replay of the 183-task sample trace writing to
/// `out`; its log goes to `dir`) and checks the run: it succeeded, every task
/// finished exactly once, no node ran two tasks at once. Returns summary.json.
pub fn replay_sample_trace(args: &[String], out: &Path, dir: &Path) -> serde_json::Value {
    let status = loadgen(args, &dir.join("loadgen.log"));
    assert!(status.success(), "replay failed; logs in {}", dir.display());
    crate::checks::assert_sample_run(out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["finished"], 183);
    summary
}

/// Waits until `cond` holds (polling every 100 ms), or fails with `what`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `POST {gm}/v1/jobs` with one job of `n` copies of `task` (a JSON object);
/// asserts 202 and returns the answer.
pub fn submit_tasks(gm: &str, task: &str, n: usize) -> serde_json::Value {
    let body = format!(r#"{{"tasks":[{}]}}"#, vec![task; n].join(","));
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    serde_json::from_str(&answer).expect("json answer")
}

pub fn get_json(url: &str) -> serde_json::Value {
    let (_, _, body) = http("GET", url, None).unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: {e}: {body}"))
}

/// Extra flags for each role of a [`LoopbackCluster`].
#[derive(Debug, Default, Clone)]
pub struct RoleArgs {
    pub gm: Vec<String>,
    pub lm: Vec<String>,
    pub worker: Vec<String>,
    /// Per GM id: the base URL of its standby (started by the test), which the LMs
    /// get as the GM's second address (`--gm-url PRIMARY|STANDBY`).
    pub gm_standby_urls: Vec<String>,
}

/// 2 or more GMs, LMs and workers on loopback, all sharing one broker.
#[derive(Debug)]
pub struct LoopbackCluster {
    pub lms: Vec<Proc>,
    pub workers: Vec<Proc>,
    pub gms: Vec<Proc>,
    pub nodes: usize,
    lm_args: Vec<Vec<String>>,
    gm_args: Vec<Vec<String>>,
    log_dir: PathBuf,
}

/// A loopback port free right now (bound, then released), for a service whose URL
/// must be known before it starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl LoopbackCluster {
    pub fn start(
        gms: u16,
        lms: u16,
        partition_size: usize,
        workers_per_lm: u32,
        amqp: &str,
        log_dir: &Path,
    ) -> Self {
        Self::start_with_queues(gms, lms, partition_size, workers_per_lm, amqp, log_dir, &[])
    }

    /// As [`LoopbackCluster::start`], with user queues (`NAME:SHARE:GM`) on every GM
    /// and LM; the LMs get the GMs' URLs (fixed ports picked up front).
    pub fn start_with_queues(
        gms: u16,
        lms: u16,
        partition_size: usize,
        workers_per_lm: u32,
        amqp: &str,
        log_dir: &Path,
        queues: &[&str],
    ) -> Self {
        let extra = RoleArgs::default();
        Self::start_with_args(
            gms,
            lms,
            partition_size,
            workers_per_lm,
            amqp,
            log_dir,
            queues,
            &extra,
        )
    }

    /// As [`LoopbackCluster::start_with_queues`], with `extra` flags for each role.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with_args(
        gms: u16,
        lms: u16,
        partition_size: usize,
        workers_per_lm: u32,
        amqp: &str,
        log_dir: &Path,
        queues: &[&str],
        extra: &RoleArgs,
    ) -> Self {
        let s = |x: &dyn ToString| x.to_string();
        // The LMs get every GM's URL (`--gm-url`): task ends go to the GM that
        // launched each task, killed tasks back to their queue's GM.
        let gm_listen: Vec<String> = (0..gms)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let mut fairness: Vec<String> = Vec::new();
        for q in queues {
            fairness.extend(["--queue".to_owned(), q.to_string()]);
        }
        let mut lm_fairness = fairness.clone();
        lm_fairness.extend(extra.lm.iter().cloned());
        // GMs given a certificate serve HTTPS (see services_tls).
        let gm_scheme = if extra.gm.iter().any(|a| a == "--tls-cert-file") {
            "https"
        } else {
            "http"
        };
        for (g, addr) in gm_listen.iter().enumerate() {
            let mut url = format!("{gm_scheme}://{addr}");
            if let Some(standby) = extra.gm_standby_urls.get(g) {
                url = format!("{url}|{standby}");
            }
            lm_fairness.extend(["--gm-url".to_owned(), url]);
        }
        let mut lm_procs = Vec::new();
        let mut lm_args = Vec::new();
        for l in 0..lms {
            let mut args: Vec<String> = [
                "--id",
                &s(&l),
                "--gms",
                &s(&gms),
                "--lms",
                &s(&lms),
                "--partition-size",
                &s(&partition_size),
                "--workers",
                &s(&workers_per_lm),
                "--listen",
                "127.0.0.1:0",
                "--heartbeat-ms",
                "500",
                "--amqp",
                amqp,
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            args.extend(lm_fairness.iter().cloned());
            lm_procs.push(Proc::spawn(
                "local-master",
                &args,
                log_dir,
                &format!("lm{l}"),
            ));
            lm_args.push(args);
        }
        let mut workers = Vec::new();
        for (l, lm) in lm_procs.iter().enumerate() {
            for slot in 0..workers_per_lm {
                let mut args: Vec<String> = [
                    "--lm-url",
                    &lm.url,
                    "--slot",
                    &s(&slot),
                    "--listen",
                    "127.0.0.1:0",
                ]
                .iter()
                .map(|a| a.to_string())
                .collect();
                args.extend(extra.worker.iter().cloned());
                workers.push(Proc::spawn(
                    "worker",
                    &args,
                    log_dir,
                    &format!("worker{l}.{slot}"),
                ));
            }
        }
        let lm_urls = lm_procs
            .iter()
            .map(|p| p.url.clone())
            .collect::<Vec<_>>()
            .join(",");
        let mut gm_procs: Vec<Proc> = Vec::new();
        let mut gm_args = Vec::new();
        for g in 0..gms {
            let mut args: Vec<String> = [
                "--id",
                &s(&g),
                "--gms",
                &s(&gms),
                "--lm-urls",
                &lm_urls,
                "--listen",
                &gm_listen[g as usize],
                "--amqp",
                amqp,
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            args.extend(fairness.iter().cloned());
            // `{id}` in a GM flag stands for the GM's id (e.g. its own --data-dir).
            args.extend(extra.gm.iter().map(|a| a.replace("{id}", &g.to_string())));
            // GM 0 is the designated GM; the others forward LRAs and GUARANTEED
            // work to it.
            if let Some(designated) = gm_procs.first() {
                args.extend(["--designated-url".to_owned(), designated.url.clone()]);
            }
            gm_procs.push(Proc::spawn(
                "global-master",
                &args,
                log_dir,
                &format!("gm{g}"),
            ));
            gm_args.push(args);
        }
        let cluster = LoopbackCluster {
            lms: lm_procs,
            workers,
            gms: gm_procs,
            nodes: gms as usize * lms as usize * partition_size,
            lm_args,
            gm_args,
            log_dir: log_dir.to_owned(),
        };
        cluster.wait_ready(Duration::from_secs(30));
        cluster
    }

    /// After a replay of the sample trace (183 one-core tasks) to `out`: every task
    /// started and finished, no node ran two at once, and the workers started each
    /// exactly once.
    pub fn assert_sample_replay_ran_once(&self, out: &Path) {
        crate::checks::assert_sample_run(out);
        assert_eq!(
            self.metric(&self.workers, "megha_worker_started_total"),
            183.0
        );
    }

    /// Graceful shutdown: SIGTERM to every GM, worker and LM (in that order); each
    /// must exit 0 within 20 s.
    pub fn terminate_all_cleanly(&mut self) {
        for p in self
            .gms
            .iter_mut()
            .chain(&mut self.workers)
            .chain(&mut self.lms)
        {
            let status = p.terminate(Duration::from_secs(20));
            assert!(
                status.is_some_and(|s| s.success()),
                "{} did not exit cleanly: {status:?}",
                p.name
            );
        }
    }

    /// Kills LM `l` at once (SIGKILL: a crash, nothing flushed) and starts it again
    /// on the same address with an empty state.
    pub fn crash_and_restart_lm(&mut self, l: usize) {
        let addr = self.lms[l].url.trim_start_matches("http://").to_owned();
        self.lms[l].kill();
        let mut args = self.lm_args[l].clone();
        if let Some(i) = args.iter().position(|a| a == "--listen") {
            args[i + 1] = addr;
        }
        self.lms[l] = Proc::spawn(
            "local-master",
            &args,
            &self.log_dir,
            &format!("lm{l}-restarted"),
        );
    }

    /// Kills GM `g` at once (SIGKILL) and, `down_for` later, starts it again with the
    /// same flags (same address; same `--data-dir` if it had one).
    pub fn crash_and_restart_gm(&mut self, g: usize, down_for: Duration) {
        self.gms[g].kill();
        std::thread::sleep(down_for);
        self.gms[g] = Proc::spawn(
            "global-master",
            &self.gm_args[g],
            &self.log_dir,
            &format!("gm{g}-restarted"),
        );
    }

    /// Waits until every GM has the state of every LM.
    pub fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for gm in &self.gms {
            loop {
                let ready = http("GET", &format!("{}/healthz", gm.url), None)
                    .ok()
                    .and_then(|(_, _, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
                    .is_some_and(|v| v["ready"] == true);
                if ready {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} never received the state of every LM",
                    gm.name
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    pub fn gm_urls(&self) -> String {
        self.gms
            .iter()
            .map(|p| p.url.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `loadgen replay` arguments for the sample trace against this cluster's GMs.
    pub fn replay_args(&self, amqp: &str, out: &Path, speedup: u32, timeout_s: u32) -> Vec<String> {
        let nodes = self.nodes.to_string();
        [
            "replay",
            "--trace",
            "data/traces/YH_small.tr",
            "--gm",
            &self.gm_urls(),
            "--amqp",
            amqp,
            "--out",
            out.to_str().expect("utf-8 path"),
            "--speedup",
            &speedup.to_string(),
            "--nodes",
            &nodes,
            "--quiet",
            "--timeout-s",
            &timeout_s.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Sum of a metric over every process of a role.
    pub fn metric(&self, role: &[Proc], name: &str) -> f64 {
        role.iter()
            .map(|p| {
                let (_, _, page) =
                    http("GET", &format!("{}/metrics", p.url), None).expect("metrics");
                crate::checks::metric_sum(&page, name)
            })
            .sum()
    }
}

/// Runs `loadgen` with `args` from the workspace root; returns its exit status.
pub fn loadgen(args: &[String], log: &Path) -> ExitStatus {
    let out = std::fs::File::create(log).expect("loadgen log");
    let err = out.try_clone().expect("log clone");
    Command::new(bin_dir().join("loadgen"))
        .env("MEGHA_TOKEN", &credentials().admin)
        .args(args)
        .current_dir(workspace_root())
        .stdout(out)
        .stderr(err)
        .status()
        .expect("loadgen runs")
}
