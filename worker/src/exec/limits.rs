//! Limits of exec tasks: a cgroup per run, in the memory, cpu and pids controllers
//! only, and cpuacct where it is a v1 hierarchy of its own (it limits nothing: it
//! counts a run's CPU time, see [`super::usage`]) (cgroup v1: one directory per
//! hierarchy, nested in the worker's own cgroup of
//! each; v2: nested in the worker's own cgroup of the unified hierarchy), written
//! directly in cgroupfs. Without a usable memory controller: `RLIMIT_AS` and no CPU
//! or pids limit (said at start, on `/healthz` and in `/metrics`).
//!
//! The worker only chooses the directories and the values; the task supervisor
//! (`megha-task-exec`, [`super::helper`]) creates them, writes the limits and
//! spawns the command inside them, so the command is limited from its first
//! instruction. A run's cgroup (`run-<k>`, k: the run that made it) is kept for a
//! later run when its run ended cleanly (the supervisor reported the end: nothing
//! of it is left), no OOM kill happened in it and it holds almost no charged
//! memory; otherwise, and beyond [`POOL_MAX`] kept, the worker removes it (killing
//! whatever is left in it). Making and removing a memory cgroup costs the kernel
//! more than the start of a small command. At start the worker removes the
//! cgroups of its previous lives (killing whatever is still in them).

use super::wire::CgroupSpec;
use std::path::{Path, PathBuf};

/// CFS period of task cgroups (µs); the quota is the task's share of it.
const CPU_PERIOD_US: u64 = 100_000;

/// The controllers task cgroups use (no other hierarchy gets a directory).
const CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];

/// Prefix of a worker life's cgroup: `megha-worker-<pid>.<n>` (n: the how-many-th
/// executors of the process, as embedded runs hold several workers).
const LIFE_PREFIX: &str = "megha-worker-";

static LIVES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Most run cgroups kept for later runs.
pub const POOL_MAX: usize = 64;

/// A kept cgroup's memory charge above this (page cache a run wrote, tmpfs files
/// it left) is not handed to another run (its limit could not be set below it).
const POOL_MEMORY_MAX: u64 = 4 << 20;

