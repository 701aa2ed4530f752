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
//!    kills every process of every run and exits;
//! 6. when the worker's lease ([`Order::Lease`]) runs out without a newer one (the
//!    worker froze: it can neither fence itself nor close the socket), it kills
//!    every process of every run and starts none until a lease in the future comes
//!    (see `WorkerLease`).
//!
//! "Every process of the run" is every process in the run's cgroup (whatever its
//! session or process group); without cgroups, the command's process group and,
//! when the run has a uid of its own, every process of that uid. A run reported
//! ended has nothing running.
//!
//! The supervisor never removes a run's cgroups: the worker does after the run
//! ended (or keeps them for a later run, [`super::limits`]), or the next life of
//! the worker does (see [`super::limits::Limits::reap_previous_lives`]).

mod run;
mod spawn;
mod waiters;

pub use run::{processes_of_uid, processes_with};
pub use spawn::JOIN_EXEC;

use super::wire::{self, Order, Report, Spec};
use run::{report, Run, Runs};
use spawn::Spawner;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use waiters::{Waited, Waiters};

/// The supervisor program (`megha-task-exec`). Its stdin must be the worker's
/// `SOCK_SEQPACKET` socket. Exits 0 when the worker closed it.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(JOIN_EXEC) {
        return spawn::join_exec(&args[1..]);
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
    spawn::remember_groups();
    if let Err(e) = contain_self() {
        eprintln!("megha-task-exec: {e}");
        return 2;
    }
    let runs = Arc::new(Runs::default());
    let waiters = Arc::new(Waiters::new(&control, runs.clone()));
    let mut spawner = Spawner::default();
    let mut buffer = vec![0u8; wire::MAX_MESSAGE];
    let mut lease = WorkerLease::default();
    loop {
        match lease.wait(&control) {
            Ok(true) => {}
            Ok(false) => {
                eprintln!("megha-task-exec: the worker's lease ran out without a newer one (the worker is frozen, or cut off from its LM): killing every run before its LM declares the worker lost");
                runs.kill_every_run();
                continue;
            }
            Err(e) => {
                eprintln!("megha-task-exec: cannot wait for the worker: {e}; stopping every run");
                break;
            }
        }
        match wire::recv::<Order>(&control, &mut buffer) {
            Ok(Some((Order::Start { run, spec }, fds))) => {
                if lease.expired {
                    let reason = "the worker's lease ran out (its LM may have declared it lost): no run starts until the LM confirms the worker again".to_owned();
                    report(&control, run, Report::Error { reason });
                } else {
                    start(&control, &runs, &waiters, &mut spawner, run, spec, fds)
                }
            }
            Ok(Some((Order::Term { run }, _))) => runs.signal(run, rustix::process::Signal::TERM),
            Ok(Some((Order::Kill { run }, _))) => runs.signal(run, rustix::process::Signal::KILL),
            Ok(Some((Order::Lease { kill_at_ns }, _))) => lease.renew(kill_at_ns),
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

/// The worker's lease as the supervisor enforces it ([`Order::Lease`]): a worker
/// that froze (SIGSTOP, a cgroup freezer, a host thrashing) can neither fence
/// itself nor close its socket, while its LM declares it lost and its GMs run its
/// tasks elsewhere. So the supervisor kills every run itself when the lease runs
/// out, at the moment the worker's own fence would have killed them (4/5 of the
/// lease after the last confirmation, before the LM's timeout), and starts none
/// until a lease in the future comes.
#[derive(Debug, Default)]
struct WorkerLease {
    kill_at_ns: Option<u64>,
    /// The lease ran out and every run was killed; no run starts.
    expired: bool,
}

impl WorkerLease {
    fn renew(&mut self, kill_at_ns: Option<u64>) {
        self.kill_at_ns = kill_at_ns;
        self.expired = kill_at_ns.is_some_and(|at| at <= wire::monotonic_ns());
    }

    /// Waits until an order can be read (`true`) or the lease runs out (`false`,
    /// once: the lease is then expired).
    fn wait(&mut self, control: &OwnedFd) -> Result<bool, String> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let live = self.kill_at_ns.filter(|_| !self.expired);
        let timeout = match live {
            None => None,
            Some(at) => {
                let left = at.saturating_sub(wire::monotonic_ns());
                if left == 0 {
                    self.expired = true;
                    return Ok(false);
                }
                Some(Timespec {
                    tv_sec: (left / 1_000_000_000) as i64,
                    tv_nsec: (left % 1_000_000_000) as i64,
                })
            }
        };
        let mut fds = [PollFd::new(control, PollFlags::IN)];
        loop {
            match poll(&mut fds, timeout.as_ref()) {
                // Timed out: the next call finds the lease run out.
                Ok(0) => return self.wait(control),
                Ok(_) => return Ok(true),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

fn control_socket() -> Result<OwnedFd, String> {
    use rustix::net::{sockopt, SocketType};
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("stdin: {e}"))?;
    match sockopt::socket_type(&fd) {
        Ok(SocketType::SEQPACKET) => Ok(fd),
        Ok(other) => Err(format!(
            "stdin is a socket of type {other:?}, not SEQPACKET"
        )),
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

/// Starts `run`; a waiter follows it to its end.
fn start(
    control: &OwnedFd,
    runs: &Runs,
    waiters: &Arc<Waiters>,
    spawner: &mut Spawner,
    run: u64,
    spec: Spec,
    fds: Vec<OwnedFd>,
) {
    let Ok([stdout, stderr]) = <[OwnedFd; 2]>::try_from(fds) else {
        let reason = "a start order without exactly two descriptors (stdout, stderr)";
        return report(
            control,
            run,
            Report::Error {
                reason: reason.into(),
            },
        );
    };
    let child = match spawner.spawn(&spec, stdout, stderr) {
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
    if let Err((e, mut lost)) = waiters.follow(Waited { run, child, r }) {
        // Nobody to wait for it: the run cannot be followed; do not run it.
        lost.r.kill_all(rustix::process::Signal::KILL);
        let _ = lost.child.wait();
        runs.lock().remove(&run);
        let reason = format!("cannot start a thread to follow the run: {e}");
        report(control, run, Report::Error { reason });
    }
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
