//! The runs this worker finished recently, listed to its LM when it registers again
//! (`WorkerRegistration::finished`), and kept in a file of its data dir so that a
//! worker that restarted still lists them.
//!
//! Why: a finished run's end travels worker -> LM -> GM. If the LM crashes while the
//! end waits in its stream to the GM (the GM is down or cut off), the end dies with
//! the LM; a restarted LM asked by the GM then knows nothing of the run and reports
//! it lost, and the GM runs the task again. The worker's list tells the restarted LM
//! that the run finished. Kept only in memory, the list died too when the worker
//! crashed as well: `loadgen faults` counted 14 tasks in 3,000 seeds that ran twice or
//! ended twice so; with the list kept across worker restarts, 2.
//!
//! The file (`finished-runs` in the data dir) names its owner on its first line
//! (cluster name, LM URL, slot): another owner's list is ignored, never listed to
//! this LM. Entries older than [`MAX_AGE`] are not listed either: a GM's doubt about
//! a batch and its reconcile with a restarted LM end well before, and a cluster
//! started afresh (its job numbers from 1 again) must not find a task "finished" by
//! a run of its previous incarnation. Appends are single `write` calls without
//! `fsync`: they survive the worker's crash, not its host's.

use common::{JobId, TaskId};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How many finished runs are remembered (the newest).
pub const KEPT: usize = 10_000;

/// How long a finished run is listed after it ended.
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

const HEADER: &str = "megha-finished-runs v1";

/// One finished run: the task, its run number, and when it ended (seconds since the
/// epoch, for [`MAX_AGE`]).
type Run = (TaskId, u32, u64);

#[derive(Debug)]
pub struct FinishedRuns {
    runs: VecDeque<Run>,
    /// The file, appended to; `None`: in memory only (embedded mode, tests, or the
    /// file could not be written: logged).
    file: Option<(PathBuf, File)>,
    /// The owner line of the file.
    owner: String,
    /// Lines in the file: compacted to [`KEPT`] past twice that.
    lines: usize,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl FinishedRuns {
    /// A memory that dies with the process.
    pub fn in_memory() -> Self {
        FinishedRuns {
            runs: VecDeque::new(),
            file: None,
            owner: String::new(),
            lines: 0,
        }
    }

    /// The memory kept in `dir/finished-runs` for `owner` (cluster, LM URL and slot):
    /// what an earlier life of this worker wrote there, if it was the same owner's.
    /// A file that cannot be read or written is logged and the memory kept in
    /// memory only.
    pub fn open(dir: &Path, owner: &str) -> Self {
        let path = dir.join("finished-runs");
        let owner = owner.replace('\n', " ");
        let mut runs = FinishedRuns {
            owner,
            ..FinishedRuns::in_memory()
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => runs.read(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the finished runs of this worker's previous life; starting without them")
            }
        }
        if let Err(e) = runs.rewrite(path.clone()) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the finished runs file; a restart of this worker will forget them");
        }
        runs
    }

    /// Takes the runs of `text` if it is this owner's file.
    fn read(&mut self, text: &str, path: &Path) {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        let Some(owner) = header.strip_prefix(HEADER).map(str::trim) else {
            tracing::warn!(path = %path.display(), "not a finished runs file; ignored");
            return;
        };
        if owner != self.owner {
            tracing::info!(path = %path.display(), file = owner, this = %self.owner, "finished runs of another cluster, LM or slot; ignored");
            return;
        }
        let oldest = now_s().saturating_sub(MAX_AGE.as_secs());
        for line in lines {
            let fields: Vec<u64> = line
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            // A line cut short by a crash mid-write is skipped.
            let [job, index, attempt, at] = fields[..] else {
                continue;
            };
            let (Ok(index), Ok(attempt)) = (u32::try_from(index), u32::try_from(attempt)) else {
                continue;
            };
            if at >= oldest {
                self.remember((
                    TaskId {
                        job: JobId(job),
                        index,
                    },
                    attempt,
                    at,
                ));
            }
        }
        if !self.runs.is_empty() {
            tracing::info!(
                runs = self.runs.len(),
                "finished runs of this worker's previous life; listed to the LM"
            );
        }
    }

