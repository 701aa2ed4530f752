//! `loadgen report`: figures and one HTML page from the output directories of
//! `loadgen simulate`, `replay` and `embedded` (see `docs/report.md`).
//!
//! - [`runs`]: reading `tasks.csv`, `summary.json` and `shares.csv` back.
//! - [`series`]: the numbers behind each figure (CDFs, component means, load over
//!   time, shares, Jain's index), pure and unit-tested.
//! - [`figures`]: drawing them as SVG (plotters); the job completion time CDF
//!   only when a run has a `jobs.csv` (not listed as missing otherwise).
//! - [`page`]: the HTML page with every figure inline and a summary table.

pub mod figures;
pub mod page;
pub mod runs;
pub mod series;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// What a report wrote.
#[derive(Debug)]
pub struct Written {
    pub page: PathBuf,
    pub figures: Vec<figures::Figure>,
    /// Figures left out, and why (e.g. no run has queues).
    pub skipped: Vec<String>,
}

/// Reads the runs under `dirs` and writes the figures and `index.html` into `out`.
pub fn report(dirs: &[PathBuf], out: &Path) -> Result<Written> {
    if dirs.is_empty() {
        bail!("give at least one run directory");
    }
    let runs = runs::find_runs(dirs)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut figures = Vec::new();
    let mut skipped = Vec::new();
    let mut keep = |what: &str, f: Option<figures::Figure>| match f {
        Some(f) => figures.push(f),
        None => skipped.push(what.to_owned()),
    };
    keep(
        "allocation-time CDF (no task started)",
        figures::allocation_cdf(&runs, out)?,
    );
    keep(
        "delay breakdown (no task has its four components)",
        figures::delay_breakdown(&runs, out)?,
    );
    keep("utilisation (no tasks)", figures::utilisation(&runs, out)?);
    for run in runs.iter().filter(|r| !r.tasks.is_empty()) {
        keep(
            &format!(
                "shares of {} (no shares.csv: run without queues)",
                run.label
            ),
            figures::shares(run, out)?,
        );
    }
    keep(
        "Jain's index (no run has queues)",
        figures::jain(&runs, out)?,
    );
    keep(
        "LRA quality (no lra_quality.csv: give the --out of loadgen lra experiment)",
        figures::lra_quality(&runs, out)?,
    );
    // Only job-level runs (`experiment carbyne`) have it: not listed as missing
    // from the task-level reports.
    if let Some(f) = figures::jct_cdf(&runs, out)? {
        figures.push(f);
    }
    let page = out.join("index.html");
    let html = page::render(&runs, &figures, &skipped)?;
    std::fs::write(&page, html).with_context(|| format!("cannot write {}", page.display()))?;
    Ok(Written {
        page,
        figures,
        skipped,
    })
}
