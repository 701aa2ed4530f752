//! A [`LoopbackCluster`]: GMs, LMs and workers as processes on loopback sharing one
//! broker, with crashes and restarts of its members and sums of their metrics.

use super::client::http;
use super::process::Proc;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Extra flags for each role of a [`LoopbackCluster`].
#[derive(Debug, Default, Clone)]
pub struct RoleArgs {
    pub gm: Vec<String>,
    pub lm: Vec<String>,
    pub worker: Vec<String>,
    /// Per GM id: the base URL of its standby (started by the test), which the LMs
    /// get as the GM's second address (`--gm-url PRIMARY|STANDBY`).
    pub gm_standby_urls: Vec<String>,
    /// Per LM id: the broker URL it uses instead of the cluster's (e.g. through a
    /// [`crate::relay::Relay`] the test cuts).
    pub lm_amqp: Vec<String>,
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
/// must be known before it starts. It is drawn below the kernel's ephemeral range
/// (`ip_local_port_range`), where no `bind(0)` and no outgoing connection of another
/// process can take it between its release and the service's bind (that happened:
/// a GM of services_lm_restart found its port in use under a full test run), and
/// never handed out twice by one test process.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const FLOOR: u16 = 10_000;
    if low > FLOOR + 1_000 {
        let span = u64::from(low - FLOOR);
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        let given = given.get_or_insert_with(HashSet::new);
        for _ in 0..1_000 {
            let draw = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            let port = FLOOR + (draw % span) as u16;
            if given.contains(&port) {
                continue;
            }
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return port;
            }
        }
    }
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
        let mut gm_url_args = Vec::new();
        for (g, addr) in gm_listen.iter().enumerate() {
            let mut url = format!("{gm_scheme}://{addr}");
            if let Some(standby) = extra.gm_standby_urls.get(g) {
                url = format!("{url}|{standby}");
            }
            gm_url_args.extend(["--gm-url".to_owned(), url]);
        }
        lm_fairness.extend(gm_url_args.iter().cloned());
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
                extra.lm_amqp.get(l as usize).map_or(amqp, String::as_str),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            // Its life counter: a restart (`crash_and_restart_lm`) takes the next.
            args.push("--data-dir".into());
            args.push(log_dir.join(format!("lm{l}-data")).display().to_string());
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
                args.extend(super::identity::task_identity_args());
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
            // work to it. Every GM knows every GM (`--gm-url`): requests naming
            // another GM's job go there, `GET /v1/jobs` lists every GM's.
            if let Some(designated) = gm_procs.first() {
                args.extend(["--designated-url".to_owned(), designated.url.clone()]);
            }
            if gms > 1 {
                args.extend(gm_url_args.iter().cloned());
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

    /// In a fresh directory `<temp>/<name>-<pid>` (returned): one GM with a
    /// journal (`gm/`), one LM, one worker of two 1-core nodes, logs in `logs/`.
    pub fn start_small_journaled(name: &str, amqp: &str) -> (Self, PathBuf) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test's directory");
        let extra = RoleArgs {
            gm: vec!["--data-dir".into(), dir.join("gm").display().to_string()],
            ..RoleArgs::default()
        };
        let cluster = Self::start_with_args(1, 1, 2, 1, amqp, &dir.join("logs"), &[], &extra);
        (cluster, dir)
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

    /// Stops GM `g` gracefully (SIGTERM: it drains, then exits; it must exit 0
    /// within 30 s) and, `down_for` later, starts it again with the same flags (same
    /// address; same `--data-dir` if it had one).
    pub fn stop_and_restart_gm(&mut self, g: usize, down_for: Duration) {
        let status = self.gms[g].terminate(Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| s.success()),
            "{} did not exit cleanly: {status:?}",
            self.gms[g].name
        );
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
