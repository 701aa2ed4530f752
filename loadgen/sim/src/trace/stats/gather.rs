//! [`TraceStats`], gathered while streaming ([`Bucket`]s of arrivals and demand, the
//! duration histogram). A leaf: `render.rs` draws it.

use super::dag::DagStats;
use super::histogram::LogHistogram;
use crate::trace::TraceJob;
use common::Micros;

/// The most time buckets kept (guards against a tiny bucket over a long trace).
pub const MAX_BUCKETS: usize = 20_000_000;

/// Per-bucket sums. `slot_secs` etc. are integrals of the demand over the bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    pub jobs: u64,
    pub tasks: u64,
    pub slot_secs: f64,
    pub core_secs: f64,
    pub gib_secs: f64,
}

/// Running statistics over a stream of jobs.
#[derive(Clone, Debug)]
pub struct TraceStats {
    pub bucket: Micros,
    pub cluster_slots: Option<u64>,
    pub jobs: u64,
    pub tasks: u64,
    /// Tasks that carried no resources (counted in slots, not in cores or memory).
    pub tasks_without_resources: u64,
    pub first_arrival: Option<Micros>,
    pub last_arrival: Micros,
    pub durations: LogHistogram,
    /// DAG facts of the jobs with stages.
    pub dags: DagStats,
    buckets: Vec<Bucket>,
    /// Difference arrays for buckets fully covered by a task: (slots, cores, GiB).
    full: Vec<[f64; 3]>,
}

/// A time span longer than `MAX_BUCKETS` buckets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the trace spans more than {MAX_BUCKETS} buckets of {bucket}; use a larger --bucket-secs")]
pub struct TooManyBuckets {
    pub bucket: Micros,
}

impl TraceStats {
    /// `bucket` must be non-zero.
    pub fn new(bucket: Micros, cluster_slots: Option<u64>) -> Self {
        TraceStats {
            bucket: Micros(bucket.0.max(1)),
            cluster_slots,
            jobs: 0,
            tasks: 0,
            tasks_without_resources: 0,
            first_arrival: None,
            last_arrival: Micros::ZERO,
            durations: LogHistogram::default(),
            dags: DagStats::default(),
            buckets: Vec::new(),
            full: Vec::new(),
        }
    }

    fn grow(&mut self, last: usize) -> Result<(), TooManyBuckets> {
        if last >= MAX_BUCKETS {
            return Err(TooManyBuckets {
                bucket: self.bucket,
            });
        }
        if self.buckets.len() <= last + 1 {
            self.buckets.resize(last + 2, Bucket::default());
            self.full.resize(last + 2, [0.0; 3]);
        }
        Ok(())
    }

    pub fn add(&mut self, job: &TraceJob) -> Result<(), TooManyBuckets> {
        let b = self.bucket.0;
        let a = job.arrival.0;
        let first = (a / b) as usize;
        self.grow(first)?;
        self.jobs += 1;
        self.dags.add(job);
        self.first_arrival = Some(
            self.first_arrival
                .map_or(job.arrival, |f| f.min(job.arrival)),
        );
        self.last_arrival = self.last_arrival.max(job.arrival);
        self.buckets[first].jobs += 1;
        self.buckets[first].tasks += job.tasks.len() as u64;
        for task in &job.tasks {
            self.tasks += 1;
            self.durations.record(task.duration);
            let weights = match task.resources {
                Some(r) => [
                    1.0,
                    r.cpu_millis as f64 / 1000.0,
                    r.memory_mb as f64 / 1024.0,
                ],
                None => {
                    self.tasks_without_resources += 1;
                    [1.0, 0.0, 0.0]
                }
            };
            let end = a.saturating_add(task.duration.0);
            let last = (end / b) as usize;
            self.grow(last)?;
            let secs = |from: u64, to: u64| (to - from) as f64 / 1e6;
            if first == last {
                self.spread(first, secs(a, end), &weights);
                continue;
            }
            self.spread(first, secs(a, (first as u64 + 1) * b), &weights);
            self.spread(last, secs(last as u64 * b, end), &weights);
            let full_secs = b as f64 / 1e6;
            for (k, w) in weights.iter().enumerate() {
                self.full[first + 1][k] += w * full_secs;
                self.full[last][k] -= w * full_secs;
            }
        }
        Ok(())
    }

    fn spread(&mut self, i: usize, secs: f64, w: &[f64; 3]) {
        let bucket = &mut self.buckets[i];
        bucket.slot_secs += w[0] * secs;
        bucket.core_secs += w[1] * secs;
        bucket.gib_secs += w[2] * secs;
    }

    /// The buckets from time 0 to the end of the last task, with full-coverage
    /// contributions folded in.
    pub fn buckets(&self) -> Vec<Bucket> {
        let mut out = self.buckets.clone();
        let mut running = [0.0; 3];
        for (bucket, diff) in out.iter_mut().zip(&self.full) {
            for (r, d) in running.iter_mut().zip(diff) {
                *r += d;
            }
            bucket.slot_secs += running[0];
            bucket.core_secs += running[1];
            bucket.gib_secs += running[2];
        }
        while out.last().is_some_and(|b| *b == Bucket::default()) {
            out.pop();
        }
        out
    }
}
