//! The end of a replay: write `tasks.csv` and `summary.json` (the simulator's format),
//! print the table, and judge the run: every submitted task must have finished (or
//! been reported unplaceable) and none may have started twice.

use super::driver::ReplayResult;
use crate::cli::simulate::print_table;
use crate::report::{write_run, Summary};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;

/// Writes the reports; returns `Ok(false)` (after listing them) when tasks went
/// missing, were refused or ran twice.
pub fn finish(
    result: &ReplayResult,
    scheduler: &str,
    seed: u64,
    nodes: usize,
    out: &Path,
    quiet: bool,
) -> Result<bool> {
    finish_typed(result, scheduler, "short", seed, nodes, out, quiet)
}

/// [`finish`] of a run whose tasks got types by the hybrid-GQ policy `task_types`
/// (written to summary.json).
pub fn finish_typed(
    result: &ReplayResult,
    scheduler: &str,
    task_types: &str,
    seed: u64,
    nodes: usize,
    out: &Path,
    quiet: bool,
) -> Result<bool> {
    let mut summary = Summary::new(scheduler, seed, nodes, &result.outcome, result.wall_s);
    summary.task_types = task_types.to_owned();
    write_run(out, &result.outcome.records, &summary)
        .with_context(|| format!("cannot write reports to {}", out.display()))?;
    if !quiet {
        print_table(std::slice::from_ref(&summary));
        println!("written to {}", out.display());
    }
    let mut problems = String::new();
    let mut list = |title: &str, items: &[(u64, u32)]| {
        if items.is_empty() {
            return;
        }
        let _ = writeln!(problems, "{} {title}:", items.len());
        for (job, index) in items.iter().take(100) {
            let _ = writeln!(problems, "  trace job {job} task {index}");
        }
        if items.len() > 100 {
            let _ = writeln!(problems, "  ...");
        }
    };
    list("submitted tasks never finished", &result.unfinished);
    list("tasks never accepted by a GM", &result.unsubmitted);
    list("tasks started more than once", &result.started_twice);
    for r in &result.refusals {
        let _ = writeln!(problems, "refused: {r}");
    }
    if problems.is_empty() {
        return Ok(true);
    }
    eprint!("{problems}");
    std::fs::write(out.join("problems.txt"), &problems)
        .with_context(|| format!("cannot write {}", out.join("problems.txt").display()))?;
    Ok(false)
}
