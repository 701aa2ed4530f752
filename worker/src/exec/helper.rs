//! `megha-task-exec`: the small program between the worker and a task's command, as
//! slurmstepd and runc are. The worker spawns it (as itself, root when tasks switch
//! users) with an empty environment; it
//!
//! 1. reads the run's [`Spec`] (one JSON line) from its stdin, a socket to the worker;
//! 2. creates the run's cgroups, writes their limits and joins them, sets
//!    `RLIMIT_CORE` 0 (and `RLIMIT_AS` when there are no cgroups) and `no_new_privs`;
//! 3. spawns the command as the task's user (uid, gid, no supplementary groups), in
//!    its own process group, with exactly the spec's environment, stdin from
//!    `/dev/null` and its own stdout and stderr (the task's log files, opened by the
//!    worker) — so the command is inside its cgroup and limits from its first
//!    instruction;
//! 4. reports `started <pid>` and, when the command ends, `exit <code>` or
//!    `signal <n>` (or `error <reason>` when it could not start) on the socket;
//! 5. obeys `term` (SIGTERM to every process of the run) and `kill` (SIGKILL to every
//!    process) from the worker; when the socket closes (the worker died, or dropped
//!    the run) it kills every process of the run and exits.
//!
//! "Every process of the run" is every process in the run's cgroup (whatever its
//! session or process group); without cgroups, the command's process group and,
//! when the run has a uid of its own, every process of that uid. The helper leaves
//! only when none is left, so a run whose helper is gone has nothing running.
//!
//! The helper never removes the run's cgroups (it is inside them): the worker does
//! when the helper exited, or the next life of the worker does (see
//! [`super::limits::Limits::reap_previous_lives`]).

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the helper runs: the first line on its socket.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// `None`: run as the helper's own user (the worker's; `--allow-run-as-self`).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The run's cgroup in each hierarchy, created by the helper, with the files
    /// to write before joining (e.g. `memory.limit_in_bytes`).
    pub cgroups: Vec<CgroupSpec>,
    /// `RLIMIT_AS` in bytes (without cgroups).
    pub address_space: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CgroupSpec {
    pub dir: PathBuf,
    pub settings: Vec<(String, String)>,
}

/// A line from the helper to the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Started { pid: u32 },
    Exit { code: i32 },
    Signal { signal: i32 },
    Error { reason: String },
}

impl Report {
    pub fn line(&self) -> String {
        match self {
            Report::Started { pid } => format!("started {pid}\n"),
            Report::Exit { code } => format!("exit {code}\n"),
            Report::Signal { signal } => format!("signal {signal}\n"),
            Report::Error { reason } => format!("error {}\n", reason.replace('\n', " ")),
        }
    }

    pub fn parse(line: &str) -> Option<Report> {
        let line = line.trim_end_matches('\n');
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "started" => rest.parse().ok().map(|pid| Report::Started { pid }),
            "exit" => rest.parse().ok().map(|code| Report::Exit { code }),
            "signal" => rest.parse().ok().map(|signal| Report::Signal { signal }),
            "error" => Some(Report::Error {
                reason: rest.to_owned(),
            }),
            _ => None,
        }
    }
}

/// Orders from the worker.
pub const TERM: &str = "term\n";
pub const KILL: &str = "kill\n";

