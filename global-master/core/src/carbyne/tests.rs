use super::intra::{reverse_pack, width};
use super::order::{drf, drf_levels};
use super::*;
use common::{JobId, Micros, Resources, TaskId};

fn task(job: u64, index: u32, cores: u64, secs: u64, stage: usize) -> Runnable {
    Runnable {
        task: TaskId {
            job: JobId(job),
            index,
        },
        resources: Resources::cores(cores, 1024),
        duration: Micros::from_secs(secs),
        stage,
    }
}

fn stage(parents: &[usize], remaining: u32, runnable: u32, cores: u64, secs: u64) -> StageWork {
    StageWork {
        parents: parents.to_vec(),
        remaining,
        runnable,
        demand: Resources::cores(cores, 1024),
        duration: Micros::from_secs(secs),
    }
}

/// Stages a (4 tasks of 1 s) and c (one task of 10 s) both runnable, d (1 s) after
/// both: a's tasks can wait 9 s without delaying the job.
fn diamond(job: u64) -> JobWork {
    let mut runnable: Vec<Runnable> = (0..4).map(|i| task(job, i, 1, 1, 0)).collect();
    runnable.push(task(job, 4, 1, 10, 1));
    JobWork {
        job: JobId(job),
        used: Resources::ZERO,
        runnable,
        stages: vec![
            stage(&[], 4, 4, 1, 1),
            stage(&[], 1, 1, 1, 10),
            stage(&[0, 1], 1, 0, 1, 1),
        ],
    }
}

fn config(order: JobOrder, altruism: f64) -> OrderConfig {
    OrderConfig {
        order,
        altruism,
        ..OrderConfig::default()
    }
}

fn cluster(cores: u64) -> Resources {
    Resources::cores(cores, 1024 * cores)
}

#[test]
fn a_share_beyond_the_critical_path_need_leaves_leftover() {
    let job = diamond(1);
    let plan = reverse_pack(&job, &cluster(100));
    assert_eq!(plan.completion, Micros::from_secs(11));
    // Only the 10 s task must start now; a's four tasks may wait.
    assert_eq!(plan.must_start, vec![false, false, false, false, true]);
}

#[test]
fn a_share_that_is_just_enough_keeps_every_task() {
    // One core: a runs one task at a time (4 s), still shorter than c's 10 s
    // branch (branches do not share the share when T_k is computed), T_k = 11 s.
    let job = diamond(1);
    let plan = reverse_pack(&job, &Resources::cores(1, 1024));
    assert_eq!(plan.completion, Micros::from_secs(11));
    assert_eq!(
        width(&Resources::cores(1, 1024), &Resources::cores(1, 1024)),
        1
    );
    // a's waves of one task end at 10 s: waves starting at 9, 8, 7, 6 s may wait.
    assert_eq!(plan.must_start.iter().filter(|m| **m).count(), 1);
    // A single stage can give nothing: all its tasks finish with the job.
    let flat = JobWork::flat(
        JobId(2),
        Resources::ZERO,
        (0..8).map(|i| task(2, i, 1, 5, 0)).collect(),
    );
    let plan = reverse_pack(&flat, &cluster(4));
    assert_eq!(plan.completion, Micros::from_secs(10));
    // Two waves of four: the second wave may wait.
    assert_eq!(plan.must_start.iter().filter(|m| **m).count(), 4);
}

#[test]
fn leftover_goes_to_the_job_with_least_remaining_work_first() {
    // Job 1: a diamond with lots of remaining work; job 2: a diamond, small.
    let mut big = diamond(1);
    big.stages[2].remaining = 50;
    let small = diamond(2);
    let jobs = vec![big, small];
    let total = cluster(100);
    let order = plan(&jobs, &total, &total, &config(JobOrder::Carbyne, 1.0));
    assert_eq!(order.len(), 10);
    // First the tasks that must start (each job's 10 s task), in DRF order.
    let first: Vec<u64> = order[..2].iter().map(|t| t.job.0).collect();
    assert_eq!(first, vec![1, 2]);
    assert!(order[..2].iter().all(|t| t.index == 4));
    // Then the leftover: the small job's four tasks before the big job's.
    assert!(order[2..6].iter().all(|t| t.job == JobId(2)), "{order:?}");
    assert!(order[6..].iter().all(|t| t.job == JobId(1)), "{order:?}");
}