/// Names of run cgroups kept for later runs (each exists in every hierarchy used).
type Pool = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// How limits are enforced on this host.
#[derive(Debug)]
pub enum Limits {
    Cgroup {
        v2: bool,
        /// This life's cgroup of each controller used: (controller, directory).
        /// v2: the same directory for every controller enabled there.
        lives: Vec<(&'static str, PathBuf)>,
        /// Run cgroups kept for later runs.
        pool: Pool,
    },
    Rlimit {
        /// Why cgroups are not used.
        why: String,
    },
}

/// Per run: what the helper gets, and what the worker checks and removes after.
#[derive(Debug, Default)]
pub struct RunLimits {
    pub cgroups: Vec<CgroupSpec>,
    /// cgroup v2 (one directory, joined by the command itself).
    pub v2: bool,
    pub address_space: Option<u64>,
    /// `memory.oom_control` (v1) or `memory.events` (v2) of the run.
    oom_file: Option<PathBuf>,
    /// The run cgroup's name, and where it goes back when it may be reused.
    name: String,
    pool: Option<Pool>,
    /// Where what the run used is read.
    usage: super::usage::UsageProbe,
}

impl Limits {
    /// Cgroups when the worker can create them, else rlimits. `cgroups: false`
    /// forces rlimits.
    pub fn detect(cgroups: bool) -> Limits {
        if !cgroups {
            return Limits::Rlimit {
                why: "cgroups turned off (--cgroups false)".into(),
            };
        }
        let found = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))
            .and_then(|own| {
                let mounts = std::fs::read_to_string("/proc/self/mountinfo")
                    .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
                Self::try_cgroups(&own, &mounts)
            });
        match found {
            Ok(limits) => limits,
            Err(why) => Limits::Rlimit { why },
        }
    }

    fn try_cgroups(own: &str, mounts: &str) -> Result<Limits, String> {
        let n = LIVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let life = format!("{LIFE_PREFIX}{}.{n}", std::process::id());
        let mut v1: Vec<(&'static str, PathBuf)> = CONTROLLERS
            .iter()
            .filter_map(|c| Some((*c, v1_own_dir(own, mounts, c)?)))
            .collect();
        // CPU time is counted by cpuacct: in the cpu directory when the two share
        // a hierarchy, else in a hierarchy of its own that runs join too.
        if let Some(acct) = v1_own_dir(own, mounts, "cpuacct") {
            if !v1.iter().any(|(_, dir)| *dir == acct) {
                v1.push(("cpuacct", acct));
            }
        }
        if v1.iter().any(|(c, _)| *c == "memory") {
            let mut lives = Vec::new();
            for (controller, dir) in v1 {
                let life_dir = dir.join(&life);
                make_dir(&life_dir)?;
                lives.push((controller, life_dir));
            }
            return Ok(Limits::Cgroup {
                v2: false,
                lives,
                pool: Pool::default(),
            });
        }
        let Some(own_dir) = v2_own_dir(own, mounts) else {
            return Err("no cgroup v1 memory hierarchy and no cgroup v2 mount".into());
        };
        let available = std::fs::read_to_string(own_dir.join("cgroup.controllers"))
            .map_err(|e| format!("cannot read {}/cgroup.controllers: {e}", own_dir.display()))?;
        let missing: Vec<&str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| !available.split_whitespace().any(|a| a == *c))
            .collect();
        if missing.contains(&"memory") {
            return Err(format!(
                "the memory controller is not delegated to {} (cgroup v2)",
                own_dir.display()
            ));
        }
        let enabled: Vec<&'static str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| !missing.contains(c))
            .collect();
        let wanted: String = enabled.iter().map(|c| format!("+{c} ")).collect();
        // v2 lets a cgroup hand controllers to children only when it holds no
        // process itself: the worker moves into a leaf of its own first.
        let enable = |dir: &Path| std::fs::write(dir.join("cgroup.subtree_control"), wanted.trim());
        if enable(&own_dir).is_err() {
            let leaf = own_dir.join("megha-worker-self");
            make_dir(&leaf)?;
            let procs = std::fs::read_to_string(own_dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines() {
                let _ = std::fs::write(leaf.join("cgroup.procs"), pid);
            }
            enable(&own_dir).map_err(|e| {
                format!(
                    "cannot enable {} in {}/cgroup.subtree_control: {e}",
                    wanted.trim(),
                    own_dir.display()
                )
            })?;
        }
        let life_dir = own_dir.join(&life);
        make_dir(&life_dir)?;
        enable(&life_dir).map_err(|e| {
            format!(
                "cannot enable {} in {}/cgroup.subtree_control: {e}",
                wanted.trim(),
                life_dir.display()
            )
        })?;
        Ok(Limits::Cgroup {
            v2: true,
            lives: enabled.into_iter().map(|c| (c, life_dir.clone())).collect(),
            pool: Pool::default(),
        })
    }

    /// One line for the startup log and `/healthz`.
    pub fn describe(&self) -> String {
        match self {
            Limits::Cgroup { v2, lives, .. } => {
                let controllers: Vec<&str> = (lives.iter().map(|(c, _)| *c))
                    .filter(|c| *c != "cpuacct")
                    .collect();
                let acct = if lives.iter().any(|(c, _)| *c == "cpuacct") {
                    " (CPU time counted in cpuacct)"
                } else {
                    ""
                };
                let mut dirs: Vec<String> =
                    lives.iter().map(|(_, d)| d.display().to_string()).collect();
                dirs.dedup();
                format!(
                    "cgroup {}: {} limits{acct}, every run in its cgroup from its first instruction (under {})",
                    if *v2 { "v2" } else { "v1" },
                    controllers.join(", "),
                    dirs.join(", ")
                )
            }
            Limits::Rlimit { why } => {
                format!("rlimits: memory as RLIMIT_AS, CPU and process count not limited ({why})")
            }
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Limits::Cgroup { v2: true, .. } => "cgroup_v2",
            Limits::Cgroup { v2: false, .. } => "cgroup_v1",
            Limits::Rlimit { .. } => "rlimit",
        }
    }

    /// The limits of run number `run`: `memory_mb`, `cpu_millis` (thousandths of a
    /// core) and at most `pids_max` processes.
    pub fn for_run(&self, run: u64, memory_mb: u64, cpu_millis: u64, pids_max: u64) -> RunLimits {
        let memory = memory_mb.saturating_mul(1 << 20);
        let quota = cpu_millis.max(1) * CPU_PERIOD_US / 1000;
        let (name, pool, fresh) = match self {
            Limits::Cgroup { pool, .. } => {
                let kept = pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let fresh = kept.is_none();
                (
                    kept.unwrap_or_else(|| format!("run-{run}")),
                    Some(pool.clone()),
                    fresh,
                )
            }
            Limits::Rlimit { .. } => (String::new(), None, false),
        };
        match self {
            Limits::Cgroup {
                v2: false, lives, ..
            } => {
                let mut oom_file = None;
                let (mut cpu_dir, mut acct_dir, mut memory_dir) = (None, None, None);
                let cgroups = lives
                    .iter()
                    .map(|(controller, life)| {
                        let dir = life.join(&name);
                        let settings = match *controller {
                            "memory" => {
                                oom_file = Some(dir.join("memory.oom_control"));
                                memory_dir = Some(dir.clone());
                                vec![
                                    ("memory.limit_in_bytes".into(), memory.to_string()),
                                    // The peak of this run only (a kept cgroup's
                                    // counts on from the runs before).
                                    ("memory.max_usage_in_bytes".into(), "0".into()),
                                ]
                            }
                            // The quota only once the command is spawned: the
                            // supervisor's thread is inside for the spawn.
                            "cpu" => {
                                cpu_dir = Some(dir.clone());
                                let settings = vec![
                                    ("cpu.cfs_quota_us".into(), "-1".into()),
                                    ("cpu.cfs_period_us".into(), CPU_PERIOD_US.to_string()),
                                ];
                                let after_spawn =
                                    vec![("cpu.cfs_quota_us".into(), quota.to_string())];
                                return CgroupSpec {
                                    dir,
                                    settings,
                                    after_spawn,
                                };
                            }
                            "cpuacct" => {
                                acct_dir = Some(dir.clone());
                                Vec::new()
                            }
                            _ => vec![("pids.max".into(), pids_max.to_string())],
                        };
                        CgroupSpec {
                            dir,
                            settings,
                            after_spawn: Vec::new(),
                        }
                    })
                    .collect();
                RunLimits {
                    cgroups,
                    v2: false,
                    address_space: None,
                    oom_file,
                    name,
                    pool,
                    usage: super::usage::UsageProbe::v1(
                        acct_dir.or(cpu_dir).as_deref(),
                        memory_dir.as_deref(),
                    ),
                }
            }
            Limits::Cgroup {
                v2: true, lives, ..
            } => {
                let dir = lives[0].1.join(&name);
                let settings = lives
                    .iter()
                    .map(|(controller, _)| match *controller {
                        "memory" => ("memory.max".into(), memory.to_string()),
                        "cpu" => ("cpu.max".into(), format!("{quota} {CPU_PERIOD_US}")),
                        _ => ("pids.max".into(), pids_max.to_string()),
                    })
                    .collect();
                RunLimits {
                    usage: super::usage::UsageProbe::v2(&dir, fresh),
                    oom_file: Some(dir.join("memory.events")),
                    cgroups: vec![CgroupSpec {
                        dir,
                        settings,
                        after_spawn: Vec::new(),
                    }],
                    v2: true,
                    address_space: None,
                    name,
                    pool,
                }
            }
            Limits::Rlimit { .. } => RunLimits {
                cgroups: Vec::new(),
                v2: false,
                address_space: Some(memory),
                oom_file: None,
                name,
                pool,
                usage: super::usage::UsageProbe::default(),
            },
        }
    }

    /// Kills whatever is left in the cgroups of earlier lives of workers on this
    /// host that are gone (a worker killed with its helpers), and removes them.
    /// Returns the processes killed.
    pub fn reap_previous_lives(&self) -> usize {
        let Limits::Cgroup { lives, .. } = self else {
            return 0;
        };
        let mut killed = 0;
        // v2 lists one directory for every controller: each parent once.
        let mut parents: Vec<&Path> = lives.iter().filter_map(|(_, l)| l.parent()).collect();
        parents.dedup();
        for parent in parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let name = entry.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix(LIFE_PREFIX))
                    .and_then(|p| p.split('.').next()?.parse::<u32>().ok())
                else {
                    continue;
                };
                if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                let dir = entry.path();
                for run in std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                {
                    if run.path().is_dir() {
                        killed += kill_cgroup(&run.path());
                        remove_cgroup(&run.path());
                    }
                }
                remove_cgroup(&dir);
            }
        }
        killed
    }

    /// Removes this life's cgroups, kept run cgroups first (at shutdown; its runs
    /// must be gone).
    pub fn remove(&self) {
        if let Limits::Cgroup { lives, pool, .. } = self {
            let kept = std::mem::take(&mut *pool.lock().unwrap_or_else(|e| e.into_inner()));
            for (_, life) in lives {
                for name in &kept {
                    remove_cgroup(&life.join(name));
                }
                remove_cgroup(life);
            }
        }
    }
}