/// The helper program (`megha-task-exec`). Its stdin must be a connected Unix
/// socket; exits 0 when it reported how the command ended, 1 otherwise.
pub fn main() -> i32 {
    let socket = match stdin_socket() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "megha-task-exec: {e} (this program is started by the megha worker, not by hand)"
            );
            return 2;
        }
    };
    let mut out = match socket.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("megha-task-exec: cannot clone the socket: {e}");
            return 2;
        }
    };
    let mut reader = BufReader::new(socket);
    let mut first = String::new();
    let spec: Spec = match reader.read_line(&mut first) {
        Ok(0) => return 1,
        Ok(_) => match serde_json::from_str(&first) {
            Ok(spec) => spec,
            Err(e) => {
                let _ = out.write_all(
                    Report::Error {
                        reason: format!("bad spec: {e}"),
                    }
                    .line()
                    .as_bytes(),
                );
                return 1;
            }
        },
        Err(e) => {
            eprintln!("megha-task-exec: cannot read the spec: {e}");
            return 1;
        }
    };
    let mut child = match prepare_and_spawn(&spec) {
        Ok(c) => c,
        Err(reason) => {
            // The reason also goes to the task's stderr log, for its owner.
            eprintln!("megha-task-exec: {reason}");
            let _ = out.write_all(Report::Error { reason }.line().as_bytes());
            // Nothing may be left of a half-made run.
            Run::of(&spec, None).kill_all(rustix::process::Signal::KILL);
            return 1;
        }
    };
    let run = Arc::new(Run::of(&spec, Some(child.id())));
    // The helper itself is never the memory limit's victim (set after the spawn:
    // the command inherited the default).
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    let _ = out.write_all(Report::Started { pid: child.id() }.line().as_bytes());
    let orders = {
        let run = run.clone();
        std::thread::Builder::new()
            .name("orders".into())
            .spawn(move || obey(reader, &run))
    };
    if orders.is_err() {
        // No thread for orders: the run cannot be stopped; do not run it.
        run.kill_all(rustix::process::Signal::KILL);
    }
    let status = child.wait();
    // Whatever the command left behind (a background child, a setsid daemon) goes
    // with it; only then is the end reported.
    run.kill_all(rustix::process::Signal::KILL);
    let report = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Report::Exit { code },
            (None, Some(signal)) => Report::Signal { signal },
            (None, None) => Report::Exit { code: -1 },
        },
        Err(e) => Report::Error {
            reason: format!("cannot wait for the command: {e}"),
        },
    };
    let _ = out.write_all(report.line().as_bytes());
    0
}

fn stdin_socket() -> Result<UnixStream, String> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("stdin: {e}"))?;
    let socket = UnixStream::from(fd);
    socket
        .peer_addr()
        .map_err(|e| format!("stdin is not a socket: {e}"))?;
    Ok(socket)
}

/// Reads orders until the socket closes, then kills the run and leaves.
fn obey(mut reader: BufReader<UnixStream>, run: &Run) {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == TERM => run.kill_all(rustix::process::Signal::TERM),
            Ok(_) if line == KILL => run.kill_all(rustix::process::Signal::KILL),
            Ok(_) => eprintln!("megha-task-exec: unknown order {:?}", line.trim()),
        }
    }
    // The worker is gone (or dropped the run): nothing of the run may outlive it.
    run.kill_all(rustix::process::Signal::KILL);
    std::process::exit(1);
}

fn prepare_and_spawn(spec: &Spec) -> Result<std::process::Child, String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    if !spec.cwd.is_dir() {
        return Err(format!(
            "working directory {} does not exist or is not a directory",
            spec.cwd.display()
        ));
    }
    for cg in &spec.cgroups {
        match std::fs::create_dir(&cg.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create cgroup {}: {e}", cg.dir.display())),
        }
        for (file, value) in &cg.settings {
            std::fs::write(cg.dir.join(file), value)
                .map_err(|e| format!("cannot set {file} = {value} in {}: {e}", cg.dir.display()))?;
        }
    }
    // Joined before the command exists: it starts inside.
    let me = std::process::id().to_string();
    for cg in &spec.cgroups {
        std::fs::write(cg.dir.join("cgroup.procs"), &me)
            .map_err(|e| format!("cannot join cgroup {}: {e}", cg.dir.display()))?;
    }
    let zero = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    setrlimit(Resource::Core, zero).map_err(|e| format!("cannot set RLIMIT_CORE: {e}"))?;
    if let Some(bytes) = spec.address_space {
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        setrlimit(Resource::As, limit).map_err(|e| format!("cannot set RLIMIT_AS: {e}"))?;
    }
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("cannot set no_new_privs: {e}"))?;
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .process_group(0);
    if let Some(gid) = spec.gid {
        cmd.gid(gid);
    }
    if let Some(uid) = spec.uid {
        // std drops the supplementary groups (setgroups(0)) before setuid.
        cmd.uid(uid);
    }
    cmd.spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", spec.program))
}

