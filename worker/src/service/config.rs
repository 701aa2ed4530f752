//! Configuration of the `worker` binary: flags > environment > TOML file > defaults.

use crate::core::QueueOrder;
use crate::exec::ExecSettings;
use anyhow::{bail, Result};
use clap::Parser;
use common::Executor;
use serde::{Deserialize, Serialize};
use service_kit::settings::{load_file, CommonArgs};
use std::path::PathBuf;
use std::time::Duration;

/// A worker process of the Megha federated scheduler.
///
/// Registers with its Local Master as worker slot --slot, receives the nodes it runs
/// (node n of the LM belongs to slot n mod the LM's --workers), then runs the tasks the
/// LM starts (a synthetic task holds its resources for its duration) and reports each
/// start and finish back to the LM.
///
/// Minimal example:
///   worker --lm-url http://127.0.0.1:9100 --slot 0 --listen 127.0.0.1:9200
///
/// QUEUEABLE work (Mercury) waits in a per-node queue when the node is full; give
/// the worker the LM's --queueable-cap and choose the queue order:
///   worker --lm-url http://127.0.0.1:9100 --queue-order job --queueable-cap 0.8
///
/// Tasks run with the executor they name, or --default-executor: synthetic (hold the
/// resources for the duration), burn (busy-loop the requested cores for the
/// duration's CPU-seconds). Exec tasks (a command) write stdout and stderr to
/// <data-dir>/tasks/<job>.<index>/ (kept after they end: the newest --keep-task-logs
/// of them), served by GET /v1/tasks/{job}/{index}/logs. Each runs through the
/// megha-task-exec helper (next to this binary), inside cgroups (memory, CPU,
/// --task-pids-max processes) from its first instruction where the host allows
/// (else memory by RLIMIT_AS), as a uid of its own from --task-uids (or as
/// --task-user), with only PATH, HOME, LANG, its own variables and MEGHA_TASK,
/// MEGHA_TASK_DIR, TMPDIR. A root worker without --task-uids or --task-user
/// refuses exec tasks (--allow-run-as-self runs them as the worker):
///   worker --default-executor burn --task-uids 61000-61999
///
/// Settings also come from environment variables (shown below) or a TOML file
/// (--config; keys are the long flag names with `_`). Flags > env > file > defaults.
#[derive(Parser, Clone, Debug, Default, Serialize, Deserialize)]
#[command(name = "worker", version, about, long_about, verbatim_doc_comment)]
#[serde(default)]
pub struct WorkerArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEGHA_WORKER_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Base URL of this worker's Local Master. Default http://127.0.0.1:9100.
    #[arg(long, env = "MEGHA_WORKER_LM_URL", value_name = "URL")]
    pub lm_url: Option<String>,
    /// This worker's slot at its LM, 0..(LM's --workers), or `auto`: the LM gives it
    /// the first free slot (or the one this --advertise-url held before). Default 0.
    /// In a TOML file: a number (auto is 4294967295).
    #[arg(long, env = "MEGHA_WORKER_SLOT", value_parser = parse_slot)]
    pub slot: Option<u32>,
    /// Address for the worker's HTTP API. Default 127.0.0.1:9200 (port 0: any free).
    #[arg(long, env = "MEGHA_WORKER_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// URL the LM uses to reach this worker. Default http://<bound listen address>.
    #[arg(long, env = "MEGHA_WORKER_ADVERTISE_URL", value_name = "URL")]
    pub advertise_url: Option<String>,
    /// How often to check in with the LM (`POST /v1/worker/alive`). The check-in keeps
    /// the LM from declaring this worker lost (keep it well under the LM's
    /// --worker-timeout-ms, default 10000); when the LM restarted or declared this
    /// worker lost, the worker registers again, listing the tasks it holds.
    /// Milliseconds, default 1000.
    #[arg(long, env = "MEGHA_WORKER_LM_CHECK_MS", value_name = "MS")]
    pub lm_check_ms: Option<u64>,
    /// On SIGTERM, how long to wait for running tasks to finish. Default 30000.
    #[arg(long, env = "MEGHA_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: Option<u64>,
    /// Order of the QUEUEABLE queue of each node: job (tasks of earlier-submitted jobs
    /// first, by submission time across GMs: Mercury's queue reordering, as in the
    /// simulator) or fifo. Default job.
    #[arg(long, env = "MEGHA_WORKER_QUEUE_ORDER", value_name = "fifo|job")]
    pub queue_order: Option<String>,
    /// Share of each node's capacity running QUEUEABLE work may hold, in (0, 1]: the
    /// same as the LM's --queueable-cap. Default 1 (no cap).
    #[arg(long, env = "MEGHA_QUEUEABLE_CAP", value_name = "FRACTION")]
    pub queueable_cap: Option<f64>,
    /// Executor of tasks that name none: synthetic or burn. Default synthetic.
    #[arg(
        long,
        env = "MEGHA_WORKER_DEFAULT_EXECUTOR",
        value_name = "synthetic|burn"
    )]
    pub default_executor: Option<String>,
    /// Directory for task directories and logs, and the runs ended in the last
    /// 15 minutes (`ended-runs`, listed to a restarted LM even after this worker
    /// restarted). The worker creates it 0711 and refuses a symlink, a directory
    /// owned by another user or writable by others, and one another worker holds.
    /// Default: <base>/<cluster>-<LM host-port>-slot<slot> (one per worker), base
    /// /var/lib/megha-worker for root, else $XDG_STATE_HOME/megha-worker or
    /// ~/.local/state/megha-worker.
    #[arg(long, env = "MEGHA_WORKER_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// When killing an exec task: milliseconds between SIGTERM and SIGKILL to its
    /// process group. Default 5000.
    #[arg(long, env = "MEGHA_WORKER_KILL_GRACE_MS", value_name = "MS")]
    pub kill_grace_ms: Option<u64>,
    /// How many ended exec tasks' directories (logs) to keep. Default 1000.
    #[arg(long, env = "MEGHA_WORKER_KEEP_TASK_LOGS", value_name = "N")]
    pub keep_task_logs: Option<usize>,
    /// Limit exec tasks with cgroups when the host allows (else RLIMIT_AS). Default
    /// true.
    #[arg(
        long,
        env = "MEGHA_WORKER_CGROUPS",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub cgroups: Option<bool>,
    /// Exec tasks run each as a uid of its own from this range (FIRST-LAST, e.g.
    /// 61000-61999; gid = uid), so that running tasks cannot reach each other. The
    /// uids must belong to no account. Needs a root worker.
    #[arg(long, env = "MEGHA_WORKER_TASK_UIDS", value_name = "FIRST-LAST", value_parser = parse_uids)]
    #[serde(default, deserialize_with = "de_uids", serialize_with = "ser_uids")]
    pub task_uids: Option<(u32, u32)>,
    /// Exec tasks run as this account (e.g. nobody), all of them the same user.
    /// Not with --task-uids.
    #[arg(long, env = "MEGHA_WORKER_TASK_USER", value_name = "USER")]
    pub task_user: Option<String>,
    /// Run exec tasks as the worker's own user (a task can then read the worker's
    /// credentials and files: for a single-user development machine). Without it
    /// (and without --task-uids or --task-user) exec tasks are refused.
    #[arg(
        long,
        env = "MEGHA_WORKER_ALLOW_RUN_AS_SELF",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub allow_run_as_self: Option<bool>,
    /// Most processes and threads of one exec task (cgroup pids controller).
    /// Default 4096.
    #[arg(long, env = "MEGHA_WORKER_TASK_PIDS_MAX", value_name = "N")]
    pub task_pids_max: Option<u64>,
    /// The megha-task-exec program: the worker's task supervisor (one process),
    /// which starts each exec task inside its cgroups as its user. Default: next to
    /// the worker binary, else on PATH.
    #[arg(long, env = "MEGHA_WORKER_TASK_EXEC_HELPER", value_name = "FILE")]
    pub task_exec_helper: Option<PathBuf>,
    /// HTTPS without a certificate file: an issuing CA (PEM, made by `loadgen
    /// certs` as worker-issuer.pem) with which the worker issues itself, at start, a
    /// certificate for the IP address of --advertise-url (for replicas whose
    /// addresses are not known beforehand). With --tls-issuer-key; not with
    /// --tls-cert-file.
    #[arg(long, env = "MEGHA_TLS_ISSUER_CERT_FILE", value_name = "FILE")]
    pub tls_issuer_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-issuer-cert.
    #[arg(long, env = "MEGHA_TLS_ISSUER_KEY_FILE", value_name = "FILE")]
    pub tls_issuer_key: Option<PathBuf>,
    /// Logging, the cluster's name and credential, TLS, --print-config.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
}

