//! The `exec` executor: a command run by its helper (`megha-task-exec`,
//! [`super::helper`]) inside the run's cgroups, as the run's user, with only the
//! documented environment, stdout and stderr to the task's log files. A stop asks
//! the helper for SIGTERM to every process of the run, then SIGKILL after the grace
//! period; when the command ends, the helper kills whatever is left of the run
//! before it reports, so nothing of a task outlives it. If the worker dies, each
//! helper sees its socket close and kills its run.

use super::helper::{self, Report, Spec};
use super::identity::RunIdentity;
use super::limits::RunLimits;
use super::logs::TaskLogs;
use common::messages::TaskFailure;
use common::{ExecCommand, TaskSpec};
use service_kit::metrics::Histogram;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

/// The variables every exec task gets besides its spec's (see [`environment`]).
pub const TASK_VARIABLES: [&str; 6] = [
    "PATH",
    "HOME",
    "LANG",
    "MEGHA_TASK",
    "MEGHA_TASK_DIR",
    "TMPDIR",
];

/// The `PATH` of a task that sets none.
pub const TASK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What a run needs, prepared on the actor's side before the helper is spawned.
#[derive(Debug)]
pub struct Prepared {
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
    /// The task's working directory unless the command names one.
    pub work: PathBuf,
    pub identity: RunIdentity,
    pub limits: RunLimits,
}

/// Prepares the run's identity, directory and log files.
pub fn prepare(
    logs: &TaskLogs,
    task: &TaskSpec,
    identity: Result<RunIdentity, String>,
    limits: RunLimits,
) -> Result<Prepared, TaskFailure> {
    let identity = identity
        .map_err(|why| start_failed(format!("exec tasks are refused on this worker: {why}")))?;
    let owner = identity.uid.zip(identity.gid);
    let (stdout, stderr) = logs.create(task.id, owner).map_err(|e| {
        start_failed(format!(
            "cannot create the task directory {}: {e}",
            logs.dir(task.id).display()
        ))
    })?;
    Ok(Prepared {
        stdout,
        stderr,
        work: logs.work_dir(task.id),
        identity,
        limits,
    })
}

fn start_failed(reason: String) -> TaskFailure {
    TaskFailure::StartFailed { reason }
}

/// The task's environment: a minimal `PATH`, `HOME` and `LANG`, then the spec's
/// variables (which may replace those three), then the task variables
/// (`MEGHA_TASK`, `MEGHA_TASK_DIR`, `TMPDIR`), which nothing replaces.
pub fn environment(task: &TaskSpec, cmd: &ExecCommand, work: &Path) -> Vec<(String, String)> {
    let work = work.display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), TASK_PATH.into()),
        ("HOME".into(), work.clone()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    for (k, v) in &cmd.env {
        env.retain(|(old, _)| old != k);
        env.push((k.clone(), v.clone()));
    }
    for (k, v) in [
        ("MEGHA_TASK", task.id.to_string()),
        ("MEGHA_TASK_DIR", work.clone()),
        ("TMPDIR", work),
    ] {
        env.retain(|(old, _)| old != k);
        env.push((k.into(), v));
    }
    env
}

/// Runs `cmd` for `task` through the helper at `helper_path` until it exits or
/// `stop` fires (with the grace between SIGTERM and SIGKILL); `None` is a clean
/// exit. `received`: when the start order came (for `start_latency`).
pub async fn run(
    task: &TaskSpec,
    cmd: &ExecCommand,
    prepared: Prepared,
    helper_path: &Path,
    stop: oneshot::Receiver<Duration>,
    received: Instant,
    start_latency: &Histogram,
) -> Option<TaskFailure> {
    let Prepared {
        stdout,
        stderr,
        work,
        identity,
        limits,
    } = prepared;
    let cwd = cmd.cwd.as_ref().map_or_else(|| work.clone(), PathBuf::from);
    let spec = Spec {
        program: cmd.program.clone(),
        args: cmd.args.clone(),
        env: environment(task, cmd, &work),
        cwd,
        uid: identity.uid,
        gid: identity.gid,
        cgroups: limits.cgroups.clone(),
        address_space: limits.address_space,
    };
    let outcome = supervise(
        task,
        &spec,
        helper_path,
        stdout,
        stderr,
        stop,
        received,
        start_latency,
    )
    .await;
    // The helper is gone: make sure nothing of the run is left, then free its
    // cgroups, remove its working directory (a later run with the same uid must
    // not find its files; the logs stay) and, when `identity` drops, its uid.
    let (oom, leftovers) = tokio::task::spawn_blocking(move || {
        let oom = limits.oom_killed();
        let left = limits.release();
        if identity.uid.is_some() {
            if let Err(e) = std::fs::remove_dir_all(&work) {
                tracing::warn!(dir = %work.display(), error = %e, "cannot remove an ended task's working directory");
            }
        }
        drop(identity);
        (oom, left)
    })
    .await
    .unwrap_or((false, 0));
    if leftovers > 0 {
        tracing::warn!(task = %task.id, job = task.id.job.0, processes = leftovers, "processes of the task were left after its helper exited; killed");
    }
    match outcome {
        Ok(Report::Exit { code: 0 }) if !oom => None,
        Ok(Report::Exit { .. } | Report::Signal { .. }) if oom => Some(TaskFailure::Signal {
            signal: 9,
            out_of_memory: true,
        }),
        Ok(Report::Exit { code }) => Some(TaskFailure::Exit { code }),
        Ok(Report::Signal { signal }) => Some(TaskFailure::Signal {
            signal,
            out_of_memory: false,
        }),
        Ok(Report::Error { reason }) => Some(start_failed(reason)),
        Ok(Report::Started { .. }) => Some(start_failed(
            "the task's helper reported nothing more".into(),
        )),
        Err(reason) => Some(start_failed(reason)),
    }
}

