//! Unit tests of `status.rs`.

use super::*;
use common::messages::{TaskEnd, TaskFailure};

fn end(task: TaskId, failure: Option<TaskFailure>) -> TaskEnd {
    TaskEnd {
        used: None,
        attempt: 1,
        task,
        node: NodeId(3),
        at: Micros(50),
        failure,
    }
}

#[test]
fn ends_are_final_and_make_the_job_state() {
    let mut t = Tracker::default();
    let (a, b) = (TaskId::new(1, 0), TaskId::new(1, 1));
    t.accepted(a, Micros(1));
    t.accepted(b, Micros(1));
    t.dispatched(a, LmId(0), NodeId(3));
    assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
    assert!(!t.has_ended(a), "dispatched, not ended");
    // The end can overtake the launch answer: the late answer changes nothing.
    t.ended(&end(a, None), Micros(60));
    assert!(t.has_ended(a));
    assert!(!t.has_ended(b) && !t.has_ended(TaskId::new(9, 0)));
    assert!(t.launched(a, Micros(9)).is_none());
    assert!(!t.pending(a, &PendingReason::NoStateYet, false));
    assert_eq!(t.task(a).expect("a").state, TaskState::Finished);
    assert_eq!(t.task(a).expect("a").ended_at_us, Some(50));
    assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
    t.launched(b, Micros(9));
    t.ended(&end(b, Some(TaskFailure::Exit { code: 3 })), Micros(60));
    // A repeated end (the LM's stream resends) is harmless.
    t.ended(&end(b, None), Micros(61));
    let s = t.task(b).expect("b");
    assert_eq!(s.state, TaskState::Failed);
    assert_eq!(s.failure, Some(TaskFailure::Exit { code: 3 }));
    assert_eq!(s.failures.len(), 1);
    let job = t.job(a.job).expect("job");
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.ended_at_us, Some(60));
    assert_eq!(job.states.get(&TaskState::Finished), Some(&1));
    assert!(
        !t.cancelled(b, Micros(70)),
        "an ended task is not cancelled"
    );
}

#[test]
fn a_start_shows_running_and_a_retry_queues_the_next_run() {
    let mut t = Tracker::default();
    let a = TaskId::new(1, 0);
    t.job_accepted(a.job, Micros(1), vec!["default".into()], None, 3);
    t.accepted(a, Micros(1));
    t.dispatched(a, LmId(0), NodeId(3));
    let start = TaskStart {
        attempt: 1,
        task: a,
        node: NodeId(3),
        at: Micros(20),
    };
    // The start can overtake the launch answer; the answer keeps `running`.
    t.started(&start);
    t.launched(a, Micros(21));
    let s = t.task(a).expect("a");
    assert_eq!(
        (s.state, s.started_at_us, s.max_attempts),
        (TaskState::Running, Some(20), 3)
    );
    let failed = end(a, Some(TaskFailure::Exit { code: 1 }));
    let retry = Retry {
        task: a,
        attempt: 2,
        failed: 1,
        at: Micros(1_000_050),
        failure: TaskFailure::Exit { code: 1 },
    };
    t.retrying(&failed, &retry);
    let s = t.task(a).expect("a");
    assert_eq!(s.state, TaskState::Queued);
    assert_eq!((s.attempt, s.retry_at_us), (2, Some(1_000_050)));
    assert_eq!(s.failures[0].attempt, 1);
    assert!(s
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("exited with code 1"));
    assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
    t.ended(&end(a, None), Micros(2_000_000));
    assert_eq!(t.job(a.job).expect("job").state, JobState::Finished);
}

#[test]
fn cancelled_tasks_are_final_and_the_job_ends_cancelled() {
    let mut t = Tracker::default();
    let (a, b) = (TaskId::new(1, 0), TaskId::new(1, 1));
    t.accepted(a, Micros(1));
    t.accepted(b, Micros(1));
    assert!(t.cancel_requested(a.job, Micros(5)));
    assert!(!t.cancel_requested(JobId(9), Micros(5)), "unknown job");
    assert!(t.cancelled(a, Micros(5)));
    assert!(
        !t.cancelled(a, Micros(6)),
        "a second cancel changes nothing"
    );
    assert_eq!(t.open_tasks(a.job), vec![b]);
    assert_eq!(t.job(a.job).expect("job").state, JobState::Active);
    // b finished before its LM got the kill: its finish stands.
    t.ended(&end(b, None), Micros(7));
    let job = t.job(a.job).expect("job");
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(job.cancel_requested_at_us, Some(5));
    assert!(!t.pending(a, &PendingReason::NoStateYet, false));
}

