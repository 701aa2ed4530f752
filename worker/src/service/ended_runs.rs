//! The runs this worker ended recently (finished or failed, with their end times),
//! listed to its LM when it registers again (`WorkerRegistration::ended`), and kept
//! in a file of its data dir so that a worker that restarted still lists them.
//!
//! Why: a run's end travels worker -> LM -> GM. If the LM crashes while the end
//! waits in its stream to the GM (the GM is down or cut off), the end dies with the
//! LM; a restarted LM asked by the GM then knows nothing of the run and reports it
//! lost, and the GM runs the task again. The worker's list tells the restarted LM
//! how the run ended: a finish ends the task finished; a failure reaches the GM
//! with its cause, and the job's retry policy decides (before issue 33 failures
//! were not listed: `loadgen faults --seeds 1000000 --jobs 2` at 59328e5 recorded
//! 2,414 tasks whose end died with an LM; none at 0321966). The restarted LM re-announces each end once, at its real
//! end time (kept in microseconds), marked `reannounced`. Kept only in memory, the
//! list died too when the worker crashed as well: `loadgen faults` counted 14 tasks
//! in 3,000 seeds that ran twice or ended twice so; with the list kept across
//! worker restarts, 2.
//!
//! The file (`ended-runs` in the data dir) names its owner on its first line
//! (cluster name, LM URL, slot): another owner's list is ignored, never listed to
//! this LM. Each further line is one end, as JSON. Entries older than [`MAX_AGE`]
//! are not listed: a GM's doubt about a batch and its reconcile with a restarted
//! LM end well before, and a cluster started afresh (its job numbers from 1 again)
//! must not find a task "finished" by a run of its previous incarnation. The file
//! of an older worker (`finished-runs`, finishes only, in whole seconds) is read
//! when there is no `ended-runs` yet. Appends are single `write` calls without
//! `fsync`: they survive the worker's crash, not its host's.

use common::messages::TaskEnd;
use common::{JobId, Micros, NodeId, TaskId};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How many ended runs are remembered (the newest).
pub const KEPT: usize = 10_000;

/// How long an ended run is listed after it ended.
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

const HEADER: &str = "megha-ended-runs v2";
const FILE: &str = "ended-runs";
/// The file and header of workers before issue 33: finishes only, in seconds.
const OLD_HEADER: &str = "megha-finished-runs v1";
const OLD_FILE: &str = "finished-runs";

#[derive(Debug)]
pub struct EndedRuns {
    runs: VecDeque<TaskEnd>,
    /// The file, appended to; `None`: in memory only (embedded mode, tests, or the
    /// file could not be written: logged).
    file: Option<(PathBuf, File)>,
    /// The owner line of the file.
    owner: String,
    /// Lines in the file: compacted to [`KEPT`] past twice that.
    lines: usize,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn oldest_listed() -> Micros {
    Micros(now_us().saturating_sub(MAX_AGE.as_micros() as u64))
}

impl EndedRuns {
    /// A memory that dies with the process.
    pub fn in_memory() -> Self {
        EndedRuns {
            runs: VecDeque::new(),
            file: None,
            owner: String::new(),
            lines: 0,
        }
    }

