//! The `exec` executor: a command run by the worker's task supervisor
//! (`megha-task-exec`, [`super::helper`], through [`super::supervisor`]) inside the
//! run's cgroups, as the run's user, with only the documented environment, stdout
//! and stderr to the task's log files. A stop asks the supervisor for SIGTERM to
//! every process of the run, then SIGKILL after the grace period; when the command
//! ends, the supervisor kills whatever is left of the run before it reports, so
//! nothing of a task outlives it. If the worker dies, the supervisor sees its
//! socket close and kills every run.

use super::identity::RunIdentity;
use super::limits::RunLimits;
use super::logs::TaskLogs;
use super::supervisor::Supervisor;
use super::wire::{Report, Spec};
use common::messages::TaskFailure;
use common::{ExecCommand, TaskSpec};
use service_kit::metrics::Histogram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The variables every exec task gets besides its spec's (see [`environment`];
/// docs/cli.md lists them for users, with `MEGHA_TASK_COUNT`, which the GM puts in
/// the spec's).
pub const TASK_VARIABLES: [&str; 9] = [
    "PATH",
    "HOME",
    "LANG",
    "MEGHA_TASK",
    "MEGHA_JOB",
    "MEGHA_TASK_INDEX",
    "MEGHA_ATTEMPT",
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
    let (stdout, stderr) = logs.create(task.id, task.attempt, owner).map_err(|e| {
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
/// (`MEGHA_TASK` = `JOB.INDEX`, `MEGHA_JOB`, `MEGHA_TASK_INDEX`, `MEGHA_ATTEMPT`: the
/// run, 1 for the first; `MEGHA_TASK_DIR`, `TMPDIR`), which nothing replaces.
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
        ("MEGHA_JOB", task.id.job.0.to_string()),
        ("MEGHA_TASK_INDEX", task.id.index.to_string()),
        ("MEGHA_ATTEMPT", task.attempt.to_string()),
        ("MEGHA_TASK_DIR", work.clone()),
        ("TMPDIR", work),
    ] {
        env.retain(|(old, _)| old != k);
        env.push((k.into(), v));
    }
    env
}

/// Where a run goes, and what its start is measured from.
#[derive(Debug)]
pub struct Start<'a> {
    /// The run's number (the supervisor's name for it).
    pub run: u64,
    pub supervisor: &'a Supervisor,
    /// When the start order came (for `latency`).
    pub received: Instant,
    /// Start order -> command running.
    pub latency: &'a Histogram,
}

/// How a run ended (`failure`: `None` for a clean exit) and what it used, when
/// its cgroup said.
#[derive(Debug, Default)]
pub struct RunEnd {
    pub failure: Option<TaskFailure>,
    pub used: Option<common::messages::RunUsage>,
}

impl RunEnd {
    pub fn failed(failure: TaskFailure) -> RunEnd {
        RunEnd {
            failure: Some(failure),
            used: None,
        }
    }
}

