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
        std::fs::create_dir_all(log_dir).expect("log dir");
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log file");
        let mut child = Command::new(bin_dir().join(bin))
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
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head.to_owned(), body.to_owned()))
}

pub fn get_json(url: &str) -> serde_json::Value {
    let (_, _, body) = http("GET", url, None).unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: {e}: {body}"))
}

/// 2 or more GMs, LMs and workers on loopback, all sharing one broker.
#[derive(Debug)]
pub struct LoopbackCluster {
    pub lms: Vec<Proc>,
    pub workers: Vec<Proc>,
    pub gms: Vec<Proc>,
    pub nodes: usize,
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
        let s = |x: &dyn ToString| x.to_string();
        let mut lm_procs = Vec::new();
        for l in 0..lms {
            let args: Vec<String> = [
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
            lm_procs.push(Proc::spawn(
                "local-master",
                &args,
                log_dir,
                &format!("lm{l}"),
            ));
        }
        let mut workers = Vec::new();
        for (l, lm) in lm_procs.iter().enumerate() {
            for slot in 0..workers_per_lm {
                let args: Vec<String> = [
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
        let mut gm_procs = Vec::new();
        for g in 0..gms {
            let args: Vec<String> = [
                "--id",
                &s(&g),
                "--gms",
                &s(&gms),
                "--lm-urls",
                &lm_urls,
                "--listen",
                "127.0.0.1:0",
                "--amqp",
                amqp,
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            gm_procs.push(Proc::spawn(
                "global-master",
                &args,
                log_dir,
                &format!("gm{g}"),
            ));
        }
        let cluster = LoopbackCluster {
            lms: lm_procs,
            workers,
            gms: gm_procs,
            nodes: gms as usize * lms as usize * partition_size,
        };
        cluster.wait_ready(Duration::from_secs(30));
        cluster
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
        .args(args)
        .current_dir(workspace_root())
        .stdout(out)
        .stderr(err)
        .status()
        .expect("loadgen runs")
}
