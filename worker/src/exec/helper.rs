//! `megha-task-exec`: the task supervisor, one process per worker (as slurmstepd
//! is per job step and runc's shim per container). The worker starts it with an
//! empty environment and a `SOCK_SEQPACKET` socket as its stdin ([`super::wire`]),
//! and it
//!
//! 1. takes [`Order::Start`] with the run's [`Spec`] and its two log files;
//! 2. creates the run's cgroups and writes their limits, and spawns the command as
//!    the task's user (uid, gid, no supplementary groups), in its own process
//!    group, with exactly the spec's environment, stdin from `/dev/null` and the
//!    run's log files as stdout and stderr, `RLIMIT_CORE` 0 and `no_new_privs`
//!    (both set on the supervisor at start and inherited), so that the command is
//!    inside its cgroups from its first instruction:
//!    - cgroup v1: the spawning thread moves itself (only itself: `0` into each
//!      hierarchy's `tasks`, which needs no global lock, unlike a process's
//!      `cgroup.procs`) into the run's cgroups, forks the command there, and moves
//!      back home; the CPU quota is written right after the spawn, so the thread
//!      is never throttled by it;
//!    - cgroup v2, or no cgroups: the command is spawned through this program's
//!      `join-exec` mode, which writes its own pid into the run's `cgroup.procs`
//!      (v2) or sets `RLIMIT_AS` (no cgroups), then execs the command;
//! 3. reports `started` with the pid and, when the command ends, kills whatever is
//!    left of the run (a background child, a setsid daemon) and only then reports
//!    `exit` or `signal` (or `error` with the reason when it could not start);
//! 4. obeys `term` (SIGTERM to every process of the run) and `kill` (SIGKILL);
//! 5. when the worker's end of the socket closes (the worker died, or stopped), it
//!    kills every process of every run and exits.
//!
//! "Every process of the run" is every process in the run's cgroup (whatever its
//! session or process group); without cgroups, the command's process group and,
//! when the run has a uid of its own, every process of that uid. A run reported
//! ended has nothing running.
//!
//! The supervisor never removes a run's cgroups: the worker does after the run
//! ended (or keeps them for a later run, [`super::limits`]), or the next life of
//! the worker does (see [`super::limits::Limits::reap_previous_lives`]).

use super::wire::{self, CgroupSpec, Event, Order, Report, Spec};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The first argument of the `join-exec` mode.
pub const JOIN_EXEC: &str = "join-exec";

/// The supervisor program (`megha-task-exec`). Its stdin must be the worker's
/// `SOCK_SEQPACKET` socket. Exits 0 when the worker closed it.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(JOIN_EXEC) {
        return join_exec(&args[1..]);
    }
    let control = match control_socket() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "megha-task-exec: {e} (this program is started by the megha worker, not by hand)"
            );
            return 2;
        }
    };
    if let Err(e) = contain_self() {
        eprintln!("megha-task-exec: {e}");
        return 2;
    }
    let runs = Arc::new(Runs::default());
    let mut buffer = vec![0u8; wire::MAX_MESSAGE];
    loop {
        match wire::recv::<Order>(&control, &mut buffer) {
            Ok(Some((Order::Start { run, spec }, fds))) => start(&control, &runs, run, spec, fds),
            Ok(Some((Order::Term { run }, _))) => runs.signal(run, rustix::process::Signal::TERM),
            Ok(Some((Order::Kill { run }, _))) => runs.signal(run, rustix::process::Signal::KILL),
            Ok(None) => break,
            Err(e) => {
                eprintln!("megha-task-exec: {e}; stopping every run");
                break;
            }
        }
    }
    // The worker is gone (or stopped): nothing of any run may outlive it.
    runs.kill_every_run();
    0
}

fn control_socket() -> Result<OwnedFd, String> {
    use rustix::net::{sockopt, SocketType};
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("stdin: {e}"))?;
    match sockopt::socket_type(&fd) {
        Ok(SocketType::SEQPACKET) => Ok(fd),
        Ok(other) => Err(format!("stdin is a socket of type {other:?}, not SEQPACKET")),
        Err(e) => Err(format!("stdin is not a socket: {e}")),
    }
}

/// `RLIMIT_CORE` 0 and `no_new_privs`, for the supervisor and so for every
/// command it spawns.
fn contain_self() -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let zero = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    setrlimit(Resource::Core, zero).map_err(|e| format!("cannot set RLIMIT_CORE: {e}"))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("cannot set no_new_privs: {e}"))
}

