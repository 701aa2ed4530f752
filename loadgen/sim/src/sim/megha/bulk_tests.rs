//! The full retry (`WakePolicy::All`) with known misses counted in bulk against the
//! oracle, one decision per task (`SimConfig::bulk_known_misses` off): the same
//! `tasks.csv` byte for byte (attempts, timings, placements) and the same counters,
//! on overloaded runs with decisions charged (so that every skipped decision's
//! cost shows in the schedule) and shapes that interleave.

use crate::report::write_tasks_csv;
use crate::sim::workload::Job;
use crate::sim::{run, SimConfig, SimCounters, SimOutcome};
use common::cluster::ClusterSpec;
use common::{ConstraintSet, Micros, Resources, TaskId, TaskSpec};
use gm_core::WakePolicy;

/// `jobs` jobs of `width` tasks, one every 50 ms: 1 or 2 cores, per task one of a
/// few constraint sets (none, 0, 1, both: classes interleave in the line), 1-6 s.
fn overload(jobs: u64, width: u32, per_job_shapes: bool) -> Vec<Job> {
    (0..jobs)
        .map(|id| Job {
            id,
            dag: None,
            arrival: Micros::from_secs(1) + Micros(id * 50_000),
            tasks: (0..width)
                .map(|j| {
                    let k = if per_job_shapes {
                        id
                    } else {
                        id * 7 + u64::from(j) * 3
                    };
                    let constraints = match k % 5 {
                        0 | 4 => vec![],
                        1 => vec![0],
                        2 => vec![1],
                        _ => vec![0, 1],
                    };
                    TaskSpec::short(
                        TaskId::new(id, j),
                        Resources::cores(1 + (k / 5) % 2, 256),
                        Micros::from_secs(1 + (id + u64::from(j)) % 6),
                    )
                    .with_constraints(
                        ConstraintSet::from_ids(constraints).expect("constraint ids < 64"),
                    )
                })
                .collect(),
        })
        .collect()
}

fn tasks_csv(outcome: &SimOutcome) -> String {
    let mut out = Vec::new();
    write_tasks_csv(&mut out, &outcome.records, &outcome.branches).expect("write tasks.csv");
    String::from_utf8(out).expect("utf-8")
}

fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(a.lines().count().min(b.lines().count()));
    format!(
        "line {}:\n  bulk:   {}\n  oracle: {}",
        at + 1,
        a.lines().nth(at).unwrap_or("<end>"),
        b.lines().nth(at).unwrap_or("<end>")
    )
}

#[test]
fn bulk_known_misses_give_the_one_by_one_full_retrys_reports() {
    // (GMs, LMs, nodes per partition, jobs, tasks per job, per-job shapes, seed)
    let table = [
        (1, 1, 8, 200, 10, false, 1),
        (2, 2, 4, 300, 10, false, 2),
        (3, 2, 3, 300, 8, true, 3),
        (2, 3, 5, 400, 12, false, 4),
    ];
    for (gms, lms, partition, jobs, width, per_job, seed) in table {
        let cluster = ClusterSpec::generate(gms, lms, partition, Resources::cores(2, 1024), seed);
        let jobs = overload(jobs, width, per_job);
        let config = |bulk| SimConfig {
            wake: WakePolicy::All,
            bulk_known_misses: bulk,
            seed,
            ..SimConfig::default()
        };
        let bulk = run(&cluster, &jobs, &config(true), &mut |_, _| {});
        let oracle = run(&cluster, &jobs, &config(false), &mut |_, _| {});
        let case = format!("seed {seed}: {gms} GMs x {lms} LMs x {partition}");
        assert!(
            oracle.counters.retries > 2_000,
            "{case}: not overloaded ({} retries)",
            oracle.counters.retries
        );
        let (a, b) = (tasks_csv(&bulk), tasks_csv(&oracle));
        assert!(
            a == b,
            "{case}: tasks.csv differs at {}",
            first_difference(&a, &b)
        );
        // The bulk path was taken, and for a good share of the retries.
        assert_eq!(oracle.counters.bulk_misses, 0, "{case}");
        assert!(
            bulk.counters.bulk_misses * 4 > oracle.counters.retries,
            "{case}: {} of {} retries in bulk",
            bulk.counters.bulk_misses,
            oracle.counters.retries
        );
        let counters = SimCounters {
            bulk_misses: 0,
            ..bulk.counters.clone()
        };
        assert_eq!(counters, oracle.counters, "{case}: counters");
        assert_eq!(bulk.span, oracle.span, "{case}: span");
        assert_eq!(bulk.drained, oracle.drained, "{case}: drained");
    }
}