/// The processes of one run.
struct Run {
    /// `cgroup.procs` of the run's first cgroup (every process of the run is in
    /// each of its cgroups).
    procs: Option<PathBuf>,
    /// The command's process group.
    group: Option<u32>,
    /// The run's own uid (not the helper's).
    uid: Option<u32>,
    /// One killer at a time (the order thread and the main thread).
    lock: Mutex<()>,
}

impl Run {
    fn of(spec: &Spec, group: Option<u32>) -> Run {
        let own = rustix::process::getuid().as_raw();
        Run {
            procs: spec.cgroups.first().map(|c| c.dir.join("cgroup.procs")),
            group,
            uid: spec.uid.filter(|u| *u != own),
            lock: Mutex::new(()),
        }
    }

    /// Signals every process of the run; with SIGKILL, until none is left (a
    /// process forking meanwhile is caught by the next round; the pids limit bounds
    /// how many there can be).
    fn kill_all(&self, signal: rustix::process::Signal) {
        use rustix::process::{kill_process, kill_process_group, Pid, Signal};
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id();
        for round in 0..10_000u32 {
            let mut pids = Vec::new();
            if let Some(procs) = &self.procs {
                if let Ok(text) = std::fs::read_to_string(procs) {
                    pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
                }
            } else if let Some(uid) = self.uid {
                pids.extend(processes_of_uid(uid));
            }
            pids.retain(|p| *p != me);
            if let Some(group) = self.group.and_then(|g| Pid::from_raw(g as i32)) {
                let _ = kill_process_group(group, signal);
            }
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
                    let _ = kill_process(pid, signal);
                }
            }
            if signal != Signal::KILL {
                return;
            }
            if round > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Pids of the processes whose effective uid is `uid` (the owner of `/proc/<pid>`).
pub fn processes_of_uid(uid: u32) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    processes(|dir| dir.metadata().is_ok_and(|m| m.uid() == uid))
}

/// Pids of the live (not zombie) processes whose command line contains `needle`
/// (arguments joined by spaces): what checks and tests look for in `/proc`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    processes(|dir| {
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            return false;
        };
        let zombie = std::fs::read_to_string(dir.join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("Z")
        });
        !zombie
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(needle)
    })
}

/// Pids of the processes whose `/proc/<pid>` directory `keep` accepts.
fn processes(keep: impl Fn(&Path) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            keep(&e.path()).then_some(pid)
        })
        .collect()
}

/// Where the helper binary is by default: next to the running program (the worker,
/// or `loadgen` in embedded mode), else on `PATH`.
pub fn default_path() -> PathBuf {
    let name = "megha-task-exec";
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            // Test binaries live in target/<profile>/deps; the helper one level up.
            let dir = exe.parent()?;
            [dir.join(name), dir.parent()?.join(name)]
                .into_iter()
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

/// True when `path` names an executable file (a bare name: found on `PATH`).
pub fn usable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let found = if path.components().count() > 1 {
        Some(path.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(path))
                .find(|p| p.is_file())
        })
    };
    found
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for r in [
            Report::Started { pid: 42 },
            Report::Exit { code: -3 },
            Report::Signal { signal: 9 },
            Report::Error {
                reason: "cannot run `x`: no such file".into(),
            },
        ] {
            assert_eq!(Report::parse(&r.line()), Some(r));
        }
        assert_eq!(Report::parse("bogus 1\n"), None);
        assert_eq!(Report::parse("exit x\n"), None);
    }
}