    /// The memory kept in `dir/ended-runs` for `owner` (cluster, LM URL and slot):
    /// what an earlier life of this worker wrote there (or in an older worker's
    /// `finished-runs`), if it was the same owner's. A file that cannot be read or
    /// written is logged and the memory kept in memory only.
    pub fn open(dir: &Path, owner: &str) -> Self {
        let path = dir.join(FILE);
        let owner = owner.replace('\n', " ");
        let mut runs = EndedRuns {
            owner,
            ..EndedRuns::in_memory()
        };
        let old = dir.join(OLD_FILE);
        let read = std::fs::read_to_string(&path).map(|text| (text, path.clone()));
        let read = match read {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::read_to_string(&old).map(|text| (text, old.clone()))
            }
            other => other,
        };
        match read {
            Ok((text, from)) => runs.read(&text, &from),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read the ended runs of this worker's previous life; starting without them")
            }
        }
        match runs.rewrite(path.clone()) {
            Ok(()) => {
                let _ = std::fs::remove_file(&old);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot write the ended runs file; a restart of this worker will forget them")
            }
        }
        runs
    }

    /// Takes the runs of `text` if it is this owner's file.
    fn read(&mut self, text: &str, path: &Path) {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        let (owner, old) = match (header.strip_prefix(HEADER), header.strip_prefix(OLD_HEADER)) {
            (Some(owner), _) => (owner.trim(), false),
            (None, Some(owner)) => (owner.trim(), true),
            (None, None) => {
                tracing::warn!(path = %path.display(), "not an ended runs file; ignored");
                return;
            }
        };
        if owner != self.owner {
            tracing::info!(path = %path.display(), file = owner, this = %self.owner, "ended runs of another cluster, LM or slot; ignored");
            return;
        }
        let oldest = oldest_listed();
        for line in lines {
            // A line cut short by a crash mid-write is skipped.
            let end = if old {
                old_line(line)
            } else {
                serde_json::from_str(line).ok()
            };
            if let Some(end) = end.filter(|e: &TaskEnd| e.at >= oldest) {
                self.remember(end);
            }
        }
        if !self.runs.is_empty() {
            tracing::info!(
                runs = self.runs.len(),
                "ended runs of this worker's previous life; listed to the LM"
            );
        }
    }

    fn remember(&mut self, run: TaskEnd) {
        if self.runs.len() == KEPT {
            self.runs.pop_front();
        }
        self.runs.push_back(run);
    }

    /// Writes the file anew with the runs remembered, then appends to it.
    fn rewrite(&mut self, path: PathBuf) -> std::io::Result<()> {
        let mut text = format!("{HEADER} {}\n", self.owner);
        for end in &self.runs {
            text.push_str(&line(end));
        }
        let tmp = path.with_extension("tmp");
        // The worker's only (0600), never written through a link planted there.
        {
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

    /// Runs that ended here (finished, or failed with `end.failure`).
    pub fn extend(&mut self, ends: impl IntoIterator<Item = TaskEnd>) {
        for end in ends {
            self.push(end);
        }
    }

    /// A run ended here (finished, or failed with `end.failure`).
    pub fn push(&mut self, end: TaskEnd) {
        let line = line(&end);
        self.remember(end);
        let Some((path, file)) = &mut self.file else {
            return;
        };
        let written = file.write_all(line.as_bytes());
        let path = path.clone();
        match written {
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot append to the ended runs file; kept in memory only from now on");
                self.file = None;
            }
            Ok(()) => {
                self.lines += 1;
                if self.lines > 2 * KEPT {
                    if let Err(e) = self.rewrite(path.clone()) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot compact the ended runs file; kept in memory only from now on");
                        self.file = None;
                    }
                }
            }
        }
    }

    /// The runs to list to the LM: the newest [`KEPT`], at most [`MAX_AGE`] old.
    pub fn list(&self) -> Vec<TaskEnd> {
        let oldest = oldest_listed();
        self.runs
            .iter()
            .filter(|end| end.at >= oldest)
            .cloned()
            .collect()
    }
}

/// One end as a line of the file.
fn line(end: &TaskEnd) -> String {
    let mut line = serde_json::to_string(end).unwrap_or_default();
    line.push('\n');
    line
}