/// The running runs, by number.
#[derive(Default)]
struct Runs(Mutex<HashMap<u64, Arc<Run>>>);

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Run>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal(&self, run: u64, signal: rustix::process::Signal) {
        let found = self.lock().get(&run).cloned();
        if let Some(r) = found {
            r.kill_all(signal);
        }
    }

    fn kill_every_run(&self) {
        let all: Vec<Arc<Run>> = self.lock().values().cloned().collect();
        for r in all {
            r.kill_all(rustix::process::Signal::KILL);
        }
    }
}

fn report(control: &OwnedFd, run: u64, report: Report) {
    // A failed send means the worker is gone: the main loop sees it and kills all.
    let _ = wire::send(control, &Event { run, report }, &[]);
}

/// Starts `run` and a thread that waits for it.
fn start(control: &OwnedFd, runs: &Arc<Runs>, run: u64, spec: Spec, fds: Vec<OwnedFd>) {
    let Ok([stdout, stderr]) = <[OwnedFd; 2]>::try_from(fds) else {
        let reason = "a start order without exactly two descriptors (stdout, stderr)";
        return report(control, run, Report::Error { reason: reason.into() });
    };
    let mut child = match spawn(&spec, stdout, stderr) {
        Ok(c) => c,
        Err(reason) => {
            // Nothing may be left of a half-made run.
            Run::of(&spec, None).kill_all(rustix::process::Signal::KILL);
            return report(control, run, Report::Error { reason });
        }
    };
    let pid = child.id();
    let r = Arc::new(Run::of(&spec, Some(pid)));
    runs.lock().insert(run, r.clone());
    report(control, run, Report::Started { pid });
    let waiter = {
        let (control, runs, r) = (control.try_clone(), runs.clone(), r.clone());
        std::thread::Builder::new()
            .name(format!("run-{run}"))
            .spawn(move || {
                let status = child.wait();
                // Whatever the command left behind goes with it; only then is the
                // end reported.
                r.kill_all(rustix::process::Signal::KILL);
                runs.lock().remove(&run);
                let end = match status {
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(code), _) => Report::Exit { code },
                        (None, Some(signal)) => Report::Signal { signal },
                        (None, None) => Report::Exit { code: -1 },
                    },
                    Err(e) => Report::Error {
                        reason: format!("cannot wait for the command: {e}"),
                    },
                };
                if let Ok(control) = control {
                    report(&control, run, end);
                }
            })
    };
    if let Err(e) = waiter {
        // No thread to wait for it: the run cannot be followed; do not run it.
        r.kill_all(rustix::process::Signal::KILL);
        runs.lock().remove(&run);
        let reason = format!("cannot start a thread to follow the run: {e}");
        report(control, run, Report::Error { reason });
    }
}

/// Prepares the run's cgroups and spawns its command inside them.
fn spawn(spec: &Spec, stdout: OwnedFd, stderr: OwnedFd) -> Result<std::process::Child, String> {
    if !spec.cwd.is_dir() {
        return Err(format!(
            "working directory {} does not exist or is not a directory",
            spec.cwd.display()
        ));
    }
    let forked_inside = !spec.cgroup_v2 && !spec.cgroups.is_empty();
    for cg in &spec.cgroups {
        match std::fs::create_dir(&cg.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create cgroup {}: {e}", cg.dir.display())),
        }
        write_settings(cg, &cg.settings)?;
        if !forked_inside {
            write_settings(cg, &cg.after_spawn)?;
        }
    }
    if !forked_inside {
        return spawn_through_join_exec(spec, stdout, stderr);
    }
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if let Some(gid) = spec.gid {
        cmd.gid(gid);
    }
    if let Some(uid) = spec.uid {
        // std drops the supplementary groups (setgroups(0)) before setuid.
        cmd.uid(uid);
    }
    // This thread (only it) joins the run's cgroups; the command is forked inside.
    let joined = spec
        .cgroups
        .iter()
        .try_for_each(|cg| join_thread(&cg.dir).map_err(|e| (cg, e)));
    let spawned = match joined {
        Ok(()) => cmd
            .spawn()
            .map_err(|e| format!("cannot run `{}`: {e}", spec.program)),
        Err((cg, e)) => Err(format!("cannot join cgroup {}: {e}", cg.dir.display())),
    };
    for cg in &spec.cgroups {
        let Some(home) = cg.dir.parent().and_then(Path::parent) else {
            continue;
        };
        if let Err(e) = join_thread(home) {
            // Left inside a run's cgroup, this thread would share its limits and
            // keep it from being removed: the worker starts a new supervisor.
            eprintln!(
                "megha-task-exec: cannot move back to {}: {e}; exiting",
                home.display()
            );
            if let Ok(mut child) = spawned {
                let _ = child.kill();
            }
            std::process::exit(3);
        }
    }
    let mut child = spawned?;
    for cg in &spec.cgroups {
        if let Err(e) = write_settings(cg, &cg.after_spawn) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    }
    Ok(child)
}

