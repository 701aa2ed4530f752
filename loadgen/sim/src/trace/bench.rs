//! The streaming benchmark behind `loadgen trace bench-stream`: generate a synthetic
//! file, stream it through a reader, and report rows per second and the peak resident
//! memory, so that flat memory across sizes can be seen rather than assumed.

use super::synth::{write_alibaba_instances, write_google_events, SynthSummary};
use super::{open_trace, SourceConfig, TraceFormat};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

/// The formats the benchmark can generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchFormat {
    AlibabaInstance,
    GoogleCsv,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    pub rows: u64,
    pub jobs: u64,
    pub tasks: u64,
    pub file_mb: f64,
    pub secs: f64,
    pub rows_per_sec: f64,
    /// Peak resident set (VmHWM) while streaming, in KiB; `None` off Linux.
    pub peak_rss_kib: Option<u64>,
    /// Whether the peak was reset before streaming (else it is the process's peak).
    pub peak_reset: bool,
}

/// VmHWM from `/proc/self/status`, in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets VmHWM to the current RSS (Linux: write 5 to clear_refs).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Generates `rows` rows of `format` in a temporary file, streams it and measures.
pub fn run(format: BenchFormat, rows: u64) -> anyhow::Result<BenchResult> {
    let path =
        std::env::temp_dir().join(format!("loadgen-bench-{}-{rows}.csv", std::process::id()));
    let result = generate_and_stream(format, rows, &path);
    let _ = std::fs::remove_file(&path);
    result
}

fn generate_and_stream(
    format: BenchFormat,
    rows: u64,
    path: &PathBuf,
) -> anyhow::Result<BenchResult> {
    let mut out = BufWriter::new(File::create(path)?);
    let summary: SynthSummary = match format {
        BenchFormat::AlibabaInstance => write_alibaba_instances(&mut out, rows)?,
        BenchFormat::GoogleCsv => write_google_events(&mut out, rows)?,
    };
    out.flush()?;
    drop(out);
    let file_mb = std::fs::metadata(path)?.len() as f64 / 1e6;
    let trace_format = match format {
        BenchFormat::AlibabaInstance => TraceFormat::AlibabaInstance,
        BenchFormat::GoogleCsv => TraceFormat::GoogleCsv,
    };
    let peak_reset = reset_peak();
    let started = Instant::now();
    let mut source = open_trace(path, trace_format, &SourceConfig::default())?;
    let (mut jobs, mut tasks) = (0u64, 0u64);
    for job in source.by_ref() {
        let job = job?;
        jobs += 1;
        tasks += job.tasks.len() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        jobs == summary.jobs && tasks == summary.tasks,
        "streamed {jobs} jobs / {tasks} tasks, generator wrote {} / {}",
        summary.jobs,
        summary.tasks
    );
    Ok(BenchResult {
        rows: source.report().records,
        jobs,
        tasks,
        file_mb,
        secs,
        rows_per_sec: summary.rows as f64 / secs.max(1e-9),
        peak_rss_kib: peak_rss_kib(),
        peak_reset,
    })
}
