//! How the supervisor spawns a run's command inside its cgroups (see the
//! module above), and the `join-exec` mode.

use crate::exec::wire::{CgroupSpec, Spec};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The first argument of the `join-exec` mode.
pub const JOIN_EXEC: &str = "join-exec";

/// Most cgroup files and directories remembered (then forgotten at once).
const REMEMBERED_MAX: usize = 4096;

/// Most cgroup files kept open (then all closed at once).
const OPEN_MAX: usize = 256;

/// Spawns runs' commands; remembers which cgroups it made and what it last wrote
/// in their files, so that a kept cgroup reused by the next run costs only the
/// writes that change something (only the supervisor writes these files), and
/// keeps the files it writes open (a path lookup in cgroupfs costs more than the
/// write).
#[derive(Debug, Default)]
pub(super) struct Spawner {
    made: HashSet<PathBuf>,
    written: HashMap<PathBuf, String>,
    open: HashMap<PathBuf, std::fs::File>,
    /// Whether the spawning thread may move between its home cgroups and the runs'
    /// (v1; found at the first run): else every run starts through `join-exec`.
    thread_moves: Option<bool>,
}

impl Spawner {
    /// Prepares the run's cgroups and spawns its command inside them.
    pub(super) fn spawn(
        &mut self,
        spec: &Spec,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> Result<std::process::Child, String> {
        if !spec.cwd.is_dir() {
            return Err(format!(
                "working directory {} does not exist or is not a directory",
                spec.cwd.display()
            ));
        }
        let forked_inside = !spec.cgroup_v2 && !spec.cgroups.is_empty() && self.thread_moves(spec);
        for cg in &spec.cgroups {
            self.make(&cg.dir)?;
            self.write_settings(cg, &cg.settings)?;
            if !forked_inside {
                self.write_settings(cg, &cg.after_spawn)?;
            }
        }
        if !forked_inside {
            return spawn_through_join_exec(spec, stdout, stderr);
        }
        // The program is found on the task's PATH here, so that std can spawn it
        // with posix_spawn (vfork: no copy of this process's page tables) rather
        // than fork.
        let program =
            find_program(spec).map_err(|e| format!("cannot run `{}`: {e}", spec.program))?;
        let mut cmd = Command::new(&program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // This thread (only it) joins the run's cgroups and takes the run's user
        // (only it: Linux credentials are per thread); the command is spawned as
        // that user inside the cgroups, and the thread goes back.
        let joined = spec
            .cgroups
            .iter()
            .try_for_each(|cg| self.join_thread(&cg.dir).map_err(|e| (cg, e)));
        let spawned = match joined {
            Ok(()) => match as_user(spec) {
                Ok(()) => cmd
                    .spawn()
                    .map_err(|e| format!("cannot run `{}`: {e}", spec.program)),
                Err(e) => Err(format!("cannot switch to the task's user: {e}")),
            },
            Err((cg, e)) => Err(format!("cannot join cgroup {}: {e}", cg.dir.display())),
        };
        let back = back_to_root(spec).map_err(|e| format!("cannot switch back to root: {e}"));
        let back = back.and_then(|()| {
            spec.cgroups.iter().try_for_each(|cg| {
                let Some(home) = cg.dir.parent().and_then(Path::parent) else {
                    return Ok(());
                };
                self.join_thread(home)
                    .map_err(|e| format!("cannot move back to {}: {e}", home.display()))
            })
        });
        if let Err(e) = back {
            // Left as the run's user or inside a run's cgroup, this thread would
            // spawn the next run wrongly: the worker starts a new supervisor.
            eprintln!("megha-task-exec: {e}; exiting");
            if let Ok(mut child) = spawned {
                let _ = child.kill();
            }
            std::process::exit(3);
        }
        let mut child = spawned?;
        for cg in &spec.cgroups {
            if let Err(e) = self.write_settings(cg, &cg.after_spawn) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        Ok(child)
    }

    /// Whether this thread can move itself between its home cgroups and the runs'
    /// (a worker that is not root may own the runs' cgroups but not its own
    /// cgroup's `tasks`): tried once, as a move home from home.
    fn thread_moves(&mut self, spec: &Spec) -> bool {
        if let Some(known) = self.thread_moves {
            return known;
        }
        let tried = spec.cgroups.iter().try_for_each(|cg| {
            let home = cg.dir.parent().and_then(Path::parent).unwrap_or(&cg.dir);
            self.join_thread(home)
                .map_err(|e| format!("{}: {e}", home.display()))
        });
        if let Err(e) = &tried {
            eprintln!("megha-task-exec: this thread cannot move between cgroups ({e}); every run starts through join-exec (one exec more)");
        }
        self.thread_moves = Some(tried.is_ok());
        tried.is_ok()
    }

    fn make(&mut self, dir: &Path) -> Result<(), String> {
        if self.made.contains(dir) {
            return Ok(());
        }
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create cgroup {}: {e}", dir.display())),
        }
        if self.made.len() >= REMEMBERED_MAX {
            self.made.clear();
        }
        self.made.insert(dir.to_path_buf());
        Ok(())
    }

    fn write_settings(
        &mut self,
        cg: &CgroupSpec,
        settings: &[(String, String)],
    ) -> Result<(), String> {
        for (file, value) in settings {
            let path = cg.dir.join(file);
            if self.written.get(&path) == Some(value) {
                continue;
            }
            self.written.remove(&path);
            let mut written = self.write(&path, value);
            // A kept cgroup may still be charged with an earlier run's page cache,
            // above this run's limit: reclaim it (v1; no process is inside) and retry.
            if written.is_err() && file == "memory.limit_in_bytes" {
                let _ = std::fs::write(cg.dir.join("memory.force_empty"), "0");
                written = self.write(&path, value);
            }
            written
                .map_err(|e| format!("cannot set {file} = {value} in {}: {e}", cg.dir.display()))?;
            if self.written.len() >= REMEMBERED_MAX {
                self.written.clear();
            }
            self.written.insert(path, value.clone());
        }
        Ok(())
    }

    /// Moves the calling thread (only it) into the v1 cgroup `dir`.
    fn join_thread(&mut self, dir: &Path) -> std::io::Result<()> {
        self.write(&dir.join("tasks"), "0")
    }

    /// Writes `value` into the cgroup file `path` (one write at offset 0, as the
    /// kernel reads it), through a kept descriptor.
    fn write(&mut self, path: &Path, value: &str) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if !self.open.contains_key(path) {
            if self.open.len() >= OPEN_MAX {
                self.open.clear();
            }
            let file = std::fs::OpenOptions::new().write(true).open(path)?;
            self.open.insert(path.to_path_buf(), file);
        }
        let written = match self.open.get(path) {
            Some(file) => file.write_at(value.as_bytes(), 0),
            None => Ok(0),
        };
        match written {
            Ok(n) if n == value.len() => Ok(()),
            Ok(n) => Err(std::io::Error::other(format!(
                "wrote {n} of {} bytes",
                value.len()
            ))),
            Err(e) => {
                // A file of a removed cgroup, or a refused value: open afresh next time.
                self.open.remove(path);
                Err(e)
            }
        }
    }
}

/// The spawning thread takes the run's user: no supplementary groups, its gid,
/// then its uid as real and effective ids, keeping root only as the saved uid so
/// that the thread can come back ([`back_to_root`]). The command gets none of it:
/// its exec makes the saved uid the effective one and leaves a non-root process
/// no capabilities. Nothing to do when the run has no user of its own.
fn as_user(spec: &Spec) -> std::io::Result<()> {
    use rustix::process::{Gid, Uid};
    use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
    let Some(uid) = spec.uid else {
        return Ok(());
    };
    let gid = Gid::from_raw(spec.gid.unwrap_or(uid));
    set_thread_groups(&[])?;
    set_thread_res_gid(gid, gid, gid)?;
    set_thread_res_uid(Uid::from_raw(uid), Uid::from_raw(uid), Uid::ROOT)?;
    Ok(())
}

/// Undoes [`as_user`]: root's ids and groups again.
fn back_to_root(spec: &Spec) -> std::io::Result<()> {
    use rustix::process::{Gid, Uid};
    use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
    if spec.uid.is_none() {
        return Ok(());
    }
    set_thread_res_uid(Uid::ROOT, Uid::ROOT, Uid::ROOT)?;
    set_thread_res_gid(Gid::ROOT, Gid::ROOT, Gid::ROOT)?;
    set_thread_groups(
        ROOT_GROUPS.get_or_init(|| rustix::process::getgroups().unwrap_or_default()),
    )?;
    Ok(())
}

/// The supervisor's supplementary groups when it started (restored after a spawn).
static ROOT_GROUPS: std::sync::OnceLock<Vec<rustix::process::Gid>> = std::sync::OnceLock::new();

/// Remembers the supervisor's own groups (before any spawn).
pub(super) fn remember_groups() {
    ROOT_GROUPS.get_or_init(|| rustix::process::getgroups().unwrap_or_default());
}

/// The program's path: as given when it names a directory, else the first
/// executable file of that name on the task's `PATH` (as execvp would find it).
fn find_program(spec: &Spec) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if spec.program.contains('/') {
        return Ok(PathBuf::from(&spec.program));
    }
    let path = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", |(_, v)| v.as_str());
    path.split(':')
        .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(&spec.program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        // ENOENT, as execvp says it.
        .ok_or_else(|| std::io::Error::from_raw_os_error(2))
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
        procs: spec
            .cgroups
            .iter()
            .map(|c| c.dir.join("cgroup.procs"))
            .collect(),
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
pub(super) fn join_exec(args: &[String]) -> i32 {
    use std::os::fd::AsFd as _;
    let why = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from);
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