impl RunLimits {
    /// What the run used (read after it ended, before [`RunLimits::release`]).
    pub fn used(&self) -> Option<common::messages::RunUsage> {
        self.usage.read()
    }

    /// True when the memory limit's OOM killer killed a process of the run.
    pub fn oom_killed(&self) -> bool {
        // v1 memory.oom_control and v2 memory.events both carry "oom_kill N".
        self.oom_file.as_ref().is_some_and(|f| {
            std::fs::read_to_string(f).is_ok_and(|text| {
                text.lines().any(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse::<u64>().ok())
                        .is_some_and(|n| n > 0)
                })
            })
        })
    }

    /// After the run: keeps its cgroups for a later run when `reusable` (the
    /// supervisor reported the end, so nothing of the run is left, and no OOM
    /// kill happened: see [`RunLimits::oom_killed`]) and little memory is
    /// charged; else kills anything still in them (the supervisor died) and
    /// removes them. Returns the processes killed.
    pub fn release(&self, reusable: bool) -> usize {
        if reusable && self.little_memory_charged() {
            if let Some(pool) = &self.pool {
                let mut kept = pool.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() < POOL_MAX {
                    kept.push(self.name.clone());
                    return 0;
                }
            }
        }
        let mut killed = 0;
        if let Some(first) = self.cgroups.first() {
            killed = kill_cgroup(&first.dir);
        }
        for cg in &self.cgroups {
            remove_cgroup(&cg.dir);
        }
        killed
    }

    fn little_memory_charged(&self) -> bool {
        let Some(memory) = self.oom_file.as_ref().and_then(|f| f.parent()) else {
            return false;
        };
        let file = if self.v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        };
        std::fs::read_to_string(memory.join(file))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .is_some_and(|bytes| bytes <= POOL_MEMORY_MAX)
    }
}

