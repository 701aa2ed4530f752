use super::*;

fn order(task: u64, cores: u64, secs: u64, kind: TaskKind) -> StartTask {
    StartTask {
        node: NodeId(0),
        dispatch: Default::default(),
        task: TaskSpec::short(
            TaskId::new(task, 0),
            Resources::cores(cores, 1),
            Micros::from_secs(secs),
        )
        .with_kind(kind),
    }
}

/// A lost run still held when its retry arrives (the worker was cut off, not
/// dead): the retry supersedes it; orders and ends name their run.
#[test]
fn a_retry_supersedes_the_run_it_replaces_and_orders_name_their_run() {
    let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
    w.start_task(Micros(0), order(1, 2, 30, TaskKind::Short))
        .unwrap();
    let mut retry = order(1, 2, 3, TaskKind::Short);
    retry.task.attempt = 2;
    let r = w.start_task(Micros(1), retry.clone()).unwrap();
    assert!(matches!(
        &r[..],
        [
            WorkerReport::Killed { attempt: 1, .. },
            WorkerReport::Started { attempt: 2, .. }
        ]
    ));
    // The same run again is a duplicate; an older one too.
    assert!(w.start_task(Micros(2), retry).is_err());
    assert!(w
        .start_task(Micros(2), order(1, 2, 3, TaskKind::Short))
        .is_err());
    // A kill of the replaced run does not touch the retry.
    assert!(w.kill(Micros(2), TaskId::new(1, 0), 1).is_err());
    let r = w.advance(Micros::from_secs(4));
    assert!(matches!(
        &r[..],
        [WorkerReport::Finished { attempt: 2, .. }]
    ));
}

#[test]
fn holds_resources_for_the_duration() {
    let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
    let r = w
        .start_task(Micros(0), order(1, 2, 3, TaskKind::Short))
        .unwrap();
    assert_eq!(
        r,
        vec![WorkerReport::Started {
            attempt: 1,
            node: NodeId(0),
            task: TaskId::new(1, 0),
            at: Micros(0)
        }]
    );
    assert_eq!(w.free(), Resources::new(0, 9));
    assert_eq!(w.next_wakeup(), Some(Micros::from_secs(3)));
    assert!(w.advance(Micros::from_secs(2)).is_empty());
    let r = w.advance(Micros::from_secs(3));
    assert_eq!(r.len(), 1);
    assert_eq!(w.free(), w.capacity());
}

#[test]
fn killing_frees_resources_and_reports_nothing() {
    let mut w = Worker::new(NodeId(0), Resources::cores(1, 10));
    w.start_task(Micros(0), order(1, 1, 5, TaskKind::Short))
        .unwrap();
    let r = w.kill(Micros(7), TaskId::new(1, 0), 1).unwrap();
    assert!(matches!(r, WorkerReport::Killed { at: Micros(7), .. }));
    assert_eq!(w.free(), w.capacity());
    assert!(w.advance(Micros::from_secs(9)).is_empty());
    assert_eq!(
        w.kill(Micros(8), TaskId::new(1, 0), 1),
        Err(WorkerError::NotHere {
            task: TaskId::new(1, 0)
        })
    );
}

#[test]
fn never_over_commits_short_work_but_queues_queueable() {
    let mut w = Worker::new(NodeId(0), Resources::cores(1, 10));
    w.start_task(Micros(0), order(1, 1, 5, TaskKind::Short))
        .unwrap();
    assert!(matches!(
        w.start_task(Micros(0), order(2, 1, 5, TaskKind::Short)),
        Err(WorkerError::NoRoom { .. })
    ));
    assert!(w
        .start_task(Micros(0), order(3, 1, 5, TaskKind::Queueable))
        .unwrap()
        .is_empty());
    assert_eq!(w.queued(), 1);
    let r = w.advance(Micros::from_secs(5));
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(3, 0)));
}

#[test]
fn guaranteed_work_kills_the_fewest_queueable_tasks_and_never_queues() {
    let mut w = Worker::new(NodeId(0), Resources::cores(3, 10));
    for (id, at) in [(1, 0), (2, 1), (3, 2)] {
        w.start_task(Micros(at), order(id, 1, 9, TaskKind::Queueable))
            .unwrap();
    }
    let r = w
        .start_task(Micros(3), order(4, 2, 9, TaskKind::Guaranteed))
        .unwrap();
    let killed: Vec<TaskId> = r
        .iter()
        .filter_map(|r| match r {
            WorkerReport::Killed { task, .. } => Some(*task),
            _ => None,
        })
        .collect();
    assert_eq!(killed, vec![TaskId::new(3, 0), TaskId::new(2, 0)]);
    assert!(matches!(r.last(), Some(WorkerReport::Started { .. })));
    assert_eq!(w.queued(), 0);
    // Only GUARANTEED work left in the way: refused, not queued.
    w.start_task(Micros(4), order(5, 1, 9, TaskKind::Guaranteed))
        .unwrap();
    assert!(matches!(
        w.start_task(Micros(4), order(6, 1, 9, TaskKind::Guaranteed)),
        Err(WorkerError::NoRoom { .. })
    ));
    assert_eq!(w.queued(), 0);
}

