//! DAG facts of a trace ([`DagStats`]), for the jobs that have stages: how many,
//! stages and tasks per DAG, critical path and work per DAG. Memory grows with the
//! number of distinct stage and task counts, not with the number of jobs.

use super::histogram::LogHistogram;
use crate::trace::topo::critical_path;
use crate::trace::TraceJob;
use common::Micros;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Exact counts of small integers (stages or tasks per DAG).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    by_value: BTreeMap<u64, u64>,
    total: u64,
}

impl Counts {
    pub fn record(&mut self, v: u64) {
        *self.by_value.entry(v).or_default() += 1;
        self.total += 1;
    }

    /// The smallest value with at least `q` of the values at or below it (`q` in
    /// `[0, 1]`; the lower median for `q = 0.5`); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&v, &n) in &self.by_value {
            seen += n;
            if seen >= rank {
                return v;
            }
        }
        0
    }

    pub fn max(&self) -> u64 {
        self.by_value.keys().next_back().copied().unwrap_or(0)
    }
}

/// DAG statistics over the jobs with stages.
#[derive(Clone, Debug, Default)]
pub struct DagStats {
    /// Jobs with at least one stage.
    pub dags: u64,
    pub stages: Counts,
    pub tasks: Counts,
    /// Per DAG, the longest chain of stages, each weighing its longest task: how long
    /// the job takes with unbounded parallelism (task-seconds along that chain).
    pub critical_path: LogHistogram,
    /// Per DAG, the sum of its task durations.
    pub work: LogHistogram,
    /// DAGs whose stages have no order (a cycle, or a parent that is not a stage of
    /// the job): no critical path.
    pub unordered: u64,
}

impl DagStats {
    pub fn add(&mut self, job: &TraceJob) {
        if job.stages.is_empty() {
            return;
        }
        self.dags += 1;
        self.stages.record(job.stages.len() as u64);
        self.tasks.record(job.tasks.len() as u64);
        let index: FxHashMap<u32, usize> = job
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id, i))
            .collect();
        let mut longest = vec![0u64; job.stages.len()];
        let mut work = 0u64;
        for task in &job.tasks {
            work = work.saturating_add(task.duration.0);
            if let Some(&i) = task.stage.and_then(|s| index.get(&s)) {
                longest[i] = longest[i].max(task.duration.0);
            }
        }
        self.work.record(Micros(work));
        match critical_path(&job.stages, |i| longest[i]) {
            Some(path) => self.critical_path.record(Micros(path)),
            None => self.unordered += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{DagStage, TraceTask};

    fn task(stage: u32, secs: u64) -> TraceTask {
        TraceTask {
            stage: Some(stage),
            ..TraceTask::with_duration(Micros::from_secs(secs))
        }
    }

    fn stage(id: u32, deps: &[u32]) -> DagStage {
        DagStage {
            id,
            name: format!("s{id}"),
            depends_on: deps.to_vec(),
        }
    }

    #[test]
    fn a_diamond_and_a_cycle() {
        let diamond = TraceJob {
            id: 0,
            arrival: Micros::ZERO,
            queue: None,
            stages: vec![
                stage(0, &[]),
                stage(1, &[0]),
                stage(2, &[0]),
                stage(3, &[1, 2]),
            ],
            tasks: vec![task(0, 2), task(0, 3), task(1, 10), task(2, 4), task(3, 1)],
        };
        let mut cycle = diamond.clone();
        cycle.stages[0].depends_on.push(3);
        let flat = TraceJob {
            stages: Vec::new(),
            ..diamond.clone()
        };
        let mut stats = DagStats::default();
        for job in [&diamond, &cycle, &flat] {
            stats.add(job);
        }
        assert_eq!(stats.dags, 2);
        assert_eq!(stats.unordered, 1);
        assert_eq!((stats.stages.quantile(0.5), stats.stages.max()), (4, 4));
        assert_eq!(stats.tasks.max(), 5);
        // 3 (stage 0's longest) + 10 (stage 1) + 1 (stage 3).
        assert_eq!(stats.critical_path.max(), Micros::from_secs(14));
        assert_eq!(stats.critical_path.count(), 1);
        assert_eq!(stats.work.max(), Micros::from_secs(20));
    }

    #[test]
    fn counts_quantiles() {
        let mut c = Counts::default();
        assert_eq!((c.quantile(0.5), c.max()), (0, 0));
        for v in [5, 1, 9, 3] {
            c.record(v);
        }
        assert_eq!((c.quantile(0.5), c.quantile(1.0), c.max()), (3, 9, 9));
    }
}
