//! The replay's event log, `DIR/events.jsonl`: every task event received, in the
//! order received (duplicates dropped), in trace coordinates. `tasks.csv` sums a
//! task up by its last attempt (its node, start and finish); the log shows each run.

use anyhow::{Context as _, Result};
use common::events::TaskEventKind;
use std::io::Write as _;
use std::path::Path;

/// One event as the replay received it: a line of `events.jsonl`. Times are seconds
/// since the replay started, as in `tasks.csv`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoggedEvent {
    /// The trace job (as in `tasks.csv`).
    pub job: u64,
    pub task: u32,
    pub at_s: f64,
    #[serde(flatten)]
    pub kind: TaskEventKind,
}

/// Writes `events` to `DIR/events.jsonl`, one JSON object a line.
pub fn write(out: &Path, events: &[LoggedEvent]) -> Result<()> {
    let path = out.join("events.jsonl");
    let file =
        std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    for e in events {
        serde_json::to_writer(&mut w, e)?;
        w.write_all(b"\n")?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}