    fn remember(&mut self, run: Run) {
        if self.runs.len() == KEPT {
            self.runs.pop_front();
        }
        self.runs.push_back(run);
    }

    /// Writes the file anew with the runs remembered, then appends to it.
    fn rewrite(&mut self, path: PathBuf) -> std::io::Result<()> {
        let mut text = format!("{HEADER} {}\n", self.owner);
        for (task, attempt, at) in &self.runs {
            text.push_str(&format!("{} {} {attempt} {at}\n", task.job.0, task.index));
        }
        let tmp = path.with_extension("tmp");
        // The worker's only (0600), never written through a link planted there.
        {
            use std::io::Write as _;
            let _ = std::fs::remove_file(&tmp);
            let mut f = crate::exec::data_dir::private_file()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
        }
        std::fs::rename(&tmp, &path)?;
        let file = OpenOptions::new().append(true).open(&path)?;
        self.lines = self.runs.len();
        self.file = Some((path, file));
        Ok(())
    }

    /// Run `attempt` of `task` finished here.
    pub fn push(&mut self, task: TaskId, attempt: u32) {
        let at = now_s();
        self.remember((task, attempt, at));
        let Some((path, file)) = &mut self.file else {
            return;
        };
        let line = format!("{} {} {attempt} {at}\n", task.job.0, task.index);
        let written = file.write_all(line.as_bytes());
        let path = path.clone();
        match written {
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot append to the finished runs file; kept in memory only from now on");
                self.file = None;
            }
            Ok(()) => {
                self.lines += 1;
                if self.lines > 2 * KEPT {
                    if let Err(e) = self.rewrite(path.clone()) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot compact the finished runs file; kept in memory only from now on");
                        self.file = None;
                    }
                }
            }
        }
    }

    /// The runs to list to the LM: the newest [`KEPT`], at most [`MAX_AGE`] old.
    pub fn list(&self) -> Vec<(TaskId, u32)> {
        let oldest = now_s().saturating_sub(MAX_AGE.as_secs());
        self.runs
            .iter()
            .filter(|(_, _, at)| *at >= oldest)
            .map(|(task, attempt, _)| (*task, *attempt))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory of its own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!(
                "megha-finished-runs-{name}-{}-{}",
                std::process::id(),
                now_s()
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("dir");
            Dir(path)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn task(job: u64) -> TaskId {
        TaskId {
            job: JobId(job),
            index: 1,
        }
    }

    #[test]
    fn a_restarted_worker_lists_what_its_previous_life_finished() {
        let dir = Dir::new("restart");
        let mut first = FinishedRuns::open(dir.path(), "c http://lm:1 0");
        first.push(task(1), 1);
        first.push(task(2), 3);
        drop(first);
        let again = FinishedRuns::open(dir.path(), "c http://lm:1 0");
        assert_eq!(again.list(), vec![(task(1), 1), (task(2), 3)]);
        // Another owner (another LM, slot or cluster) gets nothing of it.
        let other = FinishedRuns::open(dir.path(), "c http://lm:2 0");
        assert!(other.list().is_empty());
    }

    #[test]
    fn old_torn_and_foreign_lines_are_not_listed() {
        let dir = Dir::new("old");
        let recent = now_s();
        let old = recent - MAX_AGE.as_secs() - 1;
        let text = format!("{HEADER} o\n5 1 1 {old}\n6 1 2 {recent}\n7 1\nx y z w\n");
        std::fs::write(dir.path().join("finished-runs"), text).expect("write");
        let runs = FinishedRuns::open(dir.path(), "o");
        assert_eq!(runs.list(), vec![(task(6), 2)]);
    }

    #[test]
    fn the_file_is_compacted_to_the_runs_kept() {
        let dir = Dir::new("compact");
        let mut runs = FinishedRuns::open(dir.path(), "o");
        for j in 0..(2 * KEPT as u64 + 1) {
            runs.push(task(j), 1);
        }
        let text = std::fs::read_to_string(dir.path().join("finished-runs")).expect("read");
        assert_eq!(text.lines().count(), 1 + KEPT);
        assert_eq!(runs.list().len(), KEPT);
        assert_eq!(runs.list()[0].0, task(KEPT as u64 + 1));
    }
}
