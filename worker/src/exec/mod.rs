//! The worker's real executors: what runs a task the core launched ([`ExecOrder`])
//! and tells it when the task ended. Synthetic tasks never come here (the core's
//! timer ends them).
//!
//! - [`burn`]: busy threads until the task's CPU-seconds are consumed.
//! - [`process`]: a command run by the worker's task supervisor ([`supervisor`],
//!   [`wire`]; the `megha-task-exec` program, [`helper`]) as the task's user
//!   ([`identity`]), inside its cgroups from the first instruction, with its logs.
//! - [`limits`]: cgroups (v1 or v2; memory, cpu, pids) when the host allows,
//!   rlimits otherwise.
//! - [`logs`]: per-task directories and logs under the data dir ([`data_dir`]:
//!   made safely, one worker's only), and their retention.
//!
//! [`ExecOrder`]: worker_core::ExecOrder

pub mod burn;
pub mod data_dir;
pub mod helper;
pub mod identity;
pub mod limits;
pub mod logs;
pub mod process;
pub mod supervisor;
pub mod usage;
pub mod wire;

use common::{Executor, TaskId, TaskSpec};
use data_dir::DataDir;
use identity::{IdentityConfig, TaskIdentity};
use limits::Limits;
use logs::TaskLogs;
use service_kit::metrics::Histogram;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervisor::Supervisor;
use tokio::sync::oneshot;

/// Most processes (and threads) of one exec task, by default.
pub const DEFAULT_PIDS_MAX: u64 = 4096;

/// How the executors run.
#[derive(Clone, Debug)]
pub struct ExecSettings {
    /// Task directories and logs go under `<data_dir>/tasks/`.
    pub data_dir: PathBuf,
    /// Between SIGTERM and SIGKILL when a task is killed.
    pub grace: Duration,
    /// How many ended tasks' directories (logs) are kept.
    pub keep_logs: usize,
    /// Try cgroups for limits (else rlimits).
    pub cgroups: bool,
    /// Whom exec tasks run as.
    pub identity: IdentityConfig,
    /// Most processes of one task (cgroup pids controller).
    pub pids_max: u64,
    /// The `megha-task-exec` program (`None`: next to this program, else on PATH).
    pub helper: Option<PathBuf>,
}

impl ExecSettings {
    /// Settings for `data_dir` with the defaults of the worker's flags, and tasks
    /// run as the worker's own user (`--allow-run-as-self`): for embedded runs and
    /// tests, which change what they need.
    pub fn as_self(data_dir: PathBuf) -> ExecSettings {
        ExecSettings {
            data_dir,
            grace: Duration::from_secs(5),
            keep_logs: 1000,
            cgroups: true,
            identity: IdentityConfig {
                allow_run_as_self: true,
                ..IdentityConfig::default()
            },
            pids_max: DEFAULT_PIDS_MAX,
            helper: None,
        }
    }
}

/// The running burn and exec tasks of a worker.
#[derive(Debug)]
pub struct Executors {
    settings: ExecSettings,
    limits: Arc<Limits>,
    identity: TaskIdentity,
    supervisor: Arc<Supervisor>,
    logs: TaskLogs,
    /// Held for the worker's life: no other worker uses the directory.
    _data_dir: DataDir,
    /// Start order received -> command running, exec tasks.
    start_latency: Histogram,
    /// Run number and stop switch of each running task.
    /// Per running task: its run number and its stop (carrying the grace between
    /// SIGTERM and SIGKILL).
    running: HashMap<TaskId, (u64, oneshot::Sender<Duration>)>,
    runs: u64,
    /// Runs whose executor has not answered yet (stopped ones included).
    alive: HashSet<u64>,
}

impl Executors {
    /// Makes the data dir safely (refusing a symlink, a foreign or shared one),
    /// resolves whom tasks run as, finds out how limits can be enforced and kills
    /// what earlier lives of workers left in their cgroups (all logged). An error
    /// names the reason (bad flags, an unusable data directory).
    pub fn new(settings: ExecSettings) -> std::io::Result<Self> {
        let data_dir = DataDir::open(&settings.data_dir).map_err(std::io::Error::other)?;
        let logs = TaskLogs::new(&settings.data_dir, settings.keep_logs)?;
        let identity = TaskIdentity::resolve(&settings.identity).map_err(std::io::Error::other)?;
        let limits = Limits::detect(settings.cgroups);
        let helper = settings.helper.clone().unwrap_or_else(helper::default_path);
        let reaped = limits.reap_previous_lives();
        if reaped > 0 {
            tracing::warn!(
                processes = reaped,
                "killed processes left in the cgroups of earlier worker lives on this host"
            );
        }
        match &limits {
            Limits::Cgroup { .. } => {
                tracing::info!(limits = %limits.describe(), data_dir = %settings.data_dir.display(), helper = %helper.display(), "exec tasks: limits enforced with cgroups")
            }
            Limits::Rlimit { .. } => {
                tracing::warn!(limits = %limits.describe(), data_dir = %settings.data_dir.display(), helper = %helper.display(), "exec tasks: cgroups unavailable, memory limited by RLIMIT_AS only, CPU and process count not limited")
            }
        }
        match &identity {
            TaskIdentity::Range(_) | TaskIdentity::User { .. } => {
                tracing::info!(identity = %identity.describe(), "exec tasks: identity")
            }
            TaskIdentity::AsSelf | TaskIdentity::Refuse(_) => {
                tracing::warn!(identity = %identity.describe(), "exec tasks: identity")
            }
        }
        if !matches!(identity, TaskIdentity::Refuse(_)) && !helper::usable(&helper) {
            tracing::warn!(helper = %helper.display(), "the task supervisor megha-task-exec is not found: exec tasks will fail to start (install it next to the worker, or give --task-exec-helper)");
        }
        let start_latency = Histogram::latency(
            "megha_worker_exec_start_latency_seconds",
            "Exec tasks: from the start order to the command running (handed to the task supervisor, forked inside its cgroups, user switched).",
        )
        .map_err(std::io::Error::other)?;
        Ok(Executors {
            settings,
            limits: Arc::new(limits),
            identity,
            supervisor: Arc::new(Supervisor::new(helper)),
            logs,
            _data_dir: data_dir,
            start_latency,
            running: HashMap::new(),
            runs: 0,
            alive: HashSet::new(),
        })
    }

