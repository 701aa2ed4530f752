//! The end of a replay: write `tasks.csv` and `summary.json` (the simulator's format;
//! with user queues also `shares.csv` and Jain's index), print the table, and judge
//! the run: every submitted task must have finished (or been reported unplaceable)
//! and none may have started twice.

use super::driver::ReplayResult;
use anyhow::{Context, Result};
use common::fairness::FairnessConfig;
use common::Micros;
use megha_sim::cli::simulate::print_table;
use megha_sim::report::{write_run, Summary};
use std::fmt::Write as _;
use std::path::Path;

/// How a replay is reported.
#[derive(Clone, Copy, Debug)]
pub struct ReportOptions<'a> {
    pub scheduler: &'a str,
    /// The hybrid-GQ policy that typed the tasks (written to summary.json).
    pub task_types: &'a str,
    pub seed: u64,
    /// Nodes for the summary; 0: as the GMs reported them ([`ReplayResult::facts`]).
    pub nodes: usize,
    pub out: &'a Path,
    pub quiet: bool,
    /// The run's user queues and the fairness window (replay time): per-queue shares
    /// in `shares.csv` and Jain's index in summary.json.
    pub queues: Option<(&'a FairnessConfig, Micros)>,
}

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
    finish_with(
        result,
        &ReportOptions {
            scheduler,
            task_types: "short",
            seed,
            nodes,
            out,
            quiet,
            queues: None,
        },
    )
}

/// [`finish`] with every reporting option.
pub fn finish_with(result: &ReplayResult, o: &ReportOptions) -> Result<bool> {
    let facts = &result.facts;
    let nodes = if o.nodes > 0 { o.nodes } else { facts.nodes };
    let mut summary = Summary::new(o.scheduler, o.seed, nodes, &result.outcome, result.wall_s);
    summary.task_types = o.task_types.to_owned();
    summary.preempt_attempts = facts.preempt_attempts;
    summary.preempt_refused = facts.preempt_refused;
    if let Some((queues, window)) = o.queues {
        if facts.capacity.any_zero() {
            eprintln!(
                "warning: no GM reported the cluster's capacity; no shares.csv or fairness index"
            );
        } else {
            let fair =
                megha_sim::fairness::report(o.out, queues, facts.capacity, &result.outcome, window)
                    .with_context(|| format!("cannot write shares.csv to {}", o.out.display()))?;
            summary.fairness = Some(fair);
        }
    }
    write_run(o.out, &result.outcome, &summary)
        .with_context(|| format!("cannot write reports to {}", o.out.display()))?;
    super::event_log::write(o.out, &result.events)?;
    if !o.quiet {
        print_table(std::slice::from_ref(&summary));
        println!("written to {}", o.out.display());
    }
    let out = o.out;
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
