//! The tables `loadgen simulate` prints: allocation delays per scheduler, and
//! throughput and job latency per task-type policy.

use crate::report::Summary;

/// Task throughput, job latency and QUEUEABLE kills per task-type policy, with the
/// throughput gain over the first policy of the same scheduler.
pub fn print_task_types(summaries: &[Summary]) {
    println!(
        "{:<12} {:<16} {:>10} {:>8} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8}",
        "scheduler",
        "task types",
        "tasks/s",
        "gain",
        "job mean s",
        "job p50 s",
        "job p99 s",
        "Q kills",
        "shed",
        "promoted"
    );
    let mut base: Option<(&str, f64)> = None;
    for s in summaries {
        if base.is_none_or(|(name, _)| name != s.scheduler) {
            base = Some((&s.scheduler, s.task_throughput_per_s));
        }
        let gain = match base {
            Some((_, b)) if b > 0.0 => {
                format!("{:+.1}%", (s.task_throughput_per_s / b - 1.0) * 100.0)
            }
            _ => "-".to_owned(),
        };
        let j = &s.job_latency_s;
        println!(
            "{:<12} {:<16} {:>10.2} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>8} {:>6} {:>8}",
            s.scheduler,
            s.task_types,
            s.task_throughput_per_s,
            gain,
            j.mean,
            j.p50,
            j.p99,
            s.queueable_kills,
            s.shed,
            s.promoted
        );
    }
}

pub fn print_table(summaries: &[Summary]) {
    println!(
        "{:<12} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "scheduler",
        "tasks",
        "unpl.",
        "mean s",
        "p50 s",
        "p99 s",
        "p99.9 s",
        "max s",
        "rejects",
        "repart.",
        "wall s"
    );
    for s in summaries {
        let a = &s.allocation_s;
        println!(
            "{:<12} {:>8} {:>6} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.3} {:>8} {:>8} {:>8.2}",
            s.scheduler,
            s.tasks,
            s.unplaceable,
            a.mean,
            a.p50,
            a.p99,
            a.p99_9,
            a.max,
            s.lm_rejections,
            s.repartitions,
            s.wall_time_s
        );
        if let Some(f) = &s.fairness {
            println!(
                "  fairness: Jain mean {:.3}, min {:.3} over {} windows; preemptions {} (attempts {}, refused {}), wasted {:.0} task-s",
                f.jain_mean, f.jain_min, f.windows, s.preemptions, s.preempt_attempts, s.preempt_refused, s.wasted_task_seconds
            );
        }
        if s.never_finished > 0 || s.over_commits > 0 {
            println!(
                "  WARNING: {} tasks never finished, {} over-commits",
                s.never_finished, s.over_commits
            );
        }
    }
}
