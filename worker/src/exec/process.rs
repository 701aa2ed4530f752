//! The `exec` executor: a command in its own process group, stdout and stderr to the
//! task's log files, under the task's limits. A stop sends SIGTERM to the group,
//! then SIGKILL after the grace period; when the command ends, whatever is left of
//! its group (and of its cgroup) is killed, so nothing of a task outlives it.

use super::limits::{Limits, TaskLimits};
use super::logs::TaskLogs;
use common::messages::TaskFailure;
use common::{ExecCommand, TaskSpec};
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// What a run needs, prepared by the actor's side before the task is spawned.
#[derive(Debug)]
pub struct Prepared {
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
    /// The task's directory: the working directory unless the command names one.
    pub dir: PathBuf,
}

/// Prepares the task's directory and log files.
pub fn prepare(logs: &TaskLogs, task: &TaskSpec) -> Result<Prepared, TaskFailure> {
    let (stdout, stderr) = logs.create(task.id).map_err(|e| {
        start_failed(format!(
            "cannot create the task directory {}: {e}",
            logs.dir(task.id).display()
        ))
    })?;
    Ok(Prepared {
        stdout,
        stderr,
        dir: logs.dir(task.id),
    })
}

fn start_failed(reason: String) -> TaskFailure {
    TaskFailure::StartFailed { reason }
}

/// Runs `cmd` for `task` until it exits or `stop` fires (with the grace between
/// SIGTERM and SIGKILL); `None` is a clean exit.
pub async fn run(
    task: &TaskSpec,
    cmd: &ExecCommand,
    prepared: Prepared,
    limits: Arc<Limits>,
    stop: oneshot::Receiver<Duration>,
) -> Option<TaskFailure> {
    let cwd = cmd
        .cwd
        .as_ref()
        .map_or_else(|| prepared.dir.clone(), PathBuf::from);
    if !cwd.is_dir() {
        return Some(start_failed(format!(
            "working directory {} does not exist or is not a directory",
            cwd.display()
        )));
    }
    let mut command = tokio::process::Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .envs(&cmd.env)
        .env("MEGHA_TASK", task.id.to_string())
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(prepared.stdout)
        .stderr(prepared.stderr)
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Some(start_failed(format!("cannot run `{}`: {e}", cmd.program)));
        }
    };
    let Some((pid, pgid)) = child
        .id()
        .and_then(|id| Some((id, Pid::from_raw(i32::try_from(id).ok()?)?)))
    else {
        return Some(start_failed("the process has no pid".into()));
    };
    // Cgroup file writes block: off the actor's thread.
    let spec = task.clone();
    let applied = tokio::task::spawn_blocking(move || limits.apply(&spec, pid))
        .await
        .unwrap_or_else(|e| Err(format!("the limits thread failed: {e}")));
    let task_limits = match applied {
        Ok(l) => l,
        Err(e) => {
            let _ = kill_process_group(pgid, Signal::KILL);
            let _ = child.wait().await;
            return Some(start_failed(format!("cannot apply the task's limits: {e}")));
        }
    };
    let waited = tokio::select! {
        status = child.wait() => status,
        Ok(grace) = stop => {
            let _ = kill_process_group(pgid, Signal::TERM);
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    tracing::info!(task = %task.id, job = task.id.job.0, grace_ms = grace.as_millis() as u64, "task still running after SIGTERM and the grace period; SIGKILL");
                    let _ = kill_process_group(pgid, Signal::KILL);
                    child.wait().await
                }
            }
        }
    };
    // Whatever is left of the group (a background child of the command) goes too.
    let _ = kill_process_group(pgid, Signal::KILL);
    let oom = task_limits.oom_killed();
    clean_up(task, task_limits).await;
    match waited {
        Ok(status) => failure_of(status, oom),
        Err(e) => Some(TaskFailure::StartFailed {
            reason: format!("cannot wait for the process: {e}"),
        }),
    }
}

/// How an exit status ends a task: `None` for code 0.
pub fn failure_of(status: ExitStatus, oom: bool) -> Option<TaskFailure> {
    match (status.code(), status.signal()) {
        (Some(0), _) => None,
        (Some(code), _) => Some(TaskFailure::Exit { code }),
        (None, Some(signal)) => Some(TaskFailure::Signal {
            signal,
            out_of_memory: oom,
        }),
        (None, None) => Some(TaskFailure::Exit { code: -1 }),
    }
}

/// Kills processes left in the task's cgroup, then removes it (retrying while
/// they die).
async fn clean_up(task: &TaskSpec, limits: TaskLimits) {
    for _ in 0..50 {
        let left = limits.leftover_pids();
        if left.is_empty() {
            break;
        }
        for pid in left {
            if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let released = tokio::task::spawn_blocking(move || limits.release())
        .await
        .unwrap_or_else(|e| Err(format!("the limits thread failed: {e}")));
    if let Err(e) = released {
        tracing::warn!(task = %task.id, job = task.id.job.0, error = %e, "cannot remove the task's cgroup");
    }
}