fn parse_uids(s: &str) -> Result<(u32, u32), String> {
    crate::exec::identity::IdentityConfig::parse_range(s)
}

fn de_uids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    text.map(|t| parse_uids(&t).map_err(serde::de::Error::custom))
        .transpose()
}

/// `--task-uids` as written: `FIRST-LAST`.
fn ser_uids<S: serde::Serializer>(uids: &Option<(u32, u32)>, s: S) -> Result<S::Ok, S::Error> {
    match uids {
        Some((first, last)) => s.serialize_some(&format!("{first}-{last}")),
        None => s.serialize_none(),
    }
}

/// `auto` or a slot number.
fn parse_slot(s: &str) -> Result<u32, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(common::messages::AUTO_SLOT);
    }
    s.parse()
        .map_err(|e| format!("expected a slot number or `auto`: {e}"))
}

#[derive(Clone, Debug)]
pub struct WorkerSettings {
    pub lm_url: String,
    pub slot: u32,
    pub listen: String,
    pub advertise_url: Option<String>,
    pub drain_timeout: Duration,
    pub lm_check: Duration,
    pub process: service_kit::runtime::ProcessSettings,
    pub queue_order: QueueOrder,
    /// Share of a node running QUEUEABLE work may hold (1.0: no cap).
    pub queueable_cap: f64,
    /// The executor of tasks that name none.
    pub default_executor: Executor,
    pub exec: ExecSettings,
    /// `None`: open mode (loopback only; checked when serving).
    pub cluster_secret: Option<service_kit::auth::ClusterSecret>,
    /// See `--cluster-name`.
    pub cluster_name: common::ClusterName,
    /// HTTPS and the extra CA clients trust.
    pub tls: service_kit::tls::TlsSettings,
}

