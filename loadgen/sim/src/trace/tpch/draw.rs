//! Drawing one job from a TPC-H DAG: its arrival gap, each stage's task shape (CPU
//! and memory) and each task's duration, all from one seeded generator. The
//! distributions are documented in the module docs of [`super`]. A leaf.

use super::model::TpchDag;
use crate::trace::{TraceJob, TraceTask};
use common::rng::{Rng, SeededRng};
use common::{Micros, Resources};

/// Cores per task of a stage and their probabilities (all of a stage's tasks alike,
/// as Spark executors of one size run them).
pub const CPU_CORES: [(u64, f64); 3] = [(1, 0.5), (2, 0.3), (4, 0.2)];

/// GiB of memory per core of a stage's tasks and their probabilities.
pub const GIB_PER_CORE: [(u64, f64); 3] = [(2, 1.0 / 3.0), (4, 1.0 / 3.0), (8, 1.0 / 3.0)];

/// The mean of a discrete distribution.
pub fn mean(table: &[(u64, f64)]) -> f64 {
    table.iter().map(|&(v, p)| v as f64 * p).sum()
}

/// One value of `table`, with its probability (the probabilities sum to 1).
pub fn pick(rng: &mut SeededRng, table: &[(u64, f64)]) -> u64 {
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for &(v, p) in table {
        acc += p;
        if u < acc {
            return v;
        }
    }
    table.last().map_or(0, |&(v, _)| v)
}

/// A gap of a Poisson process with this mean: exponential, by inversion.
pub fn exponential_gap(rng: &mut SeededRng, mean: Micros) -> Micros {
    let u: f64 = rng.random();
    Micros::from_secs_f64(-mean.as_secs_f64() * (1.0 - u).ln())
}

fn sample(rng: &mut SeededRng, durations: &[Micros]) -> Micros {
    durations[rng.random_range(0..durations.len())]
}

/// The job `id` arriving at `arrival`, drawn from `dag`. Per stage (in file order):
/// cores, then GiB per core, then each task's duration: the first `wave_width`
/// tasks are the first wave (from `fresh_ms` for a stage without parents, whose
/// executors are new to the job, from `first_wave_ms` otherwise), the others later
/// waves (`rest_wave_ms`); an empty list falls back to `first_wave_ms`.
pub fn draw_job(
    rng: &mut SeededRng,
    dag: &TpchDag,
    id: u64,
    arrival: Micros,
    wave_width: u32,
) -> TraceJob {
    let total: u32 = dag.stages.iter().map(|s| s.tasks).sum();
    let mut tasks = Vec::with_capacity(total as usize);
    for stage in &dag.stages {
        let cores = pick(rng, &CPU_CORES);
        let gib = cores * pick(rng, &GIB_PER_CORE);
        let resources = Resources::new(cores * 1000, gib * 1024);
        let first = if stage.dag.depends_on.is_empty() {
            stage.fresh_or_first()
        } else {
            &stage.first_wave
        };
        for i in 0..stage.tasks {
            let pool = if i < wave_width {
                first
            } else {
                stage.rest_or_first()
            };
            tasks.push(TraceTask {
                duration: sample(rng, pool),
                resources: Some(resources),
                constraints: None,
                stage: Some(stage.dag.id),
            });
        }
    }
    TraceJob {
        id,
        arrival,
        queue: None,
        stages: dag.stages.iter().map(|s| s.dag.clone()).collect(),
        tasks,
    }
}

/// The expected core-seconds of a job drawn from `dag` (what [`draw_job`] draws, on
/// average): per stage, the mean cores times its tasks' mean durations.
pub fn expected_core_secs(dag: &TpchDag, wave_width: u32) -> f64 {
    let mean_s = |d: &[Micros]| d.iter().map(|m| m.as_secs_f64()).sum::<f64>() / d.len() as f64;
    let cores = mean(&CPU_CORES);
    dag.stages
        .iter()
        .map(|s| {
            let first = if s.dag.depends_on.is_empty() {
                s.fresh_or_first()
            } else {
                &s.first_wave
            };
            let in_first = s.tasks.min(wave_width);
            let secs = f64::from(in_first) * mean_s(first)
                + f64::from(s.tasks - in_first) * mean_s(s.rest_or_first());
            cores * secs
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::rng::seeded;

    #[test]
    fn tables_sum_to_one() {
        for table in [&CPU_CORES, &GIB_PER_CORE] {
            let sum: f64 = table.iter().map(|&(_, p)| p).sum();
            assert!((sum - 1.0).abs() < 1e-9, "{table:?}");
        }
        assert!((mean(&CPU_CORES) - 1.9).abs() < 1e-9);
    }

    #[test]
    fn picks_follow_the_probabilities() {
        let mut rng = seeded(7, 0);
        let mut counts = [0u32; 5];
        for _ in 0..10_000 {
            counts[pick(&mut rng, &CPU_CORES) as usize] += 1;
        }
        // 5000 / 3000 / 2000 expected; 5 standard deviations is about 250.
        assert!((counts[1] as i32 - 5000).abs() < 250, "{counts:?}");
        assert!((counts[2] as i32 - 3000).abs() < 250, "{counts:?}");
        assert!((counts[4] as i32 - 2000).abs() < 250, "{counts:?}");
        assert_eq!(counts[0] + counts[3], 0);
    }

    #[test]
    fn gaps_have_the_mean_asked_for() {
        let mut rng = seeded(11, 0);
        let mean = Micros::from_secs(20);
        let n = 20_000;
        let total: f64 = (0..n)
            .map(|_| exponential_gap(&mut rng, mean).as_secs_f64())
            .sum();
        // The mean of 20,000 exponential gaps: standard error 20 / sqrt(20000) = 0.14 s.
        assert!(
            (total / n as f64 - 20.0).abs() < 0.7,
            "{}",
            total / n as f64
        );
    }
}