    /// The task supervisor (told the worker's lease by the fence guard).
    pub fn supervisor(&self) -> Arc<Supervisor> {
        self.supervisor.clone()
    }

    /// Whom exec tasks run as.
    pub fn identity(&self) -> &TaskIdentity {
        &self.identity
    }

    /// Start order -> command running, exec tasks.
    pub fn start_latency(&self) -> &Histogram {
        &self.start_latency
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn logs(&self) -> &TaskLogs {
        &self.logs
    }

    /// How many burn and exec runs have not ended yet (stopped ones included).
    pub fn running(&self) -> usize {
        self.alive.len()
    }

    /// Starts `task` under `executor` (not synthetic): its run number and a handle
    /// that answers how it ended (`None`: cleanly). A run stopped by
    /// [`Executors::stop`] answers too (the core already reported it killed).
    pub fn launch(
        &mut self,
        task: TaskSpec,
        executor: &Executor,
    ) -> (u64, tokio::task::JoinHandle<process::RunEnd>) {
        let (stop_tx, stop_rx) = oneshot::channel();
        self.runs += 1;
        let run = self.runs;
        self.alive.insert(run);
        if let Some((_, old)) = self.running.insert(task.id, (run, stop_tx)) {
            // The core refuses duplicates: an older run is ending; make sure.
            let _ = old.send(self.settings.grace);
        }
        let handle = match executor {
            Executor::Burn | Executor::BurnByPlacement(_) => {
                let duration = executor
                    .burn_duration(task.duration)
                    .unwrap_or(task.duration);
                tokio::spawn(async move {
                    burn::run(&task, duration, stop_rx).await;
                    process::RunEnd::default()
                })
            }
            Executor::Exec(cmd) => {
                let cmd = cmd.clone();
                let received = Instant::now();
                let limits = self.limits.for_run(
                    run,
                    task.resources.memory_mb,
                    task.resources.cpu_millis,
                    self.settings.pids_max,
                );
                let prepared = process::prepare(&self.logs, &task, self.identity.for_run(), limits);
                let supervisor = self.supervisor.clone();
                let latency = self.start_latency.clone();
                tokio::spawn(async move {
                    match prepared {
                        Ok(p) => {
                            let start = process::Start {
                                run,
                                supervisor: &supervisor,
                                received,
                                latency: &latency,
                            };
                            process::run(&task, &cmd, p, start, stop_rx).await
                        }
                        Err(failure) => process::RunEnd::failed(failure),
                    }
                })
            }
            Executor::Synthetic => {
                tracing::error!(task = %task.id, job = task.id.job.0, "a synthetic task sent to the executors; ending it at once");
                tokio::spawn(async { process::RunEnd::default() })
            }
        };
        (run, handle)
    }

    /// Stops a running task (SIGTERM, grace, SIGKILL for exec). Unknown: ended.
    pub fn stop(&mut self, task: TaskId) -> bool {
        self.stop_within(task, self.settings.grace)
    }

    /// [`Executors::stop`] with SIGKILL after `grace` at most (a fence must be done
    /// before the LM's timeout).
    pub fn stop_within(&mut self, task: TaskId, grace: Duration) -> bool {
        match self.running.remove(&task) {
            Some((_, stop)) => stop.send(grace.min(self.settings.grace)).is_ok(),
            None => false,
        }
    }

    /// Run `run` of `task` answered: keeps its logs (retention). True when it is
    /// the task's current run, not stopped: the core must hear of its end.
    pub fn ended(&mut self, task: TaskId, run: u64) -> bool {
        self.alive.remove(&run);
        if self.logs.dir(task).exists() {
            self.logs.ended(task);
        }
        match self.running.get(&task) {
            Some((current, _)) if *current == run => {
                self.running.remove(&task);
                true
            }
            _ => false,
        }
    }

    /// Stops every task (shutdown).
    pub fn shutdown(&mut self) {
        for (_, (_, stop)) in self.running.drain() {
            let _ = stop.send(self.settings.grace);
        }
    }

    /// Stops the task supervisor and removes the worker's own cgroup (after its
    /// tasks ended).
    pub fn remove_cgroup(&self) {
        self.supervisor.stop();
        self.limits.remove();
    }

    /// How many times the task supervisor ended while the worker ran.
    pub fn supervisors_lost(&self) -> u64 {
        self.supervisor.lost()
    }
}

impl Drop for Executors {
    /// Best effort when the worker goes away without [`Executors::shutdown`] (an
    /// early exit): stop what runs, remove the worker's cgroup if it is empty.
    fn drop(&mut self) {
        self.shutdown();
        self.supervisor.stop();
        self.limits.remove();
    }
}
