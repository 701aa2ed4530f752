use super::*;
use common::dag::{AfterWhen, Stage};
use common::{Micros, Resources};

fn dag(stages: &[(&str, &[u16], OnParentFailure)], task_stage: &[u16]) -> Arc<JobDag> {
    Arc::new(JobDag {
        stages: stages
            .iter()
            .map(|(name, after, on)| Stage {
                name: (*name).into(),
                after: after.to_vec(),
                on_parent_failure: *on,
            })
            .collect(),
        task_stage: task_stage.to_vec(),
        after_jobs: Vec::new(),
    })
}

fn tasks(n: u32) -> Vec<TaskSpec> {
    (0..n)
        .map(|i| TaskSpec::short(TaskId::new(1, i), Resources::cores(1, 1), Micros(1)))
        .collect()
}

fn ids(tasks: &[TaskSpec]) -> Vec<u32> {
    tasks.iter().map(|t| t.id.index).collect()
}

const FAIL: OnParentFailure = OnParentFailure::Fail;
const CONTINUE: OnParentFailure = OnParentFailure::Continue;

/// a (tasks 0, 1) -> b (2), c (3) -> d (4).
fn diamond(on_d: OnParentFailure) -> Arc<JobDag> {
    dag(
        &[
            ("a", &[], FAIL),
            ("b", &[0], FAIL),
            ("c", &[0], FAIL),
            ("d", &[1, 2], on_d),
        ],
        &[0, 0, 1, 2, 3],
    )
}