impl WorkerArgs {
    pub fn resolve(mut self) -> Result<WorkerSettings> {
        let file: WorkerArgs = load_file(self.config.as_deref())?;
        let config = self.config.take();
        self = service_kit::settings::layer(&self, &file)?;
        self.config = config;
        let default_executor = match self.default_executor.as_deref().map(str::trim) {
            None | Some("synthetic") => Executor::Synthetic,
            Some("burn") => Executor::Burn,
            Some(other) => bail!(
                "--default-executor: unknown executor `{other}`: use synthetic or burn (exec needs a command: tasks name it)"
            ),
        };
        let slot = self.slot.unwrap_or(0);
        let queue_order = match &self.queue_order {
            Some(text) => text
                .parse::<QueueOrder>()
                .map_err(|e| anyhow::anyhow!("--queue-order: {e}"))?,
            None => QueueOrder::JobSubmission,
        };
        let queueable_cap = service_kit::settings::queueable_cap(self.queueable_cap)?;
        let lm_url = self
            .lm_url
            .unwrap_or_else(|| "http://127.0.0.1:9100".into());
        if !lm_url.starts_with("http://") && !lm_url.starts_with("https://") {
            bail!("--lm-url must be an http:// or https:// URL (got {lm_url})");
        }
        let cluster_name = self.common.cluster_name()?;
        let data_dir = self.data_dir.unwrap_or_else(|| {
            crate::exec::data_dir::default_path(
                &cluster_name.to_string(),
                &lm_url,
                (slot != common::messages::AUTO_SLOT).then_some(slot),
            )
        });
        if self.task_pids_max == Some(0) {
            bail!("--task-pids-max must be positive");
        }
        Ok(WorkerSettings {
            tls: self
                .common
                .tls()?
                .with_issuer(self.tls_issuer_cert.clone(), self.tls_issuer_key.clone())?,
            cluster_secret: self.common.cluster_secret()?,
            cluster_name,
            lm_url: lm_url.trim_end_matches('/').to_owned(),
            slot,
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:9200".into()),
            advertise_url: self.advertise_url,
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(30_000)),
            lm_check: match self.lm_check_ms.unwrap_or(1000) {
                0 => bail!("--lm-check-ms must be positive"),
                ms => Duration::from_millis(ms),
            },
            process: self.common.process()?,
            queue_order,
            queueable_cap,
            default_executor,
            exec: ExecSettings {
                data_dir,
                grace: Duration::from_millis(self.kill_grace_ms.unwrap_or(5000)),
                keep_logs: self.keep_task_logs.unwrap_or(1000),
                cgroups: self.cgroups.unwrap_or(true),
                identity: crate::exec::identity::IdentityConfig {
                    task_user: self.task_user,
                    task_uids: self.task_uids,
                    allow_run_as_self: self.allow_run_as_self.unwrap_or(false),
                },
                pids_max: self.task_pids_max.unwrap_or(crate::exec::DEFAULT_PIDS_MAX),
                helper: self.task_exec_helper,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_accepts_numbers_and_auto() {
        let args = WorkerArgs::try_parse_from(["worker", "--slot", "auto"]).expect("auto");
        assert_eq!(args.slot, Some(common::messages::AUTO_SLOT));
        let args = WorkerArgs::try_parse_from(["worker", "--slot", "3"]).expect("3");
        assert_eq!(args.slot, Some(3));
        assert!(WorkerArgs::try_parse_from(["worker", "--slot", "three"]).is_err());
    }

    #[test]
    fn queue_order_and_cap_are_checked() {
        let resolve = |args: &[&str]| {
            let mut all = vec!["worker"];
            all.extend_from_slice(args);
            WorkerArgs::try_parse_from(all).expect("parse").resolve()
        };
        let s = resolve(&[]).expect("defaults");
        assert_eq!(
            (s.queue_order, s.queueable_cap),
            (QueueOrder::JobSubmission, 1.0)
        );
        let s = resolve(&["--queue-order", "fifo", "--queueable-cap", "0.5"]).expect("valid");
        assert_eq!((s.queue_order, s.queueable_cap), (QueueOrder::Fifo, 0.5));
        let err = resolve(&["--queue-order", "lifo"]).expect_err("unknown order");
        assert!(format!("{err:#}").contains("--queue-order"), "{err:#}");
        let err = resolve(&["--queueable-cap", "2"]).expect_err("cap above 1");
        assert!(format!("{err:#}").contains("--queueable-cap"), "{err:#}");
    }

    #[test]
    fn executor_settings_are_checked() {
        let resolve = |args: &[&str]| {
            let mut all = vec!["worker", "--slot", "3"];
            all.extend_from_slice(args);
            WorkerArgs::try_parse_from(all).expect("parse").resolve()
        };
        let s = resolve(&[]).expect("defaults");
        assert_eq!(s.default_executor, Executor::Synthetic);
        assert!(
            s.exec.data_dir.ends_with("megha-127.0.0.1-9100-slot3"),
            "{:?}",
            s.exec.data_dir
        );
        assert_eq!(s.exec.grace, Duration::from_secs(5));
        let s = resolve(&["--default-executor", "burn", "--kill-grace-ms", "10"]).expect("burn");
        assert_eq!(
            (s.default_executor, s.exec.grace),
            (Executor::Burn, Duration::from_millis(10))
        );
        let err = resolve(&["--default-executor", "exec"]).expect_err("exec needs a command");
        assert!(format!("{err:#}").contains("--default-executor"), "{err:#}");
    }
}
