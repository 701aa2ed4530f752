//! `loadgen trace ...`: statistics, conversion to `.tr`, and the streaming benchmark.

use crate::trace::bench::{self, BenchFormat};
use crate::trace::options::{clock_seed, TraceOptionsArgs};
use crate::trace::stats::{write_csv, write_table, TraceStats};
use crate::trace::tpch::TpchArgs;
use crate::trace::tr::write_tr;
use crate::trace::{open_trace, SourceConfig, TraceFormat, TraceJob, TraceSource};
use anyhow::Context;
use common::Micros;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// Where a trace comes from and how to read it.
#[derive(Clone, Debug, clap::Args)]
pub struct InputArgs {
    /// The trace file.
    pub input: PathBuf,
    /// Its format.
    #[arg(long, value_enum, default_value = "tr")]
    pub format: TraceFormat,
    /// MiB that a normalised memory of 100 (Alibaba) or 1.0 (Google) stands for
    /// [default: 65536 for Alibaba, 262144 for Google].
    #[arg(long, value_name = "MIB")]
    pub machine_memory_mb: Option<u64>,
    /// Millicores that a normalised Google `cpus` of 1.0 stands for.
    #[arg(long, value_name = "MILLIS", default_value_t = 64_000)]
    pub machine_cpu_millis: u64,
    /// Google: the most jobs held open at once (the oldest is flushed beyond it).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_open_jobs: usize,
    #[command(flatten)]
    pub options: TraceOptionsArgs,
    #[command(flatten)]
    pub tpch: TpchArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// Jobs, tasks, arrival rate, task-duration percentiles and demand over time.
    Stats {
        #[command(flatten)]
        input: InputArgs,
        /// Cluster size in worker slots, to show demand as a share of it.
        #[arg(long, value_name = "N")]
        cluster_slots: Option<u64>,
        /// Width of a time bucket in seconds.
        #[arg(long, value_name = "S", default_value_t = 60.0)]
        bucket_secs: f64,
        /// Also write the full time series here as CSV.
        #[arg(long, value_name = "OUT")]
        csv: Option<PathBuf>,
    },
    /// Converts a trace to `.tr` (durations only).
    Convert {
        #[command(flatten)]
        input: InputArgs,
        /// The `.tr` file to write.
        #[arg(long, value_name = "OUT.tr")]
        out: PathBuf,
    },
    /// Streams synthetic files of N/10 and N rows; prints rows/s and peak RSS.
    BenchStream {
        #[arg(long, value_name = "N", default_value_t = 1_000_000)]
        rows: u64,
        #[arg(long, value_enum, default_value = "alibaba-instance")]
        format: BenchFormat,
    },
}

pub fn run(cmd: TraceCommand) -> anyhow::Result<()> {
    match cmd {
        TraceCommand::Stats {
            input,
            cluster_slots,
            bucket_secs,
            csv,
        } => {
            anyhow::ensure!(
                bucket_secs.is_finite() && bucket_secs > 0.0,
                "--bucket-secs: must be a number of seconds > 0"
            );
            anyhow::ensure!(
                cluster_slots != Some(0),
                "--cluster-slots: must be at least 1"
            );
            let mut stats = TraceStats::new(Micros::from_secs_f64(bucket_secs), cluster_slots);
            for_each_job(&input, |job| Ok(stats.add(job)?))?;
            let stdout = std::io::stdout();
            write_table(&stats, &mut stdout.lock())?;
            if let Some(path) = csv {
                let mut out = BufWriter::new(create(&path)?);
                write_csv(&stats, &mut out)?;
                out.flush()?;
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
        TraceCommand::Convert { input, out } => {
            let mut writer = BufWriter::new(create(&out)?);
            for_each_job(&input, |job| Ok(write_tr(&mut writer, job)?))?;
            writer.flush()?;
            eprintln!("wrote {}", out.display());
            Ok(())
        }
        TraceCommand::BenchStream { rows, format } => bench_stream(rows, format),
    }
}

fn create(path: &PathBuf) -> anyhow::Result<File> {
    File::create(path).with_context(|| format!("cannot create {}", path.display()))
}

/// Opens the input, applies the options and calls `f` on each job; prints the
/// options and the reader's report on stderr.
fn for_each_job(
    input: &InputArgs,
    mut f: impl FnMut(&TraceJob) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let options = input.options.clone().into_options(clock_seed())?;
    eprintln!("trace options: {}", options.describe());
    let mut cfg = SourceConfig {
        tpch: tpch_config(input.format, &input.tpch, clock_seed())?,
        ..SourceConfig::default()
    };
    if let Some(mb) = input.machine_memory_mb {
        cfg.alibaba.machine_memory_mb = mb;
        cfg.google.machine_memory_mb = mb;
    }
    cfg.google.machine_cpu_millis = input.machine_cpu_millis;
    cfg.google.max_open_jobs = input.max_open_jobs;
    let mut source: Box<dyn TraceSource> =
        open_trace(&input.input, input.format, &cfg).map_err(|e| e.given_by("INPUT"))?;
    for job in options.apply(source.by_ref())? {
        f(&job?)?;
    }
    eprint!("{}", source.report());
    if source.report().limit_for("job rows not contiguous") > 0 {
        eprintln!("note: sort the file by job_name (sort -t, -k3,3 -s) to keep each job whole");
    }
    Ok(())
}

/// The TPC-H draw for `--format tpch` (its seed, `default_seed` without --tpch-seed,
/// is printed with the reader's report); the `--tpch-*` flags are refused with
/// another format.
pub fn tpch_config(
    format: TraceFormat,
    tpch: &TpchArgs,
    default_seed: u64,
) -> anyhow::Result<crate::trace::tpch::TpchConfig> {
    if format != TraceFormat::Tpch {
        anyhow::ensure!(
            !tpch.any_given(),
            "the --tpch-* flags are only meaningful with --format tpch"
        );
        return Ok(Default::default());
    }
    Ok(tpch.clone().into_config(default_seed)?)
}

fn bench_stream(rows: u64, format: BenchFormat) -> anyhow::Result<()> {
    anyhow::ensure!(rows >= 10, "--rows: must be at least 10");
    let sizes = [rows / 10, rows];
    let results = sizes
        .iter()
        .map(|&n| bench::run(format, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "{:>12} {:>10} {:>10} {:>9} {:>8} {:>12} {:>13}",
        "rows", "jobs", "tasks", "file_MB", "secs", "rows/s", "peak_RSS_MiB"
    );
    for r in &results {
        let rss = r
            .peak_rss_kib
            .map_or("n/a".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0));
        println!(
            "{:>12} {:>10} {:>10} {:>9.1} {:>8.2} {:>12.0} {:>13}",
            r.rows, r.jobs, r.tasks, r.file_mb, r.secs, r.rows_per_sec, rss
        );
    }
    if results.iter().any(|r| !r.peak_reset) {
        println!("(peak RSS could not be reset between runs: it is the process's running peak)");
    }
    Ok(())
}