#[test]
fn a_diamond_releases_each_stage_when_its_parents_ended() {
    let mut dags = Dags::default();
    let mut blocked = Vec::new();
    let now = dags.submitted(JobId(1), diamond(FAIL), tasks(5), &mut blocked);
    assert_eq!(ids(&now), [0, 1]);
    assert_eq!(
        blocked.iter().map(|b| b.task.index).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    assert_eq!(&*blocked[2].waits_for, "b");
    assert!(dags.is_held(TaskId::new(1, 4)));

    assert!(dags.ended(TaskId::new(1, 0), false).is_empty());
    // A repeated end changes nothing.
    assert!(dags.ended(TaskId::new(1, 0), false).is_empty());
    assert_eq!(dags.held(), 3);
    let p = dags.ended(TaskId::new(1, 1), false);
    assert_eq!(ids(&p.released), [2, 3]);
    assert_eq!(dags.held(), 1);
    let p = dags.ended(TaskId::new(1, 2), false);
    assert!(p.released.is_empty());
    assert_eq!(&*p.blocked[0].waits_for, "c", "d now waits for c only");
    let p = dags.ended(TaskId::new(1, 3), false);
    assert_eq!(ids(&p.released), [4]);
    assert_eq!(dags.len(), 1);
    dags.ended(TaskId::new(1, 4), false);
    assert!(dags.is_empty(), "the job leaves once every stage ended");
    assert_eq!((dags.released, dags.never_run), (3, 0));
}

#[test]
fn a_failed_parent_fails_its_descendants_unless_they_continue() {
    let mut dags = Dags::default();
    dags.submitted(JobId(1), diamond(FAIL), tasks(5), &mut Vec::new());
    dags.ended(TaskId::new(1, 0), false);
    dags.ended(TaskId::new(1, 1), false);
    // b fails: d never runs, at once (c still runs).
    let p = dags.ended(TaskId::new(1, 2), true);
    assert_eq!(
        p.never_run,
        [NeverRun {
            task: TaskId::new(1, 4),
            stage: "d".into(),
            cause: "parent stage `b` failed".into()
        }]
    );
    assert_eq!(dags.len(), 1, "c still runs");
    dags.ended(TaskId::new(1, 3), false);
    assert!(dags.is_empty());

    let mut dags = Dags::default();
    dags.submitted(JobId(1), diamond(CONTINUE), tasks(5), &mut Vec::new());
    dags.ended(TaskId::new(1, 0), false);
    dags.ended(TaskId::new(1, 1), false);
    let p = dags.ended(TaskId::new(1, 2), true);
    assert!(p.released.is_empty() && p.never_run.is_empty());
    assert_eq!(&*p.blocked[0].waits_for, "c");
    let p = dags.ended(TaskId::new(1, 3), false);
    assert_eq!(ids(&p.released), [4], "d continues once b and c ended");
}

#[test]
fn a_failure_cascades_down_a_chain() {
    let chain = dag(
        &[
            ("a", &[], FAIL),
            ("b", &[0], FAIL),
            ("c", &[1], CONTINUE),
            ("d", &[2], FAIL),
        ],
        &[0, 1, 2, 3],
    );
    let mut dags = Dags::default();
    dags.submitted(JobId(1), chain, tasks(4), &mut Vec::new());
    let p = dags.ended(TaskId::new(1, 0), true);
    // b never runs; c continues (its parent ended, failed); d waits for c.
    assert_eq!(p.never_run.len(), 1);
    assert_eq!(&*p.never_run[0].cause, "parent stage `a` failed");
    assert_eq!(ids(&p.released), [2]);
    let p = dags.ended(TaskId::new(1, 2), false);
    assert_eq!(ids(&p.released), [3]);
}

#[test]
fn a_cancelled_job_returns_its_held_tasks_and_leaves() {
    let mut dags = Dags::default();
    dags.submitted(JobId(1), diamond(FAIL), tasks(5), &mut Vec::new());
    dags.ended(TaskId::new(1, 0), false);
    let mut held = dags.cancelled(JobId(1));
    held.sort();
    assert_eq!(
        held,
        [TaskId::new(1, 2), TaskId::new(1, 3), TaskId::new(1, 4)]
    );
    assert!(dags.is_empty());
    assert_eq!(dags.held(), 0);
    assert!(dags.ended(TaskId::new(1, 1), false).is_empty());
}

/// Job 1 (the diamond) runs after jobs 7 (when ok) and 8 (when any).
fn after(whens: &[(u64, AfterWhen)]) -> Arc<JobDag> {
    let mut dag = (*diamond(FAIL)).clone();
    dag.after_jobs = whens
        .iter()
        .map(|&(job, when)| AfterJob {
            job: JobId(job),
            when,
        })
        .collect();
    Arc::new(dag)
}

#[test]
fn a_job_runs_after_the_jobs_it_names_as_they_ended() {
    let mut dags = Dags::default();
    let mut blocked = Vec::new();
    let deps = after(&[(7, AfterWhen::Ok), (8, AfterWhen::Any)]);
    let now = dags.submitted(JobId(1), deps.clone(), tasks(5), &mut blocked);
    assert!(now.is_empty(), "every stage waits");
    assert_eq!(&*blocked[0].waits_for, "job 7");
    let mut awaited: Vec<_> = dags.awaited_jobs().collect();
    awaited.sort();
    assert_eq!(awaited, [JobId(7), JobId(8)]);
    let p = dags.job_ended(JobId(8), false);
    assert!(p.released.is_empty() && p.never_run.is_empty());
    assert_eq!(&*p.blocked[0].waits_for, "job 7");
    assert!(dags.job_ended(JobId(8), true).is_empty(), "a repeat");
    let p = dags.job_ended(JobId(7), true);
    assert_eq!(ids(&p.released), [0, 1], "stage a goes, the rest waits");
    assert_eq!(dags.awaited_jobs().count(), 0);

    // Job 7 failed: job 1 runs after it only when ok: nothing of it runs.
    let mut dags = Dags::default();
    dags.submitted(JobId(1), deps, tasks(5), &mut Vec::new());
    let p = dags.job_ended(JobId(7), false);
    assert_eq!(p.never_run.len(), 5, "{p:?}");
    assert_eq!(
        &*p.never_run[0].cause,
        "job 7 ended failed or cancelled; this job runs after it when ok"
    );
    assert!(dags.is_empty());
    assert!(dags.job_ended(JobId(8), true).is_empty());

    // `failed`: runs only when the other job did not finish.
    let mut dags = Dags::default();
    dags.submitted(
        JobId(1),
        after(&[(7, AfterWhen::Failed)]),
        tasks(5),
        &mut Vec::new(),
    );
    assert_eq!(ids(&dags.job_ended(JobId(7), false).released), [0, 1]);
}