/// Runs `cmd` for `task` through the task supervisor until it exits or `stop`
/// fires (with the grace between SIGTERM and SIGKILL).
pub async fn run(
    task: &TaskSpec,
    cmd: &ExecCommand,
    prepared: Prepared,
    start: Start<'_>,
    stop: oneshot::Receiver<Duration>,
) -> RunEnd {
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
        cgroup_v2: limits.v2,
        address_space: limits.address_space,
    };
    let outcome = supervise(task, spec, &stdout, &stderr, start, stop).await;
    drop((stdout, stderr));
    // The run ended: make sure nothing of it is left, then free (or keep) its
    // cgroups, remove its working directory (a later run with the same uid must
    // not find its files; the logs stay) and, when `identity` drops, its uid.
    // When the supervisor reported the command's end, nothing of the run is left.
    let ended_clean = matches!(
        outcome,
        Ended::Reported(Report::Exit { .. } | Report::Signal { .. })
    );
    let (oom, leftovers, used) = tokio::task::spawn_blocking(move || {
        let oom = limits.oom_killed();
        let used = limits.used();
        let left = limits.release(ended_clean && !oom);
        if identity.uid.is_some() {
            if let Err(e) = std::fs::remove_dir_all(&work) {
                tracing::warn!(dir = %work.display(), error = %e, "cannot remove an ended task's working directory");
            }
        }
        drop(identity);
        (oom, left, used)
    })
    .await
    .unwrap_or((false, 0, None));
    if leftovers > 0 {
        tracing::warn!(task = %task.id, job = task.id.job.0, processes = leftovers, "processes of the task were left after its supervisor ended; killed");
    }
    let failure = match outcome {
        Ended::Reported(Report::Exit { code: 0 }) if !oom => None,
        Ended::Reported(Report::Exit { .. } | Report::Signal { .. }) if oom => {
            Some(TaskFailure::Signal {
                signal: 9,
                out_of_memory: true,
            })
        }
        Ended::Reported(Report::Exit { code }) => Some(TaskFailure::Exit { code }),
        Ended::Reported(Report::Signal { signal }) => Some(TaskFailure::Signal {
            signal,
            out_of_memory: false,
        }),
        Ended::Reported(Report::Error { reason }) | Ended::NotHanded(reason) => {
            Some(start_failed(reason))
        }
        Ended::Reported(Report::Started { .. }) | Ended::SupervisorGone { started: false } => {
            Some(start_failed(
                "the task supervisor (megha-task-exec) ended before the command started".into(),
            ))
        }
        Ended::SupervisorGone { started: true } => {
            // What was left of the run was killed above (SIGKILL).
            tracing::warn!(task = %task.id, job = task.id.job.0, "the task supervisor ended while the task ran; the task was killed");
            Some(TaskFailure::Signal {
                signal: 9,
                out_of_memory: false,
            })
        }
    };
    RunEnd { failure, used }
}

/// How a run ended, as the worker learned it.
#[derive(Debug)]
enum Ended {
    /// The supervisor's last word on it.
    Reported(Report),
    /// The supervisor ended first (`started`: after the command started).
    SupervisorGone { started: bool },
    /// The run never reached the supervisor (why).
    NotHanded(String),
}

/// Hands the run to the supervisor and waits for its final report, passing on a
/// stop.
async fn supervise(
    task: &TaskSpec,
    spec: Spec,
    stdout: &std::fs::File,
    stderr: &std::fs::File,
    start: Start<'_>,
    mut stop: oneshot::Receiver<Duration>,
) -> Ended {
    let mut channel = match start.supervisor.start(start.run, spec, stdout, stderr) {
        Ok(c) => c,
        Err(why) => return Ended::NotHanded(why),
    };
    match channel.next().await {
        Some(Report::Started { .. }) => start
            .latency
            .observe(start.received.elapsed().as_secs_f64()),
        Some(other) => return Ended::Reported(other),
        None => return Ended::SupervisorGone { started: false },
    }
    let last = |report: Option<Report>| {
        report.map_or(Ended::SupervisorGone { started: true }, Ended::Reported)
    };
    tokio::select! {
        report = channel.next() => return last(report),
        Ok(grace) = &mut stop => {
            channel.term();
            match tokio::time::timeout(grace, channel.next()).await {
                Ok(report) => return last(report),
                Err(_) => {
                    tracing::info!(task = %task.id, job = task.id.job.0, grace_ms = grace.as_millis() as u64, "task still running after SIGTERM and the grace period; SIGKILL");
                    channel.kill();
                }
            }
        }
    }
    last(channel.next().await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Micros, Resources, TaskId};

    #[test]
    fn a_task_gets_the_task_variables_and_its_own_nothing_else() {
        let mut task = TaskSpec::short(TaskId::new(4, 2), Resources::cores(1, 64), Micros(1));
        task.attempt = 3;
        let cmd = ExecCommand {
            program: "true".into(),
            env: [
                ("LANG".to_string(), "fr_FR.UTF-8".to_string()),
                ("MEGHA_TASK".to_string(), "forged".to_string()),
                ("MEGHA_ATTEMPT".to_string(), "forged".to_string()),
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
        assert_eq!(value("MEGHA_JOB"), Some("4"));
        assert_eq!(value("MEGHA_TASK_INDEX"), Some("2"));
        assert_eq!(value("MEGHA_ATTEMPT"), Some("3"), "nor the run");
    }
}