fn write_settings(cg: &CgroupSpec, settings: &[(String, String)]) -> Result<(), String> {
    for (file, value) in settings {
        std::fs::write(cg.dir.join(file), value)
            .map_err(|e| format!("cannot set {file} = {value} in {}: {e}", cg.dir.display()))?;
    }
    Ok(())
}

/// Moves the calling thread (only it) into the v1 cgroup `dir`.
fn join_thread(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join("tasks"), "0")
}

/// What the `join-exec` mode does before it execs the command.
#[derive(Debug, Serialize, Deserialize)]
struct JoinExec {
    /// `cgroup.procs` files to write its pid into (cgroup v2: one).
    procs: Vec<PathBuf>,
    address_space: Option<u64>,
    uid: Option<u32>,
    gid: Option<u32>,
    cwd: PathBuf,
    program: String,
    args: Vec<String>,
}

/// Spawns the command through `megha-task-exec join-exec`, which joins the run's
/// cgroup (v2) or sets `RLIMIT_AS` before it execs the command; its stdin is a pipe
/// on which it writes why, if it cannot.
fn spawn_through_join_exec(
    spec: &Spec,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> Result<std::process::Child, String> {
    let plan = JoinExec {
        procs: spec.cgroups.iter().map(|c| c.dir.join("cgroup.procs")).collect(),
        address_space: spec.address_space,
        uid: spec.uid,
        gid: spec.gid,
        cwd: spec.cwd.clone(),
        program: spec.program.clone(),
        args: spec.args.clone(),
    };
    let plan = serde_json::to_string(&plan).map_err(|e| format!("cannot encode the run: {e}"))?;
    let (mut why, their_end) =
        std::io::pipe().map_err(|e| format!("cannot make a pipe for the run: {e}"))?;
    let mut child = Command::new("/proc/self/exe")
        .arg(JOIN_EXEC)
        .arg(plan)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(their_end)
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run megha-task-exec join-exec: {e}"))?;
    // The pipe closes when the command was exec'd (or join-exec gave up).
    let mut reason = String::new();
    let _ = why.read_to_string(&mut reason);
    if reason.is_empty() {
        return Ok(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(reason)
}

/// The `join-exec` mode: joins, limits, then execs as the run's user; on failure,
/// says why on its stdin (a pipe to the supervisor) and exits 127.
fn join_exec(args: &[String]) -> i32 {
    use std::os::fd::AsFd as _;
    let why = std::io::stdin().as_fd().try_clone_to_owned().map(std::fs::File::from);
    let fail = |reason: String| {
        if let Ok(mut w) = why.as_ref() {
            let _ = w.write_all(reason.as_bytes());
        }
        eprintln!("megha-task-exec: {reason}");
        127
    };
    let Some(plan) = args.first() else {
        return fail("join-exec: no plan".into());
    };
    let plan: JoinExec = match serde_json::from_str(plan) {
        Ok(p) => p,
        Err(e) => return fail(format!("join-exec: bad plan: {e}")),
    };
    let me = std::process::id().to_string();
    for procs in &plan.procs {
        if let Err(e) = std::fs::write(procs, &me) {
            return fail(format!("cannot join cgroup {}: {e}", procs.display()));
        }
    }
    if let Some(bytes) = plan.address_space {
        use rustix::process::{setrlimit, Resource, Rlimit};
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        if let Err(e) = setrlimit(Resource::As, limit) {
            return fail(format!("cannot set RLIMIT_AS: {e}"));
        }
    }
    let mut cmd = Command::new(&plan.program);
    cmd.args(&plan.args)
        .current_dir(&plan.cwd)
        .stdin(Stdio::null());
    if let Some(gid) = plan.gid {
        cmd.gid(gid);
    }
    if let Some(uid) = plan.uid {
        cmd.uid(uid);
    }
    let e = cmd.exec();
    fail(format!("cannot run `{}`: {e}", plan.program))
}

/// The processes of one run.
struct Run {
    /// `cgroup.procs` of the run's first cgroup (every process of the run is in
    /// each of its cgroups).
    procs: Option<PathBuf>,
    /// The command's process group.
    group: Option<u32>,
    /// The run's own uid (not the supervisor's).
    uid: Option<u32>,
    /// One killer at a time (the main thread and the run's waiter).
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
