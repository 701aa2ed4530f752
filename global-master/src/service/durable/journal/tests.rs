use super::*;
use common::messages::TaskFailure;
use common::{Micros, Resources};

fn specs(job: u64, n: u32) -> Vec<TaskSpec> {
    (0..n)
        .map(|i| TaskSpec::short(TaskId::new(job, i), Resources::cores(1, 10), Micros(1_000)))
        .collect()
}

fn end(at: u64) -> Ended {
    Ended {
        attempt: 1,
        at: Micros(at),
        node: 3,
        failure: None,
        cancelled: false,
    }
}

fn accepted(at: u64) -> Accepted {
    Accepted {
        accepted_at: Micros(at),
        user: Some("ana".into()),
        retry: None,
        idempotency: None,
    }
}

#[test]
fn a_life_starts_above_the_journals_last_whatever_the_clock_says() {
    assert_eq!(next_life(500, None), 500);
    assert_eq!(next_life(0, None), 1);
    assert_eq!(next_life(500, Some(100)), 500);
    // The clock is behind the last life (set back, or another host's).
    assert_eq!(next_life(500, Some(900)), 901);
    assert_eq!(next_life(900, Some(900)), 901);
    let dir = std::env::temp_dir().join(format!("megha-journal-life-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        assert_eq!(j.last_life().unwrap(), None);
        assert_eq!(j.begin_life(1_000).unwrap(), 1_000);
        // While this process holds the journal, another open is refused as
        // locked (a standby waits on this).
        let err = Journal::open(&dir, &ClusterName::default()).unwrap_err();
        assert!(err.is_locked(), "{err}");
    }
    // The next process's clock is behind: its life is still above.
    let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(j.last_life().unwrap(), Some(1_000));
    assert_eq!(j.begin_life(400).unwrap(), 1_001);
    assert_eq!(j.begin_life(5_000).unwrap(), 5_000);
    drop(j);
    let (j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(j.last_life().unwrap(), Some(5_000));
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn accepted_jobs_and_ends_survive_a_reopen_and_ended_jobs_leave() {
    let dir = std::env::temp_dir().join(format!("megha-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
        assert!(recovered.is_empty());
        j.accept(JobId(7), &accepted(5), &specs(7, 3)).unwrap();
        j.accept(JobId(8), &accepted(6), &specs(8, 1)).unwrap();
        j.ended(&[(TaskId::new(7, 1), end(10))], &[]).unwrap();
        // Job 8's only task ends: the job leaves; a repeat changes nothing.
        j.ended(&[(TaskId::new(8, 0), end(11))], &[]).unwrap();
        j.ended(&[(TaskId::new(8, 0), end(12))], &[]).unwrap();
        // A task of a job the journal never had is skipped.
        j.ended(&[(TaskId::new(99, 0), end(12))], &[]).unwrap();
        assert_eq!(j.jobs(), 1);
        assert!(j.holds(JobId(7)));
        assert!(!j.holds(JobId(8)) && !j.holds(JobId(99)));
    }
    let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(j.holds(JobId(7)) && !j.holds(JobId(8)));
    let r = &recovered[0];
    assert_eq!((r.job, &r.accepted), (JobId(7), &accepted(5)));
    assert_eq!(r.tasks, specs(7, 3));
    assert_eq!(r.ended.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert_eq!(r.ended[&1], end(10));
    // The rest ends (once each, even if reported twice): the job leaves.
    j.ended(
        &[(TaskId::new(7, 0), end(20)), (TaskId::new(7, 0), end(21))],
        &[],
    )
    .unwrap();
    j.ended(&[(TaskId::new(7, 2), end(22))], &[]).unwrap();
    assert_eq!(j.jobs(), 0);
    drop(j);
    let (_, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert!(recovered.is_empty(), "{recovered:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_retried_task_is_read_back_with_the_run_it_goes_out_as_next() {
    let dir = std::env::temp_dir().join(format!("megha-journal-runs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.accept(JobId(7), &accepted(5), &specs(7, 2)).unwrap();
        // Run 1 of task 0 failed (its end is not final): run 2 next, then run 3.
        j.ended(&[], &[(TaskId::new(7, 0), 2, 1)]).unwrap();
        j.ended(&[], &[(TaskId::new(7, 0), 3, 2)]).unwrap();
        // Runs of a job the journal does not have are skipped.
        j.ended(&[], &[(TaskId::new(99, 0), 2, 1)]).unwrap();
    }
    let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].runs, BTreeMap::from([(0, (3, 2))]));
    assert!(recovered[0].ended.is_empty());
    // Run 3 ends in the same step as task 1 fails for its first retry.
    let mut third = end(30);
    third.attempt = 3;
    j.ended(
        &[(TaskId::new(7, 0), third.clone())],
        &[(TaskId::new(7, 1), 2, 1)],
    )
    .unwrap();
    drop(j);
    let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(
        recovered[0].runs,
        BTreeMap::from([(0, (3, 2)), (1, (2, 1))])
    );
    assert_eq!(recovered[0].ended[&0], third);
    // The job ends: its runs leave with it.
    j.ended(&[(TaskId::new(7, 1), end(40))], &[]).unwrap();
    drop(j);
    let (_, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert!(recovered.is_empty(), "{recovered:?}");
    let db = Database::create(dir.join("journal.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(txn.open_table(RUNS).unwrap().iter().unwrap().count(), 0);
    drop(txn);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_jobs_name_and_labels_survive_a_reopen_and_leave_with_it() {
    use crate::service::admission::api::JobNames;
    let dir = std::env::temp_dir().join(format!("megha-journal-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let names = JobNames {
        name: Some("train".into()),
        labels: [("team".to_owned(), "ml".to_owned())].into(),
    };
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.accept_job(
            JobId(7),
            &accepted(5),
            &specs(7, 1),
            JobParts {
                names: Some(&names),
                ..JobParts::default()
            },
        )
        .unwrap();
        j.accept(JobId(8), &accepted(6), &specs(8, 1)).unwrap();
    }
    let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 2, "{recovered:?}");
    assert_eq!((recovered[0].job, &recovered[0].names), (JobId(7), &names));
    assert_eq!(
        recovered[1].names,
        JobNames::default(),
        "a job without names"
    );
    // The job ends: its names leave with it.
    j.ended(&[(TaskId::new(7, 0), end(10))], &[]).unwrap();
    drop(j);
    let (_, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].job, JobId(8));
    drop(recovered);
    let db = redb::Database::open(dir.join("journal.redb")).expect("the journal, closed");
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(NAMES).unwrap();
    assert!(table.get(7).unwrap().is_none(), "job 7's names left");
    drop((table, txn, db));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dag_and_the_outcomes_of_closed_jobs_survive_a_reopen() {
    use common::dag::{AfterJob, AfterWhen, OnParentFailure, Stage};
    let dir = std::env::temp_dir().join(format!("megha-journal-dag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dag = JobDag {
        stages: vec![Stage {
            name: "job".into(),
            after: Vec::new(),
            on_parent_failure: OnParentFailure::Fail,
        }],
        task_stage: vec![0, 0],
        after_jobs: vec![AfterJob {
            job: JobId(8),
            when: AfterWhen::Ok,
        }],
    };
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.accept(JobId(8), &accepted(1), &specs(8, 2)).unwrap();
        j.accept(JobId(9), &accepted(1), &specs(9, 1)).unwrap();
        j.accept_job(
            JobId(10),
            &accepted(2),
            &specs(10, 2),
            JobParts {
                dag: Some(&dag),
                ..JobParts::default()
            },
        )
        .unwrap();
        // Job 8 finishes, job 9 fails: both leave, their outcomes stay.
        j.ended(
            &[(TaskId::new(8, 0), end(3)), (TaskId::new(8, 1), end(4))],
            &[],
        )
        .unwrap();
        let failed = Ended {
            failure: Some(TaskFailure::Exit { code: 1 }),
            ..end(5)
        };
        j.ended(&[(TaskId::new(9, 0), failed)], &[]).unwrap();
        assert_eq!(
            j.outcomes(&[JobId(8), JobId(9), JobId(10)]).unwrap(),
            [(JobId(8), true), (JobId(9), false)]
        );
    }
    let (j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].dag.as_deref(), Some(&dag));
    assert_eq!(
        j.outcomes(&[JobId(8), JobId(9)]).unwrap(),
        [(JobId(8), true), (JobId(9), false)]
    );
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_spec_outlives_its_job_and_a_reopen_with_its_user() {
    let dir = std::env::temp_dir().join(format!("megha-journal-spec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        let parts = JobParts {
            spec: Some(b"packed"),
            ..JobParts::default()
        };
        j.accept_job(JobId(7), &accepted(5), &specs(7, 1), parts)
            .unwrap();
        j.accept(JobId(8), &accepted(6), &specs(8, 1)).unwrap();
        // Job 7 ends and leaves the journal; its spec stays.
        j.ended(&[(TaskId::new(7, 0), end(10))], &[]).unwrap();
    }
    let (j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let stored = j.spec(JobId(7)).unwrap().expect("job 7's spec is kept");
    assert_eq!(stored.packed, b"packed");
    assert_eq!(stored.user.as_deref(), Some("ana"));
    assert_eq!(j.spec(JobId(8)).unwrap(), None, "no spec given");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_rows_are_summed_kept_across_a_reopen_and_old_hours_dropped() {
    use crate::service::observe::usage::Totals;
    let dir = std::env::temp_dir().join(format!("megha-journal-usage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let now_hour = service_kit::clock::now().0 / 1_000_000 / 3600 * 3600;
    let run = Totals {
        runs: 1,
        wall_ms: 1500,
        cpu_milli_ms: 1_500_000,
        memory_mb_ms: 96_000,
        runs_measured: 1,
        cpu_used_us: 700_000,
        memory_peak_mb: 40,
    };
    let key = |hour: u64, user: &str| (hour, user.to_owned(), "default".to_owned());
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.add_usage([(key(now_hour, "ana"), run), (key(now_hour, "ana"), run)]);
        // Written with task ends, or alone.
        j.ended(&[], &[]).unwrap();
        j.add_usage([(key(now_hour, "bo"), run), (key(3600, "old"), run)]);
        j.ended(&[], &[]).unwrap();
    }
    let (j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
    let rows = j.usage_rows().unwrap();
    let mut two = run;
    two.add(&run);
    assert_eq!(
        (two.runs_measured, two.cpu_used_us, two.memory_peak_mb),
        (2, 1_400_000, 40),
        "CPU used summed, the peak the highest"
    );
    assert_eq!(
        rows,
        vec![(key(now_hour, "ana"), two), (key(now_hour, "bo"), run)],
        "summed per row; the hour past the retention dropped"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_journaled_before_priority_classes_is_taken_up_with_its_tasks_at_class_zero() {
    let cluster = ClusterName::default();
    let task = TaskSpec::short(TaskId::new(7, 0), Resources::cores(1, 10), Micros(1_000));
    // A version-8 record: the same envelope, tasks without the two new fields
    // (bincode writes a struct as the tuple of its fields).
    let old_task = (
        task.id,
        task.queue,
        task.kind,
        task.resources,
        task.constraints,
        task.duration,
        task.tags.clone(),
        task.executor.clone(),
        task.attempt,
    );
    let mut bytes = common::codec::encode(&cluster, &(accepted(5), vec![old_task])).unwrap();
    bytes[0] = 8;
    let job = decode_job(&cluster, &bytes).expect("a version-8 job reads");
    assert_eq!(job.accepted, accepted(5));
    assert_eq!(job.tasks, vec![task.clone()]);
    // This version's records read as they are, class and count kept.
    let now = JournalJob {
        accepted: accepted(6),
        tasks: vec![TaskSpec {
            priority: 100,
            preemptions: 2,
            ..task
        }],
    };
    let bytes = common::codec::encode(&cluster, &now).unwrap();
    assert_eq!(decode_job(&cluster, &bytes).unwrap(), now);
}

#[test]
fn a_jobs_priority_class_survives_a_reopen() {
    let dir = std::env::temp_dir().join(format!("megha-journal-prio-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let urgent: Vec<TaskSpec> = specs(7, 2)
        .into_iter()
        .map(|t| TaskSpec { priority: 100, ..t })
        .collect();
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.accept(JobId(7), &accepted(5), &urgent).unwrap();
    }
    let (_, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].tasks, urgent);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gang_spec_is_read_back_with_its_job_and_leaves_with_it() {
    let dir = std::env::temp_dir().join(format!("megha-journal-gang-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let gang = common::gang::GangSpec::all(2, Micros(60_000_000));
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        let parts = JobParts {
            gang: Some(&gang),
            ..JobParts::default()
        };
        j.accept_job(JobId(1), &accepted(1), &specs(1, 2), parts)
            .unwrap();
        // A job without a gang, as every job was written before gangs.
        j.accept(JobId(2), &accepted(1), &specs(2, 1)).unwrap();
        j.accept_job(JobId(3), &accepted(1), &specs(3, 1), parts)
            .unwrap();
        j.ended(&[(TaskId::new(3, 0), end(2))], &[]).unwrap();
    }
    let (j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    let gangs: Vec<(JobId, Option<common::gang::GangSpec>)> =
        recovered.iter().map(|r| (r.job, r.gang)).collect();
    assert_eq!(gangs, [(JobId(1), Some(gang)), (JobId(2), None)]);
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gang_that_left_its_coordinator_reads_back_without_its_spec_and_a_restart_whole_reopens_it() {
    let dir = std::env::temp_dir().join(format!("megha-journal-gang-left-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let gang = common::gang::GangSpec::all(2, Micros(60_000_000));
    let parts = JobParts {
        gang: Some(&gang),
        ..JobParts::default()
    };
    {
        let (mut j, _) = Journal::open(&dir, &ClusterName::default()).unwrap();
        j.accept_job(JobId(1), &accepted(1), &specs(1, 2), parts)
            .unwrap();
        j.accept_job(JobId(4), &accepted(1), &specs(4, 2), parts)
            .unwrap();
        // Gang 1 started whole (it resumes as ordinary tasks); gang 4 ran in
        // part: one member ended, then the gang was restarted whole as run 2.
        j.gangs_left(&[JobId(1)]).unwrap();
        j.ended(&[(TaskId::new(4, 0), end(2))], &[]).unwrap();
        j.gang_restarted(&[(TaskId::new(4, 0), 2), (TaskId::new(4, 1), 2)])
            .unwrap();
    }
    let (mut j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    let read: Vec<_> = (recovered.iter())
        .map(|r| (r.job, r.gang, r.ended.len(), r.runs.clone()))
        .collect();
    let runs = BTreeMap::from([(0, (2, 0)), (1, (2, 0))]);
    assert_eq!(
        read,
        [
            (JobId(1), None, 0, BTreeMap::new()),
            (JobId(4), Some(gang), 0, runs)
        ]
    );
    // The restarted members' ends close the job (its void end no longer counts).
    j.ended(&[(TaskId::new(4, 0), end(3))], &[]).unwrap();
    j.ended(&[(TaskId::new(4, 1), end(3))], &[]).unwrap();
    drop(j);
    let (j, recovered) = Journal::open(&dir, &ClusterName::default()).unwrap();
    let jobs: Vec<JobId> = recovered.iter().map(|r| r.job).collect();
    assert_eq!(jobs, [JobId(1)]);
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}
