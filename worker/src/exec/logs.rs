//! Per-task directories and logs under the worker's data dir:
//! `<data-dir>/tasks/<job>.<index>/{stdout,stderr}` (the worker's, 0600) and
//! `<job>.<index>/work/` (the task user's, 0700: the command's working directory
//! unless it names one; removed when a run with a uid of its own ends). Kept after the task ends; only the newest
//! `keep` ended tasks' directories stay (the oldest go first).

use common::TaskId;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A task's working directory inside its directory.
pub const WORK: &str = "work";

/// Most bytes read from the end of a log to answer a tail request.
pub const MAX_TAIL_BYTES: u64 = 1 << 20;

/// Which output of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn file_name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

impl std::str::FromStr for Stream {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stdout" => Ok(Stream::Stdout),
            "stderr" => Ok(Stream::Stderr),
            other => Err(format!("unknown stream `{other}`: use stdout or stderr")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("no logs for task {task} on this worker (unknown task, not an exec task, or removed by retention)")]
    Unknown { task: TaskId },
    #[error("cannot read the {stream} log of task {task}: {source}")]
    Io {
        task: TaskId,
        stream: &'static str,
        source: std::io::Error,
    },
}

/// The task directories of one worker.
#[derive(Debug)]
pub struct TaskLogs {
    root: PathBuf,
    keep: usize,
    ended: VecDeque<TaskId>,
}

impl TaskLogs {
    pub fn new(data_dir: &Path, keep: usize) -> std::io::Result<Self> {
        let root = data_dir.join("tasks");
        super::data_dir::owned_dir(&root, super::data_dir::TRAVERSABLE)
            .map_err(std::io::Error::other)?;
        Ok(TaskLogs {
            root,
            keep,
            ended: VecDeque::new(),
        })
    }

    /// `<data dir>/tasks`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn dir(&self, task: TaskId) -> PathBuf {
        task_dir(&self.root, task)
    }

    pub fn path(&self, task: TaskId, stream: Stream) -> PathBuf {
        self.dir(task).join(stream.file_name())
    }

    /// Creates the task's directory (the worker's, 0711), its empty log files (the
    /// worker's, 0600: the task writes them only through the descriptors it is
    /// given, and cannot swap them for links) and its working directory `work`
    /// (0700, owned by `owner` (uid, gid) when given). A run again truncates the
    /// logs and starts with an empty `work`.
    pub fn create(&self, task: TaskId, owner: Option<(u32, u32)>) -> std::io::Result<(File, File)> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.dir(task);
        match std::fs::DirBuilder::new().mode(0o711).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let work = dir.join(WORK);
        if std::fs::symlink_metadata(&work).is_ok() {
            std::fs::remove_dir_all(&work)?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&work)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&work, Some(uid), Some(gid))?;
        }
        let open = |stream: Stream| {
            super::data_dir::private_file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.join(stream.file_name()))
        };
        Ok((open(Stream::Stdout)?, open(Stream::Stderr)?))
    }

    /// The task's working directory (unless its command names one).
    pub fn work_dir(&self, task: TaskId) -> PathBuf {
        self.dir(task).join(WORK)
    }

    /// The task ended: its logs stay, and the oldest beyond `keep` go.
    pub fn ended(&mut self, task: TaskId) {
        self.ended.retain(|t| *t != task);
        self.ended.push_back(task);
        while self.ended.len() > self.keep {
            let Some(old) = self.ended.pop_front() else {
                break;
            };
            if let Err(e) = std::fs::remove_dir_all(self.dir(old)) {
                tracing::warn!(task = %old, job = old.job.0, error = %e, "cannot remove an old task directory");
            }
        }
    }

    pub fn tail(
        &self,
        task: TaskId,
        stream: Stream,
        lines: Option<usize>,
    ) -> Result<String, LogError> {
        tail(&self.root, task, stream, lines)
    }
}

/// The last `lines` lines (all when `None`) of a task's log under `root` (the
/// `tasks` directory), read from at most its last [`MAX_TAIL_BYTES`].
pub fn tail(
    root: &Path,
    task: TaskId,
    stream: Stream,
    lines: Option<usize>,
) -> Result<String, LogError> {
    let io = |source| LogError::Io {
        task,
        stream: stream.file_name(),
        source,
    };
    let path = task_dir(root, task).join(stream.file_name());
    let mut file = match open_log(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LogError::Unknown { task })
        }
        Err(e) => return Err(io(e)),
    };
    let len = file.metadata().map_err(io)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(MAX_TAIL_BYTES)))
        .map_err(io)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(match lines {
        None => text.into_owned(),
        Some(n) => last_lines(&text, n).to_owned(),
    })
}

/// A task's log from byte `from` on (at most [`MAX_TAIL_BYTES`] of it), and the
/// log's size: a follower passes the size it got plus what it read as the next
/// `from`.
pub fn read_from(
    root: &Path,
    task: TaskId,
    stream: Stream,
    from: u64,
) -> Result<(Vec<u8>, u64), LogError> {
    let io = |source| LogError::Io {
        task,
        stream: stream.file_name(),
        source,
    };
    let path = task_dir(root, task).join(stream.file_name());
    let file = match open_log(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LogError::Unknown { task })
        }
        Err(e) => return Err(io(e)),
    };
    let len = file.metadata().map_err(io)?.len();
    let mut file = file;
    file.seek(SeekFrom::Start(from.min(len))).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_TAIL_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    Ok((bytes, len))
}

/// Opens a log for reading, never through a symlink.
fn open_log(path: &Path) -> std::io::Result<File> {
    super::data_dir::private_file().read(true).open(path)
}

/// A task's directory under `root` (the `tasks` directory).
pub fn task_dir(root: &Path, task: TaskId) -> PathBuf {
    root.join(format!("{}.{}", task.job.0, task.index))
}

/// The suffix of `text` holding its last `n` lines (a final newline ends a line).
pub fn last_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((i, _)) => &text[i + 1..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(last_lines("a\nb\n", 5), "a\nb\n");
        assert_eq!(last_lines("a\n", 0), "");
        assert_eq!(last_lines("", 3), "");
    }

    #[test]
    fn retention_keeps_the_newest_ended_tasks() {
        let dir = std::env::temp_dir().join(format!("megha-logs-test-{}", std::process::id()));
        let mut logs = TaskLogs::new(&dir, 2).expect("data dir");
        let tasks: Vec<TaskId> = (0..3).map(|i| TaskId::new(7, i)).collect();
        for &t in &tasks {
            logs.create(t, None).expect("create");
            logs.ended(t);
        }
        assert!(matches!(
            logs.tail(tasks[0], Stream::Stdout, None),
            Err(LogError::Unknown { .. })
        ));
        assert_eq!(logs.tail(tasks[2], Stream::Stderr, None).expect("kept"), "");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