/// A line of an older worker's `finished-runs`: `job index attempt seconds`, a
/// finish on an unrecorded node.
fn old_line(line: &str) -> Option<TaskEnd> {
    let fields: Vec<u64> = line
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [job, index, attempt, at] = fields[..] else {
        return None;
    };
    Some(TaskEnd {
        used: None,
        task: TaskId {
            job: JobId(job),
            index: u32::try_from(index).ok()?,
        },
        attempt: u32::try_from(attempt).ok()?,
        node: NodeId(0),
        at: Micros(at.saturating_mul(1_000_000)),
        failure: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::TaskFailure;

    /// A fresh directory of its own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!(
                "megha-ended-runs-{name}-{}-{}",
                std::process::id(),
                now_us()
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

    fn end(job: u64, attempt: u32, at: u64, failure: Option<TaskFailure>) -> TaskEnd {
        TaskEnd {
            used: None,
            task: TaskId {
                job: JobId(job),
                index: 1,
            },
            attempt,
            node: NodeId(2),
            at: Micros(at),
            failure,
        }
    }

    #[test]
    fn a_restarted_worker_lists_what_its_previous_life_ended_with_real_times() {
        let dir = Dir::new("restart");
        let t = now_us();
        let failed = end(2, 3, t + 7, Some(TaskFailure::Exit { code: 4 }));
        let mut first = EndedRuns::open(dir.path(), "c http://lm:1 0");
        first.push(end(1, 1, t + 1, None));
        first.push(failed.clone());
        drop(first);
        let again = EndedRuns::open(dir.path(), "c http://lm:1 0");
        // Microseconds, node and failure kept.
        assert_eq!(again.list(), vec![end(1, 1, t + 1, None), failed]);
        // Another owner (another LM, slot or cluster) gets nothing of it.
        let other = EndedRuns::open(dir.path(), "c http://lm:2 0");
        assert!(other.list().is_empty());
    }

    #[test]
    fn old_torn_and_foreign_lines_are_not_listed() {
        let dir = Dir::new("old");
        let recent = now_us();
        let old = recent - MAX_AGE.as_micros() as u64 - 1;
        let text = format!(
            "{HEADER} o\n{}{}{{\"task\":\nx y z w\n",
            line(&end(5, 1, old, None)),
            line(&end(6, 2, recent, None))
        );
        std::fs::write(dir.path().join(FILE), text).expect("write");
        let runs = EndedRuns::open(dir.path(), "o");
        assert_eq!(runs.list(), vec![end(6, 2, recent, None)]);
    }

    #[test]
    fn an_older_workers_finished_runs_are_taken_over_once() {
        let dir = Dir::new("upgrade");
        let s = now_us() / 1_000_000;
        let text = format!("{OLD_HEADER} o\n6 1 2 {s}\n7 1\n");
        std::fs::write(dir.path().join(OLD_FILE), text).expect("write");
        let runs = EndedRuns::open(dir.path(), "o");
        let mut want = end(6, 2, s * 1_000_000, None);
        want.node = NodeId(0);
        assert_eq!(runs.list(), vec![want.clone()]);
        assert!(
            !dir.path().join(OLD_FILE).exists(),
            "the old file is replaced"
        );
        assert_eq!(EndedRuns::open(dir.path(), "o").list(), vec![want]);
    }

    /// Links planted at the file and at its temporary name (by whoever can write
    /// the data dir) are replaced, never written through: the files they point
    /// to are untouched.
    #[test]
    fn links_planted_in_the_data_dir_are_not_written_through() {
        let dir = Dir::new("links");
        let outside = Dir::new("outside");
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep me\n").expect("victim");
        for name in [FILE, "ended-runs.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).expect("link");
        }
        let mut runs = EndedRuns::open(dir.path(), "o");
        runs.push(end(1, 1, now_us(), None));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        let file = dir.path().join(FILE);
        assert!(!std::fs::symlink_metadata(&file)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(EndedRuns::open(dir.path(), "o").list().len(), 1);
    }

    #[test]
    fn the_file_is_compacted_to_the_runs_kept() {
        let dir = Dir::new("compact");
        let t = now_us();
        let mut runs = EndedRuns::open(dir.path(), "o");
        for j in 0..(2 * KEPT as u64 + 1) {
            runs.push(end(j, 1, t, None));
        }
        let text = std::fs::read_to_string(dir.path().join(FILE)).expect("read");
        assert_eq!(text.lines().count(), 1 + KEPT);
        assert_eq!(runs.list().len(), KEPT);
        assert_eq!(runs.list()[0].task.job, JobId(KEPT as u64 + 1));
    }

    #[test]
    fn a_record_of_a_worker_before_usage_reads_with_none() {
        let line = r#"{"task":{"job":5,"index":1},"attempt":2,"node":3,"at":77,"failure":null}"#;
        let end: TaskEnd = serde_json::from_str(line).expect("an older record reads");
        assert_eq!((end.attempt, end.used), (2, None));
    }
}
