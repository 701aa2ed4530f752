//! The processes of one run, and how to find processes in `/proc`.

use crate::exec::wire::{self, Event, Report, Spec};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// The processes of one run.
pub(crate) struct Run {
    /// `cgroup.procs` of the run's first cgroup (every process of the run is in
    /// each of its cgroups).
    procs: Option<PathBuf>,
    /// `pids.current` of the run's pids cgroup: a cheap "nothing left" (reading
    /// `cgroup.procs` makes the kernel build, and later destroy, a pid list).
    count: Option<PathBuf>,
    /// The command's process group.
    group: Option<u32>,
    /// The run's own uid (not the supervisor's).
    uid: Option<u32>,
    /// One killer at a time (the main thread and the run's waiter).
    lock: Mutex<()>,
}

impl Run {
    pub(crate) fn of(spec: &Spec, group: Option<u32>) -> Run {
        let own = rustix::process::getuid().as_raw();
        Run {
            procs: spec.cgroups.first().map(|c| c.dir.join("cgroup.procs")),
            count: spec.cgroups.iter().find_map(|c| {
                let file = c.dir.join("pids.current");
                c.settings
                    .iter()
                    .any(|(f, _)| f == "pids.max")
                    .then_some(file)
            }),
            group,
            uid: spec.uid.filter(|u| *u != own),
            lock: Mutex::new(()),
        }
    }

    /// Signals every process of the run; with SIGKILL, until none is left (a
    /// process forking meanwhile is caught by the next round; the pids limit bounds
    /// how many there can be).
    pub(crate) fn kill_all(&self, signal: rustix::process::Signal) {
        use rustix::process::{kill_process, kill_process_group, Pid, Signal};
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id();
        for round in 0..10_000u32 {
            let mut pids = Vec::new();
            let none_left = self
                .count
                .as_ref()
                .is_some_and(|c| std::fs::read_to_string(c).is_ok_and(|t| t.trim() == "0"));
            if none_left {
                // (The group's leader may be a zombie still: it is counted no more.)
            } else if let Some(procs) = &self.procs {
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

/// The running runs, by number.
#[derive(Default)]
pub(crate) struct Runs(Mutex<HashMap<u64, Arc<Run>>>);

impl Runs {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Run>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn signal(&self, run: u64, signal: rustix::process::Signal) {
        let found = self.lock().get(&run).cloned();
        if let Some(r) = found {
            r.kill_all(signal);
        }
    }

    pub(super) fn kill_every_run(&self) {
        let all: Vec<Arc<Run>> = self.lock().values().cloned().collect();
        for r in all {
            r.kill_all(rustix::process::Signal::KILL);
        }
    }
}

pub(crate) fn report(control: &OwnedFd, run: u64, report: Report) {
    // A failed send means the worker is gone: the main loop sees it and kills all.
    let _ = wire::send(control, &Event { run, report }, &[]);
}
