//! Whom exec tasks run as. Never the worker's own user unless the operator says so:
//!
//! - `--task-uids FIRST-LAST`: each run gets a uid of the range to itself (its gid
//!   the same number), like systemd's DynamicUser: running tasks cannot read, signal
//!   or trace each other. The uids must belong to no account (checked against
//!   `/etc/passwd` at start). Workers on one host share the range safely: a uid is
//!   held with a lock file in `/run/megha-task-uids` (or the temp dir) while its run
//!   lives.
//! - `--task-user NAME`: every task runs as that account (e.g. `nobody`); tasks can
//!   then reach each other's processes and files.
//! - `--allow-run-as-self`: tasks run as the worker's user (a loud warning at start
//!   and on `/healthz`). Without any of these, a worker running as root, or one
//!   that cannot switch users, refuses exec tasks, saying why.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// True when this process runs as root (it can switch task users).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// How the operator configured task identities (flags).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentityConfig {
    pub task_user: Option<String>,
    pub task_uids: Option<(u32, u32)>,
    pub allow_run_as_self: bool,
}

impl IdentityConfig {
    /// Parses `FIRST-LAST`.
    pub fn parse_range(text: &str) -> Result<(u32, u32), String> {
        let (a, b) = text
            .split_once('-')
            .ok_or_else(|| format!("expected FIRST-LAST (e.g. 61000-61999), got `{text}`"))?;
        let first: u32 = a
            .trim()
            .parse()
            .map_err(|e| format!("first uid `{a}`: {e}"))?;
        let last: u32 = b
            .trim()
            .parse()
            .map_err(|e| format!("last uid `{b}`: {e}"))?;
        if first == 0 || last < first {
            return Err(format!(
                "the range must be non-empty and not include 0 (root), got {first}-{last}"
            ));
        }
        Ok((first, last))
    }
}

/// Resolved task identities.
#[derive(Clone, Debug)]
pub enum TaskIdentity {
    Range(Arc<UidPool>),
    User {
        name: String,
        uid: u32,
        gid: u32,
    },
    AsSelf,
    /// Exec tasks are refused, for this reason.
    Refuse(String),
}

/// Who a run is: a uid and gid (`None`: the worker's own), and the lock that keeps
/// the uid its own while it lives.
#[derive(Debug)]
pub struct RunIdentity {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Held until the run's processes are all gone.
    _lease: Option<File>,
}

impl TaskIdentity {
    /// From the flags; `Err` when they are wrong (unknown user, a range that holds an
    /// account, both a user and a range).
    pub fn resolve(config: &IdentityConfig) -> Result<TaskIdentity, String> {
        let me = rustix::process::geteuid().as_raw();
        match (&config.task_user, config.task_uids) {
            (Some(_), Some(_)) => Err("give --task-user or --task-uids, not both".into()),
            (Some(name), None) => {
                let (uid, gid) = passwd_entry(name)
                    .ok_or_else(|| format!("--task-user: no account `{name}` in /etc/passwd"))?;
                if uid == 0 {
                    return Err(format!("--task-user: `{name}` is root"));
                }
                if me != 0 && me != uid {
                    return Ok(TaskIdentity::Refuse(format!(
                        "the worker runs as uid {me}, not root: it cannot run tasks as `{name}`"
                    )));
                }
                Ok(TaskIdentity::User {
                    name: name.clone(),
                    uid,
                    gid,
                })
            }
            (None, Some((first, last))) => {
                if let Some((name, uid)) = accounts().into_iter().find(|(_, u)| (first..=last).contains(u)) {
                    return Err(format!(
                        "--task-uids {first}-{last}: uid {uid} belongs to the account `{name}`; choose a range no account uses"
                    ));
                }
                if me != 0 {
                    return Ok(TaskIdentity::Refuse(format!(
                        "the worker runs as uid {me}, not root: it cannot switch to --task-uids {first}-{last}"
                    )));
                }
                Ok(TaskIdentity::Range(Arc::new(UidPool::new(first, last)?)))
            }
            (None, None) if config.allow_run_as_self => Ok(TaskIdentity::AsSelf),
            (None, None) if me == 0 => Ok(TaskIdentity::Refuse(
                "the worker runs as root and no task identity is set: give --task-uids FIRST-LAST (a uid per task) or --task-user NAME; --allow-run-as-self runs tasks as root".into(),
            )),
            (None, None) => Ok(TaskIdentity::Refuse(format!(
                "no task identity is set and the worker (uid {me}) cannot switch users: give --allow-run-as-self to run tasks as the worker's own user"
            ))),
        }
    }

    /// One line for the startup log and `/healthz`.
    pub fn describe(&self) -> String {
        match self {
            TaskIdentity::Range(pool) => format!(
                "each exec task runs as a uid of its own from {}-{}",
                pool.first, pool.last
            ),
            TaskIdentity::User { name, uid, .. } => {
                format!("exec tasks run as `{name}` (uid {uid}), all of them the same user")
            }
            TaskIdentity::AsSelf => format!(
                "WARNING: exec tasks run as the worker's own user (uid {}; --allow-run-as-self): a task can read the worker's credentials and files",
                rustix::process::geteuid().as_raw()
            ),
            TaskIdentity::Refuse(why) => format!("exec tasks are refused: {why}"),
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            TaskIdentity::Range(_) => "uid_per_task",
            TaskIdentity::User { .. } => "task_user",
            TaskIdentity::AsSelf => "worker_user",
            TaskIdentity::Refuse(_) => "refused",
        }
    }

