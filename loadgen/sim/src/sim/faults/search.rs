//! Many seeds on threads: each thread takes the next seed from a shared counter and
//! runs it; the report lists every violation with its seed (in seed order, so that
//! the output does not depend on the threads' timing) and the known issues met.

use super::{run, FaultConfig, Known, RunReport, Schedule, Violation};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a search found.
#[derive(Debug, Default)]
pub struct SearchReport {
    pub seeds: u64,
    pub events: u64,
    pub accepted: u64,
    pub finished: u64,
    pub failed: u64,
    /// Violations, in seed order.
    pub violations: Vec<Violation>,
    /// Known issues: per reason, (tasks stuck, seeds where it happened, first seed).
    pub known: BTreeMap<Known, (u64, u64, u64)>,
    /// Gangs restarted whole (broken after their commit), and the seeds where one
    /// was.
    pub gang_restarts: u64,
    pub seeds_with_gang_restarts: u64,
    pub elapsed: Duration,
}

impl SearchReport {
    pub fn seeds_per_second(&self) -> f64 {
        self.seeds as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn add(&mut self, r: RunReport) {
        self.seeds += 1;
        self.events += r.events;
        self.accepted += r.accepted as u64;
        self.finished += r.finished;
        self.failed += r.failed;
        self.gang_restarts += r.gang_restarts;
        self.seeds_with_gang_restarts += u64::from(r.gang_restarts > 0);
        for (k, n) in r.known {
            let e = self.known.entry(k).or_insert((0, 0, r.seed));
            e.0 += u64::from(n);
            e.1 += 1;
            e.2 = e.2.min(r.seed);
        }
        if let Some(v) = r.violation {
            self.violations.push(v);
        }
    }
}

/// Runs seeds `first .. first + count` on `jobs` threads (at least one).
pub fn search(
    first: u64,
    count: u64,
    jobs: usize,
    config: &FaultConfig,
    script: Option<&Schedule>,
) -> SearchReport {
    let started = Instant::now();
    let next = AtomicU64::new(first);
    let report = Mutex::new(SearchReport::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= first + count {
                    break;
                }
                let r = run(seed, config, script);
                if let Ok(mut report) = report.lock() {
                    report.add(r);
                }
            });
        }
    });
    let mut report = report.into_inner().unwrap_or_default();
    report.violations.sort_by_key(|v| v.seed);
    report.elapsed = started.elapsed();
    report
}
