//! What a reader did with its input: how many records it read, which it dropped and
//! why, which it kept with a caveat, and any limits it hit. Readers never drop or
//! patch a record silently; they count it here under a short category.

use std::collections::BTreeMap;
use std::fmt;

/// Counters a reader fills while streaming. Categories are short, bounded strings
/// such as `"status: Failed"` or `"plan_mem: 101 (resources unknown)"`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Input records read (lines, CSV rows or events), excluding headers and comments.
    pub records: u64,
    /// Jobs and tasks handed to the caller.
    pub jobs: u64,
    pub tasks: u64,
    /// Records (or tasks, or jobs) dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Records kept with something missing or patched, by reason.
    pub caveats: BTreeMap<String, u64>,
    /// Ordering or memory-bound problems (e.g. a job's rows not contiguous, the cap on
    /// open jobs hit), by kind.
    pub limits: BTreeMap<String, u64>,
    /// Mappings the reader invented (e.g. Google constraints to ids), one per line.
    pub mappings: Vec<String>,
}

impl ReadReport {
    pub fn drop(&mut self, reason: impl Into<String>) {
        *self.dropped.entry(reason.into()).or_default() += 1;
    }

    pub fn caveat(&mut self, reason: impl Into<String>) {
        *self.caveats.entry(reason.into()).or_default() += 1;
    }

    pub fn limit(&mut self, kind: impl Into<String>) {
        *self.limits.entry(kind.into()).or_default() += 1;
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// The count under `reason` in `dropped`, 0 if none.
    pub fn dropped_for(&self, reason: &str) -> u64 {
        self.dropped.get(reason).copied().unwrap_or(0)
    }

    pub fn caveat_for(&self, reason: &str) -> u64 {
        self.caveats.get(reason).copied().unwrap_or(0)
    }

    pub fn limit_for(&self, kind: &str) -> u64 {
        self.limits.get(kind).copied().unwrap_or(0)
    }
}

impl fmt::Display for ReadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "read {} records -> {} jobs, {} tasks",
            self.records, self.jobs, self.tasks
        )?;
        let sections = [
            ("dropped", &self.dropped),
            ("kept with caveat", &self.caveats),
            ("ordering / memory limits", &self.limits),
        ];
        for (title, map) in sections {
            if map.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for (reason, n) in map {
                writeln!(f, "  {n:>10}  {reason}")?;
            }
        }
        if !self.mappings.is_empty() {
            writeln!(f, "mappings:")?;
            for m in &self.mappings {
                writeln!(f, "  {m}")?;
            }
        }
        Ok(())
    }
}