#[test]
fn queue_order_by_job_submission_and_the_queueable_cap() {
    let mut w = Worker::new(NodeId(0), Resources::cores(2, 10))
        .with_queue_order(QueueOrder::JobSubmission)
        .with_queueable_limit(Resources::cores(1, 10));
    w.start_task(Micros(0), order(5, 1, 1, TaskKind::Queueable))
        .unwrap();
    // The cap holds the second one back although a core is free.
    for id in [9, 7, 8] {
        assert!(w
            .start_task(Micros(0), order(id, 1, 1, TaskKind::Queueable))
            .unwrap()
            .is_empty());
    }
    let jobs: Vec<u64> = w.queue().map(|t| t.id.job.0).collect();
    assert_eq!(jobs, vec![7, 8, 9]);
    // Services' ids carry the GM in the top bits: GM 1's job submitted at t = 6
    // goes before GM 0's of t = 7, not after every job of GM 0.
    let of_gm1 = common::JobId::stamped(1, 6, None).0;
    assert!(w
        .start_task(Micros(0), order(of_gm1, 1, 1, TaskKind::Queueable))
        .unwrap()
        .is_empty());
    let jobs: Vec<u64> = w.queue().map(|t| t.id.job.0).collect();
    assert_eq!(jobs, vec![of_gm1, 7, 8, 9]);
    let r = w.advance(Micros::from_secs(1));
    assert!(matches!(r[1], WorkerReport::Started { task, .. } if task == TaskId::new(of_gm1, 0)));
    assert_eq!(w.running().len(), 1);
}

#[test]
fn a_promoted_task_is_never_reclaimed() {
    let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
    for (id, at) in [(1, 0), (2, 1)] {
        w.start_task(Micros(at), order(id, 1, 9, TaskKind::Queueable))
            .unwrap();
    }
    w.promote(TaskId::new(2, 0)).unwrap();
    assert_eq!(w.queueable_held(), Resources::cores(1, 1));
    // Two cores needed, one reclaimable: refused; the promoted task stays.
    assert!(matches!(
        w.start_task(Micros(2), order(3, 2, 9, TaskKind::Guaranteed)),
        Err(WorkerError::NoRoom { .. })
    ));
    let r = w
        .start_task(Micros(2), order(4, 1, 9, TaskKind::Guaranteed))
        .unwrap();
    assert!(matches!(r[0], WorkerReport::Killed { task, .. } if task == TaskId::new(1, 0)));
    assert!(w.running().iter().any(|t| t.task == TaskId::new(2, 0)));
    assert_eq!(
        w.promote(TaskId::new(1, 0)),
        Err(WorkerError::NotHere {
            task: TaskId::new(1, 0)
        })
    );
}

/// A fence finishes what is due, stops every other run (its executor too) and
/// queued task, reports them lost, and leaves the worker empty and able to take
/// new work.
#[test]
fn a_fence_stops_everything_held_and_reports_it_lost() {
    let mut w = Worker::new(NodeId(0), Resources::cores(2, 10));
    w.start_task(Micros(0), order(1, 1, 5, TaskKind::Short))
        .unwrap();
    let mut exec = order(2, 1, 60, TaskKind::Queueable);
    exec.task.executor = Some(Executor::Exec(Default::default()));
    w.start_task(Micros(0), exec).unwrap();
    w.start_task(Micros(0), order(3, 2, 9, TaskKind::Queueable))
        .unwrap();
    assert_eq!(w.queued(), 1);
    w.take_exec_orders();
    let out = w
        .step(
            Micros::from_secs(5),
            crate::WorkerInput::Fence {
                reason: "cut off".into(),
            },
        )
        .unwrap();
    let reports: Vec<WorkerReport> = out
        .to_lm
        .into_iter()
        .map(|common::protocol::WorkerToLm::Report(r)| r)
        .collect();
    assert!(
        matches!(&reports[0], WorkerReport::Finished { task, .. } if *task == TaskId::new(1, 0)),
        "a task due by the fence finishes: {reports:?}"
    );
    let lost: Vec<TaskId> = reports[1..]
        .iter()
        .map(|r| match r {
            WorkerReport::Failed {
                task,
                failure: TaskFailure::Lost { reason },
                ..
            } if reason == "cut off" => *task,
            other => panic!("not a lost report: {other:?}"),
        })
        .collect();
    assert_eq!(lost, vec![TaskId::new(2, 0), TaskId::new(3, 0)]);
    assert_eq!(
        out.exec,
        vec![crate::ExecOrder::Stop {
            task: TaskId::new(2, 0),
            attempt: 1
        }]
    );
    assert!(w.running().is_empty() && w.queued() == 0);
    assert_eq!(w.free(), w.capacity());
    assert!(w
        .start_task(Micros::from_secs(6), order(4, 2, 1, TaskKind::Short))
        .is_ok());
}