#[test]
fn ended_jobs_are_forgotten_after_the_retention_time_or_count() {
    let mut t = Tracker::new(Retention {
        keep: Duration::from_secs(10),
        max_jobs: 2,
    });
    for job in 1..=4 {
        t.accepted(TaskId::new(job, 0), Micros(job));
    }
    t.ended(&end(TaskId::new(1, 0), None), Micros(1_000_000));
    t.ended(&end(TaskId::new(2, 0), None), Micros(2_000_000));
    assert_eq!(t.expire(Micros(3_000_000)), 0);
    t.ended(&end(TaskId::new(3, 0), None), Micros(3_000_000));
    // Three ended, two kept: the oldest end goes.
    assert_eq!(t.expire(Micros(3_000_000)), 1);
    assert!(t.job(JobId(1)).is_none() && t.task(TaskId::new(1, 0)).is_none());
    // Ten seconds after its end, job 2 goes; job 4 (active) stays whatever its age.
    assert_eq!(t.expire(Micros(12_000_001)), 1);
    assert!(t.job(JobId(2)).is_none());
    assert_eq!(t.expire(Micros(100_000_000)), 1);
    assert!(t.job(JobId(4)).is_some());
    assert_eq!(t.size(), (1, 1));
    assert_eq!(t.forgotten, 3);
}

#[test]
fn jobs_list_in_pages_and_by_state_queue_and_user() {
    let mut t = Tracker::default();
    for job in 1..=5 {
        let queue = if job % 2 == 0 { "even" } else { "odd" };
        let user = (job == 3).then(|| "ana".to_owned());
        t.job_accepted(JobId(job), Micros(job), vec![queue.into()], user, 1);
        t.accepted(TaskId::new(job, 0), Micros(job));
    }
    t.ended(&end(TaskId::new(2, 0), None), Micros(60));
    t.ended(&end(TaskId::new(4, 0), None), Micros(60));
    let ids = |p: &JobPage| p.jobs.iter().map(|j| j.job).collect::<Vec<_>>();
    let all = JobFilter {
        order: JobOrder::Oldest,
        ..JobFilter::default()
    };
    let first = t.list(None, 2, &all);
    assert_eq!((ids(&first), first.next), (vec![1, 2], Some(2)));
    let second = t.list(first.next, 2, &all);
    assert_eq!((ids(&second), second.next), (vec![3, 4], Some(4)));
    let last = t.list(second.next, 2, &all);
    assert_eq!((ids(&last), last.next), (vec![5], None));
    // Newest first (the default): `next` pages on towards older jobs.
    let newest = JobFilter::default();
    let first = t.list(None, 2, &newest);
    assert_eq!((ids(&first), first.next), (vec![5, 4], Some(4)));
    let second = t.list(first.next, 2, &newest);
    assert_eq!((ids(&second), second.next), (vec![3, 2], Some(2)));
    let last = t.list(second.next, 2, &newest);
    assert_eq!((ids(&last), last.next), (vec![1], None));
    // A job submitted meanwhile is on the first page, not between pages.
    t.job_accepted(JobId(6), Micros(6), vec!["odd".into()], None, 1);
    t.accepted(TaskId::new(6, 0), Micros(6));
    assert_eq!(ids(&t.list(Some(4), 10, &newest)), vec![3, 2, 1]);
    assert_eq!(ids(&t.list(None, 1, &newest)), vec![6]);
    let oldest_after_4 = t.list(Some(4), 10, &all);
    assert_eq!(ids(&oldest_after_4), vec![5, 6]);
    let by = |state, queue: Option<&str>, user: Option<&str>| {
        let filter = JobFilter {
            state,
            queue: queue.map(str::to_owned),
            user: user.map(str::to_owned),
            order: JobOrder::Oldest,
            ..JobFilter::default()
        };
        ids(&t.list(None, 10, &filter))
    };
    assert_eq!(by(Some(JobState::Finished), None, None), vec![2, 4]);
    assert_eq!(by(Some(JobState::Active), None, None), vec![1, 3, 5, 6]);
    assert_eq!(by(None, Some("odd"), None), vec![1, 3, 5, 6]);
    assert_eq!(
        by(Some(JobState::Finished), Some("odd"), None),
        Vec::<u64>::new()
    );
    assert_eq!(by(None, None, Some("ana")), vec![3]);
}