    /// The identity of a new run, or why exec tasks cannot run.
    pub fn for_run(&self) -> Result<RunIdentity, String> {
        match self {
            TaskIdentity::Range(pool) => pool.lease(),
            TaskIdentity::User { uid, gid, .. } => Ok(RunIdentity {
                uid: Some(*uid),
                gid: Some(*gid),
                _lease: None,
            }),
            TaskIdentity::AsSelf => Ok(RunIdentity {
                uid: None,
                gid: None,
                _lease: None,
            }),
            TaskIdentity::Refuse(why) => Err(why.clone()),
        }
    }
}

/// A range of uids, each held by at most one run on this host at a time.
#[derive(Debug)]
pub struct UidPool {
    first: u32,
    last: u32,
    dir: PathBuf,
    next: Mutex<u32>,
}

impl UidPool {
    fn new(first: u32, last: u32) -> Result<UidPool, String> {
        let base = if std::path::Path::new("/run").is_dir() {
            PathBuf::from("/run")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join("megha-task-uids");
        super::data_dir::private_dir(&dir).map_err(|e| format!("uid leases: {e}"))?;
        Ok(UidPool {
            first,
            last,
            dir,
            next: Mutex::new(first),
        })
    }

    /// The next uid no run on this host holds (a non-blocking lock on its lease
    /// file, kept by the run).
    fn lease(&self) -> Result<RunIdentity, String> {
        use rustix::fs::{flock, FlockOperation};
        let span = u64::from(self.last - self.first) + 1;
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..span {
            let uid = *next;
            *next = if uid >= self.last {
                self.first
            } else {
                uid + 1
            };
            let path = self.dir.join(uid.to_string());
            let file = super::data_dir::private_file()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| format!("cannot open the uid lease {}: {e}", path.display()))?;
            if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
                return Ok(RunIdentity {
                    uid: Some(uid),
                    gid: Some(uid),
                    _lease: Some(file),
                });
            }
        }
        Err(format!(
            "every uid of --task-uids {}-{} is in use by a running task on this host",
            self.first, self.last
        ))
    }
}

/// uid and gid of `name` in `/etc/passwd` (also a number, taken as a uid).
fn passwd_entry(name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    for line in text.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4 && (f[0] == name || f[2] == name) {
            return Some((f[2].parse().ok()?, f[3].parse().ok()?));
        }
    }
    let uid: u32 = name.parse().ok()?;
    Some((uid, uid))
}

/// Every account in `/etc/passwd`, name and uid.
fn accounts() -> Vec<(String, u32)> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked() {
        assert_eq!(
            IdentityConfig::parse_range("61000-61999"),
            Ok((61000, 61999))
        );
        assert!(IdentityConfig::parse_range("0-10").is_err());
        assert!(IdentityConfig::parse_range("20-10").is_err());
        assert!(IdentityConfig::parse_range("20").is_err());
        assert!(IdentityConfig::parse_range("a-b").is_err());
    }

    #[test]
    fn identities_resolve_as_the_flags_say() {
        let resolve = |config: IdentityConfig| TaskIdentity::resolve(&config);
        let both = IdentityConfig {
            task_user: Some("nobody".into()),
            task_uids: Some((3_900_000, 3_900_009)),
            ..Default::default()
        };
        assert!(resolve(both).expect_err("both").contains("not both"));
        let unknown = IdentityConfig {
            task_user: Some("no-such-megha-user".into()),
            ..Default::default()
        };
        assert!(resolve(unknown)
            .expect_err("unknown")
            .contains("no account"));
        let root = IdentityConfig {
            task_user: Some("root".into()),
            ..Default::default()
        };
        assert!(resolve(root).expect_err("root").contains("is root"));
        let as_self = IdentityConfig {
            allow_run_as_self: true,
            ..Default::default()
        };
        let identity = resolve(as_self).expect("as self");
        assert!(
            identity.describe().starts_with("WARNING"),
            "{}",
            identity.describe()
        );
        assert!(identity.for_run().expect("run").uid.is_none());
        let none = resolve(IdentityConfig::default()).expect("resolves");
        assert_eq!(none.label(), "refused");
        assert!(none.for_run().is_err());
        if is_root() {
            let nobody = IdentityConfig {
                task_user: Some("nobody".into()),
                ..Default::default()
            };
            let identity = resolve(nobody).expect("nobody");
            assert_eq!(identity.for_run().expect("run").uid, Some(65534));
            // Two runs of a range hold different uids; a freed uid comes back
            // only after the rest of the range.
            let range = IdentityConfig {
                task_uids: Some((3_900_000, 3_900_001)),
                ..Default::default()
            };
            let identity = resolve(range).expect("range");
            let (a, b) = (
                identity.for_run().expect("a"),
                identity.for_run().expect("b"),
            );
            assert_ne!(a.uid, b.uid);
            assert!(identity.for_run().is_err(), "the range is used up");
            drop(a);
            assert!(
                identity.for_run().is_ok(),
                "a freed uid is handed out again"
            );
        }
    }

    #[test]
    fn a_range_holding_an_account_is_refused() {
        // Every Debian system has root (0) and nobody (65534).
        let config = IdentityConfig {
            task_uids: Some((65530, 65535)),
            ..Default::default()
        };
        let err = TaskIdentity::resolve(&config).expect_err("nobody is in the range");
        assert!(err.contains("nobody"), "{err}");
    }
}
