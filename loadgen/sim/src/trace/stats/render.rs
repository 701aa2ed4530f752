//! Rendering [`TraceStats`]: a text table for people, a CSV time series for plots.

use super::{Bucket, DagStats, TraceStats};
use std::io::{self, Write};

/// The most time rows in the text table; longer series are merged into wider rows.
pub const TABLE_ROWS: usize = 40;

const QUANTILES: [(&str, f64); 6] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// One row of the time series: `[start, end)` seconds and the averages over it.
struct Row {
    start_s: f64,
    end_s: f64,
    jobs: u64,
    tasks: u64,
    slots: f64,
    cores: f64,
    gib: f64,
}

fn rows(stats: &TraceStats, merge: usize) -> Vec<Row> {
    let width = stats.bucket.as_secs_f64();
    stats
        .buckets()
        .chunks(merge.max(1))
        .enumerate()
        .map(|(i, chunk)| {
            let span = width * chunk.len() as f64;
            let sum = |f: fn(&Bucket) -> f64| chunk.iter().map(f).sum::<f64>() / span;
            Row {
                start_s: i as f64 * width * merge.max(1) as f64,
                end_s: i as f64 * width * merge.max(1) as f64 + span,
                jobs: chunk.iter().map(|b| b.jobs).sum(),
                tasks: chunk.iter().map(|b| b.tasks).sum(),
                slots: sum(|b| b.slot_secs),
                cores: sum(|b| b.core_secs),
                gib: sum(|b| b.gib_secs),
            }
        })
        .collect()
}

/// Summary, duration percentiles and a time table of at most [`TABLE_ROWS`] rows.
pub fn write_table<W: Write>(stats: &TraceStats, out: &mut W) -> io::Result<()> {
    let first = stats.first_arrival.unwrap_or_default();
    let span = stats.last_arrival.since(first).as_secs_f64();
    writeln!(out, "jobs                 {}", stats.jobs)?;
    writeln!(out, "tasks                {}", stats.tasks)?;
    writeln!(
        out,
        "tasks w/o resources  {}",
        stats.tasks_without_resources
    )?;
    writeln!(
        out,
        "arrivals             {first} .. {} ({span:.0} s)",
        stats.last_arrival
    )?;
    if span > 0.0 {
        writeln!(
            out,
            "mean arrival rate    {:.4} jobs/s",
            stats.jobs as f64 / span
        )?;
    }
    let h = &stats.durations;
    writeln!(
        out,
        "task duration (s)    min {:.3}  mean {:.3}",
        h.min().as_secs_f64(),
        h.mean().as_secs_f64()
    )?;
    for (name, q) in QUANTILES {
        writeln!(out, "  {name:<6} {:>14.3}", h.quantile(q).as_secs_f64())?;
    }
    write_dags(&stats.dags, out)?;
    let n = stats.buckets().len();
    let merge = n.div_ceil(TABLE_ROWS).max(1);
    writeln!(
        out,
        "\ndemand over time (averages per {:.0} s row; slots = tasks running if started on arrival)",
        stats.bucket.as_secs_f64() * merge as f64
    )?;
    write!(
        out,
        "{:>12} {:>10} {:>10} {:>12} {:>12} {:>12}",
        "start_s", "jobs", "tasks", "slots", "cores", "mem_gib"
    )?;
    if stats.cluster_slots.is_some() {
        write!(out, " {:>9}", "of_cluster")?;
    }
    writeln!(out)?;
    for r in rows(stats, merge) {
        write!(
            out,
            "{:>12.0} {:>10} {:>10} {:>12.1} {:>12.1} {:>12.1}",
            r.start_s, r.jobs, r.tasks, r.slots, r.cores, r.gib
        )?;
        if let Some(c) = stats.cluster_slots {
            write!(out, " {:>8.1}%", 100.0 * r.slots / c.max(1) as f64)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The DAG facts, when some jobs have stages.
fn write_dags<W: Write>(d: &DagStats, out: &mut W) -> io::Result<()> {
    if d.dags == 0 {
        return Ok(());
    }
    let secs = |m: common::Micros| m.as_secs_f64();
    writeln!(out, "DAG jobs             {}", d.dags)?;
    writeln!(
        out,
        "  stages per DAG     median {}  max {}",
        d.stages.quantile(0.5),
        d.stages.max()
    )?;
    writeln!(
        out,
        "  tasks per DAG      median {}  max {}",
        d.tasks.quantile(0.5),
        d.tasks.max()
    )?;
    writeln!(
        out,
        "  critical path (s)  median {:.3}  p95 {:.3}  max {:.3}  (each stage's longest task, along the longest chain)",
        secs(d.critical_path.quantile(0.5)),
        secs(d.critical_path.quantile(0.95)),
        secs(d.critical_path.max())
    )?;
    writeln!(
        out,
        "  work (task-s)      median {:.1}  p95 {:.1}  max {:.1}",
        secs(d.work.quantile(0.5)),
        secs(d.work.quantile(0.95)),
        secs(d.work.max())
    )?;
    if d.unordered > 0 {
        writeln!(
            out,
            "  without an order   {} (a cycle or a parent that is not a stage: no critical path)",
            d.unordered
        )?;
    }
    Ok(())
}

/// The full-resolution time series as CSV (one row per bucket).
pub fn write_csv<W: Write>(stats: &TraceStats, out: &mut W) -> io::Result<()> {
    writeln!(
        out,
        "bucket_start_s,bucket_end_s,jobs_arrived,tasks_arrived,job_arrival_rate_per_s,slots_demanded,cpu_cores_demanded,memory_gib_demanded,cluster_slots,demand_fraction_of_cluster"
    )?;
    let width = stats.bucket.as_secs_f64();
    for r in rows(stats, 1) {
        let (slots, fraction) = match stats.cluster_slots {
            Some(c) => (c.to_string(), format!("{:.6}", r.slots / c.max(1) as f64)),
            None => (String::new(), String::new()),
        };
        writeln!(
            out,
            "{},{},{},{},{:.6},{:.3},{:.3},{:.3},{slots},{fraction}",
            r.start_s,
            r.end_s,
            r.jobs,
            r.tasks,
            r.jobs as f64 / width,
            r.slots,
            r.cores,
            r.gib
        )?;
    }
    Ok(())
}
