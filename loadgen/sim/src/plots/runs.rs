//! Reading runs back: the `tasks.csv`, `summary.json` and (with queues) `shares.csv`
//! that `loadgen simulate --out`, `loadgen replay` and `loadgen embedded` write, and
//! the `jobs.csv` (job completion times) of `loadgen experiment carbyne`.
//! Columns are found by name, so a file with extra or reordered columns still reads.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// One task of `tasks.csv` (times in seconds; `None` for a task that never started).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub arrival_s: f64,
    pub start_s: Option<f64>,
    pub finish_s: Option<f64>,
    pub allocation_s: Option<f64>,
    /// Framework queuing, processing, worker queuing, communication (Megha III).
    pub components_s: Option<[f64; 4]>,
}

/// One row of `shares.csv`: a queue's share in one window.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareRow {
    pub window_start_s: f64,
    pub queue: String,
    pub entitled: f64,
    pub used: f64,
    pub normalised: f64,
}

/// One row of `lra_quality.csv` (`loadgen lra experiment --out`).
#[derive(Clone, Debug, PartialEq)]
pub struct LraRow {
    pub placer: String,
    pub utilisation_pct: f64,
    pub violation_pct: f64,
    pub fragmentation_pct: f64,
}

/// A run directory read back.
#[derive(Clone, Debug)]
pub struct Run {
    /// Its name on the plots (the directory's name, made unique).
    pub label: String,
    pub dir: PathBuf,
    pub tasks: Vec<TaskRow>,
    /// `summary.json`, when present.
    pub summary: Option<serde_json::Value>,
    /// `shares.csv` rows (empty without queues).
    pub shares: Vec<ShareRow>,
    /// `lra_quality.csv` rows (empty unless an LRA experiment wrote them).
    pub lra: Vec<LraRow>,
    /// Job completion times, seconds, of the jobs that finished (`jobs.csv`,
    /// column `jct_s`; empty without one).
    pub jct_s: Vec<f64>,
}

impl Run {
    /// Nodes of the cluster, from `summary.json`.
    pub fn nodes(&self) -> Option<f64> {
        self.summary.as_ref()?.get("nodes")?.as_f64()
    }
}

/// The runs under `dirs`: a directory with a `tasks.csv` (or an `lra_quality.csv`)
/// is one run; one without is searched one level down (`simulate --scheduler megha,sparrow` writes one
/// sub-directory per scheduler).
pub fn find_runs(dirs: &[PathBuf]) -> Result<Vec<Run>> {
    let mut found = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            bail!("{}: not a directory", dir.display());
        }
        if is_run(dir) {
            found.push(dir.clone());
            continue;
        }
        let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_run(p))
            .collect();
        if subs.is_empty() {
            bail!(
                "{}: no tasks.csv (or jobs.csv) in it or in its sub-directories (give the --out directory of loadgen simulate or replay, or a load's directory of loadgen experiment carbyne)",
                dir.display()
            );
        }
        subs.sort();
        found.extend(subs);
    }
    let mut runs: Vec<Run> = Vec::new();
    for dir in found {
        let mut run = read_run(&dir)?;
        let base = run.label.clone();
        let mut n = 2;
        while runs.iter().any(|r| r.label == run.label) {
            run.label = format!("{base}-{n}");
            n += 1;
        }
        runs.push(run);
    }
    Ok(runs)
}

fn is_run(dir: &Path) -> bool {
    ["tasks.csv", "lra_quality.csv", "jobs.csv"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

fn read_run(dir: &Path) -> Result<Run> {
    let label = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let tasks_path = dir.join("tasks.csv");
    let tasks = if tasks_path.is_file() {
        read_tasks(&tasks_path)?
    } else {
        Vec::new()
    };
    let summary = match std::fs::read_to_string(dir.join("summary.json")) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not JSON", dir.join("summary.json").display()))?,
        ),
        Err(_) => None,
    };
    let shares_path = dir.join("shares.csv");
    let shares = if shares_path.is_file() {
        read_shares(&shares_path)?
    } else {
        Vec::new()
    };
    let lra_path = dir.join("lra_quality.csv");
    let lra = if lra_path.is_file() {
        read_lra(&lra_path)?
    } else {
        Vec::new()
    };
    let jobs_path = dir.join("jobs.csv");
    let jct_s = if jobs_path.is_file() {
        read_jct(&jobs_path)?
    } else {
        Vec::new()
    };
    Ok(Run {
        label,
        dir: dir.to_owned(),
        tasks,
        summary,
        shares,
        lra,
        jct_s,
    })
}

