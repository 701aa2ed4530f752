//! CPU and memory limits of exec tasks: one cgroup per task (v1 or v2, through
//! `cgroups-rs`) under `megha-worker-<pid>` when the host lets the worker create
//! them (v1: nested in the worker's own cgroup of each controller; v2: at the root
//! of the unified hierarchy it sees, a container's own with a cgroup namespace);
//! otherwise an address-space rlimit (`RLIMIT_AS`) and no CPU limit.
//!
//! A task's process joins its cgroup (or gets its rlimit) right after it is spawned:
//! what it does in that instant is not charged (std offers no safe way to act
//! between fork and exec, and the workspace forbids unsafe code).

use cgroups_rs::cpu::CpuController;
use cgroups_rs::memory::MemController;
use cgroups_rs::{Cgroup, CgroupPid, Controller};
use common::TaskSpec;
use rustix::process::{prlimit, Pid, Resource, Rlimit};
use std::collections::HashMap;

/// CFS period of task cgroups (µs); the quota is the task's share of it.
const CPU_PERIOD_US: u64 = 100_000;

/// How limits are enforced on this host.
#[derive(Debug)]
pub enum Limits {
    Cgroup {
        v2: bool,
        /// The worker's cgroup for its tasks, relative to its own cgroup.
        parent: String,
        /// The worker's own cgroup per v1 controller (`/proc/self/cgroup`).
        relative: HashMap<String, String>,
    },
    Rlimit {
        /// Why cgroups are not used.
        why: String,
    },
}

/// The limits of one running task, released when it ends.
#[derive(Debug)]
pub enum TaskLimits {
    Cgroup(Cgroup),
    Rlimit,
}

impl Limits {
    /// Cgroups when the worker can create them (it tries a cgroup for itself with a
    /// memory controller), else rlimits. `cgroups: false` forces rlimits.
    pub fn detect(cgroups: bool) -> Limits {
        if !cgroups {
            return Limits::Rlimit {
                why: "cgroups turned off (--cgroups false)".into(),
            };
        }
        match Self::try_cgroups() {
            Ok(limits) => limits,
            Err(why) => Limits::Rlimit { why },
        }
    }

    fn try_cgroups() -> Result<Limits, String> {
        let v2 = cgroups_rs::hierarchies::is_cgroup2_unified_mode();
        let relative = if v2 {
            HashMap::new()
        } else {
            cgroups_rs::cgroup::get_cgroups_relative_paths()
                .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?
        };
        let parent = format!("megha-worker-{}", std::process::id());
        let probe = load(v2, &relative, &parent);
        probe
            .create()
            .map_err(|e| format!("cannot create cgroup {parent}: {e}"))?;
        let usable = probe
            .controller_of::<MemController>()
            .filter(|m| m.path().exists())
            .is_some();
        if !usable {
            let _ = probe.delete();
            return Err(format!("no writable memory controller for cgroup {parent}"));
        }
        Ok(Limits::Cgroup {
            v2,
            parent,
            relative,
        })
    }

    /// One line for the startup log.
    pub fn describe(&self) -> String {
        match self {
            Limits::Cgroup { v2, parent, .. } => format!(
                "cgroup {} (task cgroups under {parent})",
                if *v2 { "v2" } else { "v1" }
            ),
            Limits::Rlimit { why } => {
                format!("rlimits: memory as RLIMIT_AS, CPU not limited ({why})")
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

    /// Puts the process `pid` of `task` under the task's limits.
    pub fn apply(&self, task: &TaskSpec, pid: u32) -> Result<TaskLimits, String> {
        let memory = task.resources.memory_mb.saturating_mul(1 << 20);
        match self {
            Limits::Cgroup {
                v2,
                parent,
                relative,
            } => {
                let path = format!("{parent}/{}.{}", task.id.job.0, task.id.index);
                let cg = load(*v2, relative, &path);
                cg.create()
                    .map_err(|e| format!("cannot create cgroup {path}: {e}"))?;
                let set = || -> Result<(), String> {
                    let mem = cg
                        .controller_of::<MemController>()
                        .ok_or("no memory controller")?;
                    mem.set_limit(i64::try_from(memory).unwrap_or(i64::MAX))
                        .map_err(|e| format!("memory limit: {e}"))?;
                    if let Some(cpu) = cg.controller_of::<CpuController>() {
                        let quota = task.resources.cpu_millis.max(1) * CPU_PERIOD_US / 1000;
                        cpu.set_cfs_quota_and_period(
                            Some(i64::try_from(quota).unwrap_or(i64::MAX)),
                            Some(CPU_PERIOD_US),
                        )
                        .map_err(|e| format!("cpu quota: {e}"))?;
                    }
                    cg.add_task_by_tgid(CgroupPid::from(u64::from(pid)))
                        .map_err(|e| format!("cannot move the process into {path}: {e}"))
                };
                match set() {
                    Ok(()) => Ok(TaskLimits::Cgroup(cg)),
                    Err(e) => {
                        let _ = cg.delete();
                        Err(e)
                    }
                }
            }
            Limits::Rlimit { .. } => {
                let pid = i32::try_from(pid)
                    .ok()
                    .and_then(Pid::from_raw)
                    .ok_or("bad pid")?;
                let limit = Rlimit {
                    current: Some(memory),
                    maximum: Some(memory),
                };
                prlimit(Some(pid), Resource::As, limit)
                    .map(|_| TaskLimits::Rlimit)
                    .map_err(|e| format!("cannot set RLIMIT_AS: {e}"))
            }
        }
    }

    /// Removes the worker's own task cgroup (at shutdown).
    pub fn remove(&self) {
        if let Limits::Cgroup {
            v2,
            parent,
            relative,
        } = self
        {
            let _ = load(*v2, relative, parent).delete();
        }
    }
}

impl TaskLimits {
    /// True when the memory limit's OOM killer killed a process of the task.
    pub fn oom_killed(&self) -> bool {
        let TaskLimits::Cgroup(cg) = self else {
            return false;
        };
        let Some(mem) = cg.controller_of::<MemController>() else {
            return false;
        };
        // v1 memory.oom_control and v2 memory.events both carry "oom_kill N".
        ["memory.oom_control", "memory.events"].iter().any(|f| {
            std::fs::read_to_string(mem.path().join(f)).is_ok_and(|text| {
                text.lines().any(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse::<u64>().ok())
                        .is_some_and(|n| n > 0)
                })
            })
        })
    }

    /// Processes still in the task's cgroup (ones that left its process group).
    pub fn leftover_pids(&self) -> Vec<u64> {
        match self {
            TaskLimits::Cgroup(cg) => cg.procs().into_iter().map(|p| p.pid).collect(),
            TaskLimits::Rlimit => Vec::new(),
        }
    }

    /// Removes the task's cgroup; its processes must be gone.
    pub fn release(self) -> Result<(), String> {
        match self {
            TaskLimits::Cgroup(cg) => cg.delete().map_err(|e| e.to_string()),
            TaskLimits::Rlimit => Ok(()),
        }
    }
}

fn load(v2: bool, relative: &HashMap<String, String>, path: &str) -> Cgroup {
    let hier = cgroups_rs::hierarchies::auto();
    if v2 {
        Cgroup::load(hier, path)
    } else {
        Cgroup::load_with_relative_paths(hier, path, relative.clone())
    }
}