/// Spawns the helper, hands it the spec and waits for its final report, passing on
/// a stop.
#[allow(clippy::too_many_arguments)]
async fn supervise(
    task: &TaskSpec,
    spec: &Spec,
    helper_path: &Path,
    stdout: std::fs::File,
    stderr: std::fs::File,
    mut stop: oneshot::Receiver<Duration>,
    received: Instant,
    start_latency: &Histogram,
) -> Result<Report, String> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("cannot make the helper's socket: {e}"))?;
    ours.set_nonblocking(true)
        .map_err(|e| format!("cannot make the helper's socket: {e}"))?;
    let mut child = tokio::process::Command::new(helper_path)
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(stdout)
        .stderr(stderr)
        // Its own group: a Ctrl-C meant for the worker does not reach it (it acts
        // when the worker goes away).
        .process_group(0)
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run the task helper {}: {e} (install megha-task-exec next to the worker, or give --task-exec-helper)",
                helper_path.display()
            )
        })?;
    let socket = tokio::net::UnixStream::from_std(ours)
        .map_err(|e| format!("cannot use the helper's socket: {e}"))?;
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut first =
        serde_json::to_string(spec).map_err(|e| format!("cannot encode the spec: {e}"))?;
    first.push('\n');
    let talk = async {
        write
            .write_all(first.as_bytes())
            .await
            .map_err(|e| format!("cannot hand the task to its helper: {e}"))?;
        let next = |line: Option<String>| {
            line.as_deref().and_then(Report::parse).ok_or_else(|| {
                "the task's helper (megha-task-exec) ended without a report".to_string()
            })
        };
        match next(lines.next_line().await.ok().flatten())? {
            Report::Started { .. } => start_latency.observe(received.elapsed().as_secs_f64()),
            other => return Ok(other),
        }
        tokio::select! {
            line = lines.next_line() => return next(line.ok().flatten()),
            Ok(grace) = &mut stop => {
                let _ = write.write_all(helper::TERM.as_bytes()).await;
                match tokio::time::timeout(grace, lines.next_line()).await {
                    Ok(line) => return next(line.ok().flatten()),
                    Err(_) => {
                        tracing::info!(task = %task.id, job = task.id.job.0, grace_ms = grace.as_millis() as u64, "task still running after SIGTERM and the grace period; SIGKILL");
                        let _ = write.write_all(helper::KILL.as_bytes()).await;
                    }
                }
            }
        }
        next(lines.next_line().await.ok().flatten())
    };
    let report = talk.await;
    drop(write);
    let _ = child.wait().await;
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Micros, Resources, TaskId};

    #[test]
    fn a_task_gets_the_task_variables_and_its_own_nothing_else() {
        let task = TaskSpec::short(TaskId::new(4, 2), Resources::cores(1, 64), Micros(1));
        let cmd = ExecCommand {
            program: "true".into(),
            env: [
                ("LANG".to_string(), "fr_FR.UTF-8".to_string()),
                ("MEGHA_TASK".to_string(), "forged".to_string()),
                ("X".to_string(), "1".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        let env = environment(&task, &cmd, Path::new("/w"));
        let mut names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        names.sort_unstable();
        let mut expected: Vec<&str> = TASK_VARIABLES.iter().copied().chain(["X"]).collect();
        expected.sort_unstable();
        assert_eq!(names, expected);
        let value = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(value("LANG"), Some("fr_FR.UTF-8"), "the spec may set LANG");
        assert_eq!(
            value("MEGHA_TASK"),
            Some("4.2"),
            "but not the task variables"
        );
        assert_eq!(value("TMPDIR"), Some("/w"));
    }
}
