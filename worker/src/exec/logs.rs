//! Per-task directories and logs under the worker's data dir:
//! `<data-dir>/tasks/<job>.<index>/{stdout,stderr}` (the worker's, 0600) and
//! `<job>.<index>/work/` (the task user's, 0700: the command's working directory
//! unless it names one; removed when a run with a uid of its own ends). Kept after the task ends; only the newest
//! `keep` ended tasks' directories stay (the oldest go first).
//!
//! Each attempt keeps its logs: `attempt` (the worker's, 0600) names the attempt
//! `stdout` and `stderr` belong to, and when a retry of the task runs here again
//! they move to `stdout.<attempt>` and `stderr.<attempt>` first. A run again of
//! the same attempt (after a preemption) starts them afresh.

use common::TaskId;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A task's working directory inside its directory.
pub const WORK: &str = "work";

/// The file naming the attempt the current logs belong to.
const ATTEMPT: &str = "attempt";

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
    #[error("no log of attempt {attempt} of task {task} on this worker (it ran elsewhere, or retention removed it)")]
    NoAttempt { task: TaskId, attempt: u32 },
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
    /// (0700, owned by `owner` (uid, gid) when given), for run `attempt`. An
    /// earlier attempt's logs move aside (`stdout.<attempt>`); a run again of the
    /// same attempt truncates them. `work` always starts empty.
    pub fn create(
        &self,
        task: TaskId,
        attempt: u32,
        owner: Option<(u32, u32)>,
    ) -> std::io::Result<(File, File)> {
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
        match current_attempt(&dir) {
            Some(earlier) if earlier != attempt => {
                for stream in [Stream::Stdout, Stream::Stderr] {
                    let from = dir.join(stream.file_name());
                    if std::fs::symlink_metadata(&from).is_ok() {
                        std::fs::rename(&from, dir.join(attempt_file(stream, earlier)))?;
                    }
                }
            }
            _ => {}
        }
        {
            use std::io::Write;
            let mut mark = super::data_dir::private_file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.join(ATTEMPT))?;
            write!(mark, "{attempt}")?;
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
        tail(&self.root, Log::current(task, stream), lines)
    }
}

/// Which log: a task's stream, of its current attempt (`None`) or of one.
#[derive(Clone, Copy, Debug)]
pub struct Log {
    pub task: TaskId,
    pub stream: Stream,
    pub attempt: Option<u32>,
}

impl Log {
    pub fn current(task: TaskId, stream: Stream) -> Self {
        Log {
            task,
            stream,
            attempt: None,
        }
    }

    /// Opens it under `root` (the `tasks` directory), never through a symlink.
    fn open(&self, root: &Path) -> Result<File, LogError> {
        let dir = task_dir(root, self.task);
        // Without a mark (a directory of an earlier version), the logs are the
        // current attempt's.
        let path = match self.attempt {
            Some(n) if current_attempt(&dir).is_some_and(|current| current != n) => {
                dir.join(attempt_file(self.stream, n))
            }
            _ => dir.join(self.stream.file_name()),
        };
        match open_log(&path) {
            Ok(f) => Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(match self.attempt {
                Some(attempt) if std::fs::symlink_metadata(&dir).is_ok() => LogError::NoAttempt {
                    task: self.task,
                    attempt,
                },
                _ => LogError::Unknown { task: self.task },
            }),
            Err(e) => Err(self.io(e)),
        }
    }

    fn io(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            task: self.task,
            stream: self.stream.file_name(),
            source,
        }
    }
}

/// The attempt a task directory's current logs belong to (none before the first
/// run that recorded it).
fn current_attempt(dir: &Path) -> Option<u32> {
    let mut text = String::new();
    open_log(&dir.join(ATTEMPT))
        .ok()?
        .take(16)
        .read_to_string(&mut text)
        .ok()?;
    text.trim().parse().ok()
}

/// An earlier attempt's log file name.
fn attempt_file(stream: Stream, attempt: u32) -> String {
    format!("{}.{attempt}", stream.file_name())
}

/// The last `lines` lines (all when `None`) of a task's log under `root` (the
/// `tasks` directory), read from at most its last [`MAX_TAIL_BYTES`].
pub fn tail(root: &Path, log: Log, lines: Option<usize>) -> Result<String, LogError> {
    let io = |source| log.io(source);
    let mut file = log.open(root)?;
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
pub fn read_from(root: &Path, log: Log, from: u64) -> Result<(Vec<u8>, u64), LogError> {
    let io = |source| log.io(source);
    let file = log.open(root)?;
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
            logs.create(t, 1, None).expect("create");
            logs.ended(t);
        }
        assert!(matches!(
            logs.tail(tasks[0], Stream::Stdout, None),
            Err(LogError::Unknown { .. })
        ));
        assert_eq!(logs.tail(tasks[2], Stream::Stderr, None).expect("kept"), "");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn each_attempt_keeps_its_logs_and_a_rerun_of_one_starts_afresh() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("megha-logs-attempts-{}", std::process::id()));
        let logs = TaskLogs::new(&dir, 10).expect("data dir");
        let root = logs.root().to_path_buf();
        let t = TaskId::new(9, 0);
        let run = |attempt: u32, text: &str| {
            let (mut out, mut err) = logs.create(t, attempt, None).expect("create");
            write!(out, "{text}").expect("write");
            write!(err, "e{text}").expect("write");
        };
        let read = |attempt: Option<u32>, stream| {
            tail(
                &root,
                Log {
                    task: t,
                    stream,
                    attempt,
                },
                None,
            )
        };
        run(1, "first");
        assert_eq!(read(Some(1), Stream::Stdout).expect("1"), "first");
        assert!(matches!(
            read(Some(2), Stream::Stdout),
            Err(LogError::NoAttempt { attempt: 2, .. })
        ));
        // A retry: attempt 1's logs stay readable by their number.
        run(2, "second");
        assert_eq!(read(None, Stream::Stdout).expect("current"), "second");
        assert_eq!(read(Some(2), Stream::Stdout).expect("2"), "second");
        assert_eq!(read(Some(1), Stream::Stdout).expect("1"), "first");
        assert_eq!(read(Some(1), Stream::Stderr).expect("1"), "efirst");
        // Attempt 2 run again (preempted): its logs start afresh, 1's stay.
        run(2, "again");
        assert_eq!(read(Some(2), Stream::Stdout).expect("2"), "again");
        assert_eq!(read(Some(1), Stream::Stdout).expect("1"), "first");
        let (bytes, size) = read_from(
            &root,
            Log {
                task: t,
                stream: Stream::Stdout,
                attempt: Some(1),
            },
            2,
        )
        .expect("from");
        assert_eq!((bytes.as_slice(), size), (&b"rst"[..], 5));
        // A task never run here.
        assert!(matches!(
            tail(
                &root,
                Log {
                    task: TaskId::new(9, 1),
                    stream: Stream::Stdout,
                    attempt: Some(1)
                },
                None
            ),
            Err(LogError::Unknown { .. })
        ));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