#[test]
fn a_preempted_task_shows_killed_with_its_reason_until_dispatched_again() {
    let mut t = Tracker::default();
    let a = TaskId::new(1, 0);
    t.accepted(a, Micros(1));
    t.dispatched(a, LmId(0), NodeId(3));
    t.launched(a, Micros(2));
    t.started(&TaskStart {
        attempt: 1,
        task: a,
        node: NodeId(3),
        at: Micros(3),
    });
    let reason = PendingReason::Preempted { lm: LmId(0) };
    t.killed(a, LmId(0), &reason, Micros(40), Micros(50));
    let s = t.task(a).expect("a");
    assert_eq!(s.state, TaskState::Killed);
    assert_eq!(s.reason.as_deref(), Some(reason.to_string().as_str()));
    assert_eq!((s.lm, s.node, s.started_at_us), (None, None, None));
    assert_eq!(s.killed_runs.len(), 1);
    let run = &s.killed_runs[0];
    assert_eq!(
        (run.attempt, run.lm, run.node, run.ran_us),
        (1, 0, Some(3), 40)
    );
    // The LM resends: one killed run still. A new reason while it waits keeps `killed`.
    t.killed(a, LmId(0), &reason, Micros(40), Micros(51));
    assert!(t.pending(a, &PendingReason::NoStateYet, false));
    let s = t.task(a).expect("a");
    assert_eq!((s.state, s.killed_runs.len()), (TaskState::Killed, 1));
    // The job counts it killed, and is still active.
    let job = t.job(a.job).expect("job");
    assert_eq!(job.states.get(&TaskState::Killed), Some(&1));
    assert_eq!(job.state, JobState::Active);
    // Dispatched again: the history stays, the state moves on.
    t.dispatched(a, LmId(1), NodeId(0));
    let s = t.task(a).expect("a");
    assert_eq!((s.state, s.killed_runs.len()), (TaskState::Dispatched, 1));
    t.ended(&end(a, None), Micros(90));
    assert_eq!(t.task(a).expect("a").state, TaskState::Finished);
    // A kill reported after the end changes nothing.
    t.killed(a, LmId(0), &reason, Micros(1), Micros(95));
    assert_eq!(t.task(a).expect("a").killed_runs.len(), 1);
}

#[test]
fn jobs_are_found_by_name_and_label() {
    use crate::service::admission::api::JobNames;
    let mut t = Tracker::default();
    for job in 1..=3 {
        t.job_accepted(JobId(job), Micros(job), vec!["q".into()], None, 1);
        t.accepted(TaskId::new(job, 0), Micros(job));
        let names = JobNames {
            name: (job != 2).then(|| "train".to_owned()),
            labels: [("team".to_owned(), format!("t{}", job % 2))].into(),
        };
        t.named(JobId(job), names);
    }
    let ids = |f: JobFilter| {
        t.list(None, 10, &f)
            .jobs
            .iter()
            .map(|j| j.job)
            .collect::<Vec<_>>()
    };
    let name = |n: &str| JobFilter {
        name: Some(n.to_owned()),
        ..JobFilter::default()
    };
    let label = |k: &str, v: &str| JobFilter {
        label: Some((k.to_owned(), v.to_owned())),
        ..JobFilter::default()
    };
    assert_eq!(ids(name("train")), vec![3, 1], "names need not be unique");
    assert_eq!(ids(name("other")), Vec::<u64>::new());
    assert_eq!(ids(label("team", "t1")), vec![3, 1]);
    assert_eq!(ids(label("team", "t0")), vec![2]);
    assert_eq!(ids(label("team", "t")), Vec::<u64>::new());
    assert_eq!(ids(label("nope", "t0")), Vec::<u64>::new());
    let both = JobFilter {
        label: Some(("team".into(), "t0".into())),
        ..name("train")
    };
    assert_eq!(ids(both), Vec::<u64>::new());
    let job = t.job(JobId(1)).expect("job");
    assert_eq!(job.name.as_deref(), Some("train"));
    assert_eq!(job.labels.get("team").map(String::as_str), Some("t1"));
}
