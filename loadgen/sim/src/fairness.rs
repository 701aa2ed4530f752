//! Fairness of a run, measured as carbyne does: per 60-second window, each queue's
//! used share (DRF or CPU, as configured) normalised by its entitled share, and Jain's
//! index of those normalised shares over the queues that had a task waiting in the
//! window (a queue whose demand is met cannot be treated unfairly).

use crate::sim::ledger::TaskRecord;
use crate::sim::{Run, SimOutcome};
use common::fairness::{jain_index, FairnessConfig, SharePolicy};
use common::{Micros, Resources};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FairnessSummary {
    pub window_s: f64,
    pub windows: usize,
    pub jain_mean: f64,
    pub jain_min: f64,
}

/// One row of `shares.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareSample {
    pub window_start: Micros,
    pub queue: usize,
    pub used: f64,
    pub entitled: f64,
}

/// Used share of every queue in every window, and Jain's index per window over the
/// queues that had work in it (submitted before its end, finished after its start).
pub fn measure(
    config: &FairnessConfig,
    total: Resources,
    records: &[TaskRecord],
    runs: &[Run],
    span: Micros,
    window: Micros,
) -> (Vec<ShareSample>, FairnessSummary) {
    let window = window.max(Micros(1));
    let n = (span.0 / window.0 + 1) as usize;
    let queues = config.queues.len();
    // Integrals of CPU and memory use per (window, queue).
    let mut cpu = vec![0f64; n * queues];
    let mut mem = vec![0f64; n * queues];
    let index = |q: common::QueueId| config.queues.iter().position(|s| s.id == q);
    for run in runs {
        let Some(q) = index(run.queue) else { continue };
        let end = run.end.unwrap_or(span).min(span);
        let mut t = run.start;
        while t < end {
            let w = (t.0 / window.0) as usize;
            let w_end = Micros((w as u64 + 1) * window.0).min(end);
            let dt = w_end.since(t).0 as f64;
            cpu[w * queues + q] += run.resources.cpu_millis as f64 * dt;
            mem[w * queues + q] += run.resources.memory_mb as f64 * dt;
            t = w_end;
        }
    }
    // A queue takes part in a window when it wanted more than it had: one of its
    // tasks was waiting (arrived, not yet started) during the window.
    let mut active = vec![false; n * queues];
    for r in records {
        let Some(q) = index(r.queue) else { continue };
        let from = (r.arrival.0 / window.0) as usize;
        let to = (r.start.unwrap_or(span).min(span).0 / window.0) as usize;
        for w in from..=to.min(n - 1) {
            active[w * queues + q] = true;
        }
    }
    let mut samples = Vec::new();
    let mut jains = Vec::new();
    let wlen = window.0 as f64;
    for w in 0..n {
        let mut xs = Vec::new();
        for (q, spec) in config.queues.iter().enumerate() {
            let c = cpu[w * queues + q] / (total.cpu_millis.max(1) as f64 * wlen);
            let m = mem[w * queues + q] / (total.memory_mb.max(1) as f64 * wlen);
            let used = match config.policy {
                SharePolicy::Drf => c.max(m),
                SharePolicy::Cpu => c,
            };
            samples.push(ShareSample {
                window_start: Micros(w as u64 * window.0),
                queue: q,
                used,
                entitled: spec.share,
            });
            if active[w * queues + q] {
                xs.push(used / spec.share);
            }
        }
        if xs.len() > 1 {
            jains.push(jain_index(&xs));
        }
    }
    let summary = FairnessSummary {
        window_s: window.as_secs_f64(),
        windows: jains.len(),
        jain_mean: if jains.is_empty() {
            1.0
        } else {
            jains.iter().sum::<f64>() / jains.len() as f64
        },
        jain_min: jains.iter().copied().fold(1.0, f64::min),
    };
    (samples, summary)
}

/// Measures a finished run (windows of `window`), writes `dir/shares.csv` and returns
/// the summary: the simulator's and the replays' one report.
pub fn report(
    dir: &Path,
    config: &FairnessConfig,
    total: Resources,
    outcome: &SimOutcome,
    window: Micros,
) -> std::io::Result<FairnessSummary> {
    let (samples, summary) = measure(
        config,
        total,
        &outcome.records,
        &outcome.runs,
        outcome.span,
        window,
    );
    std::fs::create_dir_all(dir)?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("shares.csv"))?);
    write_shares_csv(&mut out, config, &samples)?;
    out.flush()?;
    Ok(summary)
}

pub fn write_shares_csv<W: Write>(
    out: &mut W,
    config: &FairnessConfig,
    samples: &[ShareSample],
) -> std::io::Result<()> {
    writeln!(
        out,
        "window_start_s,queue,name,entitled_share,used_share,normalised"
    )?;
    for s in samples {
        writeln!(
            out,
            "{},{},{},{:.4},{:.6},{:.6}",
            s.window_start.as_secs_f64(),
            config.queues[s.queue].id.0,
            config.queues[s.queue].name,
            s.entitled,
            s.used,
            s.used / s.entitled
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::QueueId;

    #[test]
    fn equal_normalised_shares_score_one_and_a_hog_scores_low() {
        let config = FairnessConfig::parse("a:0.5:0,b:0.5:0", SharePolicy::Cpu, 1).unwrap();
        let total = Resources::cores(2, 100);
        let run = |q: u16, cores: u64| Run {
            task: common::TaskId::new(u64::from(q), 0),
            kind: common::TaskKind::Short,
            promoted_at: None,
            queue: QueueId(q),
            resources: Resources::cores(cores, 1),
            start: Micros(0),
            end: Some(Micros::from_secs(60)),
        };
        let mut a = TaskRecord::new(0, 0, Micros(0));
        a.finish = Some(Micros::from_secs(60));
        let mut b = a.clone();
        b.queue = QueueId(1);
        let span = Micros::from_secs(59);
        let w = Micros::from_secs(60);
        let (samples, fair) = measure(
            &config,
            total,
            &[a.clone(), b.clone()],
            &[run(0, 1), run(1, 1)],
            span,
            w,
        );
        assert!((fair.jain_mean - 1.0).abs() < 1e-9, "{fair:?}");
        assert!((samples[0].used - 0.5).abs() < 0.02, "{samples:?}");
        let (_, unfair) = measure(&config, total, &[a, b], &[run(0, 2)], span, w);
        assert!((unfair.jain_mean - 0.5).abs() < 1e-9, "{unfair:?}");
    }
}