#[test]
fn altruism_zero_is_drf() {
    let jobs: Vec<JobWork> = (1..=3)
        .map(|j| {
            let mut job = diamond(j);
            job.used = Resources::cores(4 - j, 1024);
            job
        })
        .collect();
    let total = cluster(16);
    let carbyne = plan(&jobs, &total, &total, &config(JobOrder::Carbyne, 0.0));
    let drf_order = plan(&jobs, &total, &total, &config(JobOrder::Drf, 1.0));
    assert_eq!(carbyne, drf_order);
    // ... and altruism changes it.
    let altruistic = plan(&jobs, &total, &total, &config(JobOrder::Carbyne, 1.0));
    assert_ne!(altruistic, drf_order);
}

#[test]
fn drf_gives_the_next_task_to_the_job_with_the_least_dominant_share() {
    let mut a = JobWork::flat(
        JobId(1),
        Resources::cores(3, 1024),
        vec![task(1, 0, 1, 1, 0)],
    );
    a.runnable.push(task(1, 1, 1, 1, 0));
    let b = JobWork::flat(
        JobId(2),
        Resources::ZERO,
        (0..3).map(|i| task(2, i, 1, 1, 0)).collect(),
    );
    let jobs = vec![a, b];
    let total = cluster(10);
    let order = drf(&jobs, &total, vec![vec![0, 1], vec![0, 1, 2]]);
    let owners: Vec<u64> = order.iter().map(|t| t.job.0).collect();
    // b holds 0, 1, 2 cores before a (at 3) gets one.
    assert_eq!(owners, vec![2, 2, 2, 1, 1]);
    // Water-filling: b wants 0.3, a 0.5; both under an equal half.
    let levels = drf_levels(&jobs, &total);
    assert!(
        (levels[0] - 0.5).abs() < 1e-9 && (levels[1] - 0.3).abs() < 1e-9,
        "{levels:?}"
    );
}

#[test]
fn tetris_packs_what_fits_first() {
    // 3 cores free: the 2-core task then the 1-core task fit; the 4-core one last.
    let jobs = vec![
        JobWork::flat(JobId(1), Resources::ZERO, vec![task(1, 0, 4, 1, 0)]),
        JobWork::flat(JobId(2), Resources::ZERO, vec![task(2, 0, 1, 1, 0)]),
        JobWork::flat(JobId(3), Resources::ZERO, vec![task(3, 0, 2, 1, 0)]),
    ];
    let order = plan(
        &jobs,
        &cluster(10),
        &cluster(3),
        &config(JobOrder::Tetris, 1.0),
    );
    let owners: Vec<u64> = order.iter().map(|t| t.job.0).collect();
    assert_eq!(owners, vec![3, 2, 1]);
}

#[test]
fn sjf_takes_the_shortest_critical_path_first() {
    let long = diamond(1);
    let short = JobWork::flat(JobId(2), Resources::ZERO, vec![task(2, 0, 1, 3, 0)]);
    assert_eq!(long.critical_path(), Micros::from_secs(11));
    let order = plan(
        &[long, short],
        &cluster(10),
        &cluster(10),
        &config(JobOrder::Sjf, 1.0),
    );
    assert_eq!(order[0].job, JobId(2));
}

#[test]
fn names_parse_and_bad_altruism_names_the_field() {
    for name in JobOrder::NAMES {
        assert_eq!(JobOrder::parse(name).map(JobOrder::name), Some(name));
    }
    assert_eq!(JobOrder::parse("srtf"), None);
    assert_eq!(JobOrder::default(), JobOrder::Fifo);
    let err = config(JobOrder::Carbyne, 1.5).check().unwrap_err();
    assert!(err.contains("altruism"), "{err}");
}

#[test]
fn altruism_is_seeded_and_stable_per_job() {
    let half = config(JobOrder::Carbyne, 0.5);
    let picks: Vec<bool> = (0..200).map(|j| half.altruistic(JobId(j))).collect();
    let yes = picks.iter().filter(|p| **p).count();
    assert!((60..140).contains(&yes), "{yes} of 200");
    let again: Vec<bool> = (0..200).map(|j| half.altruistic(JobId(j))).collect();
    assert_eq!(picks, again);
    let other = OrderConfig { seed: 7, ..half };
    assert_ne!(
        picks,
        (0..200)
            .map(|j| other.altruistic(JobId(j)))
            .collect::<Vec<_>>()
    );
}
