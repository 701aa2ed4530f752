//! The worker's data directory, made safely: a directory the worker owns, that no
//! one else may write, reached without following a symlink at its last component,
//! and held by one worker at a time (a lock file), so that nothing planted there by
//! another local user is written through and two workers never share it.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the data directory and its `tasks` directory: the owner's, and
/// traversable (not listable) by task users, whose working directories lie below.
pub const TRAVERSABLE: u32 = 0o711;

/// Creates `dir` (its missing parents 0755) or checks the one there: a real
/// directory (not a symlink), owned by this process's user, writable by no one
/// else. Sets its mode to 0700.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    owned_dir(dir, 0o700)
}

/// [`private_dir`] with the given mode.
pub fn owned_dir(dir: &Path, mode: u32) -> Result<(), String> {
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .recursive(true)
                .create(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        safe_parent(parent)?;
    }
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symlink; refusing to use it (remove it, or choose another directory)",
            dir.display()
        ));
    }
    if !meta.is_dir() {
        return Err(format!("{} exists and is not a directory", dir.display()));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "{} belongs to uid {}, not to this worker (uid {me}); refusing to use it",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        // Writable by others: someone may have planted files; do not trust it.
        return Err(format!(
            "{} is writable by other users (mode {:o}); refusing to use it",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))
}

/// A parent others may write without the sticky bit lets them rename the
/// directory away and plant another: one of ours (e.g. a Kubernetes emptyDir,
/// 0777) is tightened to 0755, another's is refused.
fn safe_parent(parent: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(parent) else {
        return Ok(());
    };
    let open = meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0;
    if !open {
        return Ok(());
    }
    if meta.uid() == rustix::process::geteuid().as_raw() {
        let tightened = (meta.mode() & 0o7777) & !0o022;
        tracing::warn!(dir = %parent.display(), from = format!("{:o}", meta.mode() & 0o7777), to = format!("{tightened:o}"), "the data directory's parent was writable by others; tightened");
        return std::fs::set_permissions(parent, std::fs::Permissions::from_mode(tightened))
            .map_err(|e| format!("cannot tighten {}: {e}", parent.display()));
    }
    Err(format!(
        "{} (the parent) is writable by other users and not sticky; refusing to keep the data directory in it",
        parent.display()
    ))
}

/// Options that create files 0600 and never open through a symlink (`O_NOFOLLOW`
/// on the last component): every file the worker keeps in its directories. Add
/// read, write, create... as needed.
pub fn private_file() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    options
}

/// The data directory, locked for this worker. Dropping it releases the lock.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Makes `path` safely ([`owned_dir`], mode [`TRAVERSABLE`]) and locks it; an
    /// error names the reason (a symlink, a foreign owner, another worker on it).
    pub fn open(path: &Path) -> Result<DataDir, String> {
        use rustix::fs::{flock, FlockOperation};
        owned_dir(path, TRAVERSABLE).map_err(|e| format!("data directory: {e}"))?;
        let lock_path = path.join("lock");
        let lock = private_file()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("data directory: cannot open {}: {e}", lock_path.display()))?;
        flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|_| {
            format!(
                "data directory {} is in use by another worker (its lock file is held); give each worker its own --data-dir",
                path.display()
            )
        })?;
        Ok(DataDir {
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The default data directory of a worker: one per cluster, LM and slot, under
/// `/var/lib/megha-worker` for root, else `$XDG_STATE_HOME/megha-worker` (or
/// `~/.local/state/megha-worker`, else `<temp>/megha-worker-<uid>`).
pub fn default_path(cluster: &str, lm_url: &str, slot: Option<u32>) -> PathBuf {
    let me = rustix::process::geteuid().as_raw();
    let base = if me == 0 {
        PathBuf::from("/var/lib/megha-worker")
    } else if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(state).join("megha-worker")
    } else if let Some(home) = std::env::var_os("HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(home).join(".local/state/megha-worker")
    } else {
        std::env::temp_dir().join(format!("megha-worker-{me}"))
    };
    let lm: String = lm_url
        .split_once("://")
        .map_or(lm_url, |(_, rest)| rest)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let slot = match slot {
        Some(s) => format!("slot{s}"),
        None => format!("auto-pid{}", std::process::id()),
    };
    base.join(format!("{cluster}-{}-{slot}", lm.trim_matches('-')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("megha-datadir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&dir);
        dir
    }

    #[test]
    fn a_symlink_at_the_path_is_refused_and_nothing_is_written_through_it() {
        let target = scratch("target");
        std::fs::create_dir_all(&target).expect("target");
        let link = scratch("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let err = DataDir::open(&link).expect_err("symlink refused");
        assert!(err.contains("symlink"), "{err}");
        assert_eq!(std::fs::read_dir(&target).expect("list").count(), 0);
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&target);
    }

    #[test]
    fn two_workers_cannot_share_a_data_directory() {
        let dir = scratch("shared");
        let first = DataDir::open(&dir).expect("first");
        let err = DataDir::open(&dir).expect_err("second");
        assert!(err.contains("in use by another worker"), "{err}");
        drop(first);
        DataDir::open(&dir).expect("free again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_world_writable_directory_is_refused() {
        let dir = scratch("open");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = DataDir::open(&dir).expect_err("world-writable");
        assert!(err.contains("writable by other users"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn default_paths_differ_per_lm_and_slot() {
        let a = default_path("c1", "http://127.0.0.1:9100", Some(0));
        let b = default_path("c1", "http://127.0.0.1:9101", Some(0));
        let c = default_path("c1", "http://127.0.0.1:9100", Some(1));
        assert!(a != b && a != c && b != c, "{a:?} {b:?} {c:?}");
        assert!(
            a.to_string_lossy().ends_with("c1-127.0.0.1-9100-slot0"),
            "{a:?}"
        );
    }
}
