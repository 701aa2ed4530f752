//! The worker's real executors: what runs a task the core launched ([`ExecOrder`])
//! and tells it when the task ended. Synthetic tasks never come here (the core's
//! timer ends them).
//!
//! - [`burn`]: busy threads until the task's CPU-seconds are consumed.
//! - [`process`]: a command in its own process group, under limits, with logs.
//! - [`limits`]: cgroups (v1 or v2) when the host allows, rlimits otherwise.
//! - [`logs`]: per-task directories and logs under the data dir, and their retention.
//!
//! [`ExecOrder`]: worker_core::ExecOrder

pub mod burn;
pub mod limits;
pub mod logs;
pub mod process;

use common::messages::TaskFailure;
use common::{Executor, TaskId, TaskSpec};
use limits::Limits;
use logs::TaskLogs;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

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
}

/// The running burn and exec tasks of a worker.
#[derive(Debug)]
pub struct Executors {
    settings: ExecSettings,
    limits: Arc<Limits>,
    logs: TaskLogs,
    /// Run number and stop switch of each running task.
    /// Per running task: its run number and its stop (carrying the grace between
    /// SIGTERM and SIGKILL).
    running: HashMap<TaskId, (u64, oneshot::Sender<Duration>)>,
    runs: u64,
    /// Runs whose executor has not answered yet (stopped ones included).
    alive: HashSet<u64>,
}

impl Executors {
    /// Creates the data dir and finds out how limits can be enforced (logged).
    pub fn new(settings: ExecSettings) -> std::io::Result<Self> {
        let logs = TaskLogs::new(&settings.data_dir, settings.keep_logs)?;
        let limits = Limits::detect(settings.cgroups);
        match &limits {
            Limits::Cgroup { .. } => {
                tracing::info!(limits = %limits.describe(), data_dir = %settings.data_dir.display(), "exec tasks: limits enforced with cgroups")
            }
            Limits::Rlimit { .. } => {
                tracing::warn!(limits = %limits.describe(), data_dir = %settings.data_dir.display(), "exec tasks: cgroups unavailable, memory limited by RLIMIT_AS only and CPU not limited")
            }
        }
        Ok(Executors {
            settings,
            limits: Arc::new(limits),
            logs,
            running: HashMap::new(),
            runs: 0,
            alive: HashSet::new(),
        })
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
    ) -> (u64, tokio::task::JoinHandle<Option<TaskFailure>>) {
        let (stop_tx, stop_rx) = oneshot::channel();
        self.runs += 1;
        let run = self.runs;
        self.alive.insert(run);
        if let Some((_, old)) = self.running.insert(task.id, (run, stop_tx)) {
            // The core refuses duplicates: an older run is ending; make sure.
            let _ = old.send(self.settings.grace);
        }
        let handle = match executor {
            Executor::Burn => tokio::spawn(async move {
                burn::run(&task, stop_rx).await;
                None
            }),
            Executor::Exec(cmd) => {
                let cmd = cmd.clone();
                let prepared = process::prepare(&self.logs, &task);
                let limits = self.limits.clone();
                tokio::spawn(async move {
                    match prepared {
                        Ok(p) => process::run(&task, &cmd, p, limits, stop_rx).await,
                        Err(failure) => Some(failure),
                    }
                })
            }
            Executor::Synthetic => {
                tracing::error!(task = %task.id, job = task.id.job.0, "a synthetic task sent to the executors; ending it at once");
                tokio::spawn(async { None })
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

    /// Removes the worker's own cgroup (after its tasks ended).
    pub fn remove_cgroup(&self) {
        self.limits.remove();
    }
}

impl Drop for Executors {
    /// Best effort when the worker goes away without [`Executors::shutdown`] (an
    /// early exit): stop what runs, remove the worker's cgroup if it is empty.
    fn drop(&mut self) {
        self.shutdown();
        self.limits.remove();
    }
}