/// SIGKILLs every process in the cgroup `dir` until it is empty (bounded).
pub fn kill_cgroup(dir: &Path) -> usize {
    use rustix::process::{kill_process, Pid, Signal};
    let mut killed = 0;
    for _ in 0..1000 {
        let pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids.into_iter().filter_map(Pid::from_raw) {
            if kill_process(pid, Signal::KILL).is_ok() {
                killed += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    killed
}

/// Removes an empty cgroup directory, retrying briefly while the kernel lets go of
/// dying processes.
fn remove_cgroup(dir: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
    }
    tracing::warn!(cgroup = %dir.display(), "cannot remove a task cgroup (still busy)");
}

fn make_dir(dir: &Path) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create cgroup {}: {e}", dir.display())),
    }
}

/// The worker's own cgroup directory in the v1 hierarchy holding `controller`:
/// its mount point (from mountinfo) joined with its path in `/proc/self/cgroup`
/// relative to the mount's root.
fn v1_own_dir(own: &str, mounts: &str, controller: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctls.split(',').any(|c| c == controller).then_some(path)
    })?;
    own_dir(mounts, path, |fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == controller)
    })
}

/// The worker's own cgroup directory in the unified (v2) hierarchy.
fn v2_own_dir(own: &str, mounts: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    own_dir(mounts, path, |fstype, _| fstype == "cgroup2")
}

/// `path` (a cgroup path from `/proc/self/cgroup`) under the first mount of
/// `mounts` (mountinfo) whose file system type and super options `wanted` accepts,
/// relative to that mount's root.
fn own_dir(mounts: &str, path: &str, wanted: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, options) = (r.next()?, r.nth(1).unwrap_or(""));
        if !wanted(fstype, options) {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        let (root, mount) = (f.get(3)?, f.get(4)?);
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .trim_start_matches('/');
        Some(Path::new(mount).join(rel))
    })
}

#[cfg(test)]
mod tests;