/// Column indexes by name; an error names the file and the missing column.
struct Columns<'a> {
    path: &'a Path,
    headers: csv::StringRecord,
}

impl Columns<'_> {
    fn index(&self, name: &str) -> Result<usize> {
        self.headers.iter().position(|h| h == name).ok_or_else(|| {
            anyhow!(
                "{}: no `{name}` column (header: {})",
                self.path.display(),
                self.headers.iter().collect::<Vec<_>>().join(",")
            )
        })
    }
}

fn number(path: &Path, line: u64, column: &str, raw: &str) -> Result<Option<f64>> {
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse().map(Some).map_err(|_| {
        anyhow!(
            "{}, line {line}: `{column}` is `{raw}`, not a number",
            path.display()
        )
    })
}

/// Reads `path` row by row: the numbers of the `numbers` columns (`None` when empty)
/// and the text of the `text` column, handed to `build` with the line number.
fn read_rows<T>(
    path: &Path,
    numbers: &[&str],
    text: Option<&str>,
    mut build: impl FnMut(u64, &[Option<f64>], String) -> Result<T>,
) -> Result<Vec<T>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let columns = Columns {
        path,
        headers: reader.headers()?.clone(),
    };
    let index: Vec<usize> = numbers
        .iter()
        .map(|n| columns.index(n))
        .collect::<Result<_>>()?;
    let text = text.map(|t| columns.index(t)).transpose()?;
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("cannot read {}", path.display()))?;
        let line = i as u64 + 2;
        let v: Vec<Option<f64>> = numbers
            .iter()
            .zip(&index)
            .map(|(n, &c)| number(path, line, n, record.get(c).unwrap_or("")))
            .collect::<Result<_>>()?;
        let label = text.and_then(|c| record.get(c)).unwrap_or("").to_owned();
        rows.push(build(line, &v, label)?);
    }
    Ok(rows)
}

/// The numbers of a row, every one required.
fn required(path: &Path, line: u64, names: &[&str], v: &[Option<f64>]) -> Result<Vec<f64>> {
    names
        .iter()
        .zip(v)
        .map(|(n, x)| x.ok_or_else(|| anyhow!("{}, line {line}: `{n}` is empty", path.display())))
        .collect()
}

pub fn read_tasks(path: &Path) -> Result<Vec<TaskRow>> {
    let names = [
        "arrival_s",
        "start_s",
        "finish_s",
        "allocation_s",
        "framework_queuing_s",
        "processing_s",
        "worker_queuing_s",
        "communication_s",
    ];
    read_rows(path, &names, None, |line, v, _| {
        let arrival_s = required(path, line, &names[..1], &v[..1])?[0];
        let components_s = match (v[4], v[5], v[6], v[7]) {
            (Some(a), Some(b), Some(c), Some(d)) => Some([a, b, c, d]),
            _ => None,
        };
        Ok(TaskRow {
            arrival_s,
            start_s: v[1],
            finish_s: v[2],
            allocation_s: v[3],
            components_s,
        })
    })
}

/// The completion times of `jobs.csv` (an empty `jct_s`: a job that did not finish).
pub fn read_jct(path: &Path) -> Result<Vec<f64>> {
    let rows = read_rows(path, &["jct_s"], None, |_, v, _| Ok(v[0]))?;
    Ok(rows.into_iter().flatten().collect())
}

pub fn read_shares(path: &Path) -> Result<Vec<ShareRow>> {
    let names = [
        "window_start_s",
        "entitled_share",
        "used_share",
        "normalised",
    ];
    read_rows(path, &names, Some("name"), |line, v, queue| {
        let v = required(path, line, &names, v)?;
        Ok(ShareRow {
            window_start_s: v[0],
            queue,
            entitled: v[1],
            used: v[2],
            normalised: v[3],
        })
    })
}

pub fn read_lra(path: &Path) -> Result<Vec<LraRow>> {
    let names = ["utilisation_pct", "violation_pct", "fragmentation_pct"];
    read_rows(path, &names, Some("placer"), |line, v, placer| {
        let v = required(path, line, &names, v)?;
        Ok(LraRow {
            placer,
            utilisation_pct: v[0],
            violation_pct: v[1],
            fragmentation_pct: v[2],
        })
    })
}
