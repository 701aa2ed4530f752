use super::*;
use common::messages::Placement;
use common::{GmId, LmId, NodeId, Resources, TaskSpec};

fn ev(task: TaskId, at: u64, kind: TaskEventKind) -> TaskEvent {
    TaskEvent {
        task,
        at: Micros(at),
        kind,
    }
}

/// Trace job 0: one one-core task of `kind`, 100 µs long.
fn one_task_job(kind: TaskKind) -> Job {
    Job {
        id: 0,
        dag: None,
        arrival: Micros(0),
        tasks: vec![
            TaskSpec::short(TaskId::new(0, 0), Resources::cores(1, 1), Micros(100)).with_kind(kind),
        ],
    }
}

#[test]
fn preemptions_and_out_of_order_dispatches() {
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
    let id = TaskId::new(77, 0);
    rec.submitted(0, JobId(77), Micros(0));
    let (lm, n0, n1) = (LmId(0), NodeId(0), NodeId(1));
    let dispatched = TaskEventKind::Dispatched {
        gm: GmId(0),
        lm,
        node: n0,
        placement: Placement::Internal,
        branch: Some("utility.prefer".into()),
    };
    let late = match dispatched.clone() {
        TaskEventKind::Dispatched {
            gm,
            lm,
            node,
            placement,
            ..
        } => TaskEventKind::Dispatched {
            gm,
            lm,
            node,
            placement,
            branch: None,
        },
        _ => unreachable!(),
    };
    // First run on n0, preempted; second run launched by a preemption on n1,
    // whose events overtake the (late) dispatch of a rejected attempt.
    for e in [
        ev(id, 1, dispatched.clone()),
        ev(id, 2, TaskEventKind::Launched { lm, node: n0 }),
        ev(id, 3, TaskEventKind::Started { lm, node: n0 }),
        ev(
            id,
            10,
            TaskEventKind::Preempted {
                lm,
                node: n0,
                lost: Micros(7),
            },
        ),
        ev(id, 20, TaskEventKind::Launched { lm, node: n1 }),
        ev(id, 21, TaskEventKind::Started { lm, node: n1 }),
        ev(id, 15, late),
        ev(id, 90, TaskEventKind::finished(lm, n1)),
    ] {
        rec.apply(ev(e.task, e.at.0, e.kind));
    }
    assert!(rec.started_twice().is_empty(), "one start per run");
    assert!(rec.unfinished().is_empty());
    assert_eq!(
        (rec.counters.preemptions, rec.counters.wasted),
        (1, Micros(7))
    );
    assert_eq!(
        rec.counters.queueable_kills, 0,
        "a short task was preempted"
    );
    let out = rec.into_outcome(Micros(100));
    // Two runs for the per-queue shares: until the preemption, then to the end.
    let runs: Vec<_> = out.runs.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(
        runs,
        [
            (Micros(3), Some(Micros(10))),
            (Micros(21), Some(Micros(90)))
        ]
    );
    assert!(out
        .runs
        .iter()
        .all(|r| r.resources == Resources::cores(1, 1)));
    let r = &out.records[0];
    assert_eq!(
        (r.node, r.start, r.preemptions),
        (Some(n1), Some(Micros(21)), 1)
    );
    // The branch of its dispatch, for tasks.csv; the late one does not move it.
    let branch = out.branches.get(&TaskId::new(0, 0)).map(|b| &**b);
    assert_eq!(branch, Some("utility.prefer"));
}

#[test]
fn a_failed_task_ends_the_wait_without_a_finish() {
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
    let id = TaskId::new(9, 0);
    rec.submitted(0, JobId(9), Micros(0));
    let (lm, node) = (LmId(0), NodeId(0));
    rec.apply(ev(id, 1, TaskEventKind::Started { lm, node }));
    assert_eq!(rec.done(), 0);
    let detail = "exited with code 3".to_owned();
    rec.apply(ev(id, 5, TaskEventKind::failed(detail)));
    assert_eq!(rec.done(), 1);
    assert!(rec.unfinished().is_empty());
    let out = rec.into_outcome(Micros(10));
    assert_eq!(out.records[0].finish, None, "failed, not finished");
    assert_eq!(out.runs[0].end, Some(Micros(5)), "the run ended");
}

/// A task its GM suspended on a graceful stop (journalled) is still waited for:
/// the GM's next life runs it.
#[test]
fn a_suspended_task_is_waited_for_until_it_finishes() {
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
    let id = TaskId::new(9, 0);
    rec.submitted(0, JobId(9), Micros(0));
    let gm = common::GmId(0);
    rec.apply(ev(id, 1, TaskEventKind::Queued { gm }));
    rec.apply(ev(id, 2, TaskEventKind::Suspended { gm }));
    assert_eq!(rec.done(), 0, "suspended: not ended");
    assert_eq!(rec.unfinished(), vec![(0, 0)]);
    let (lm, node) = (LmId(0), NodeId(0));
    rec.apply(ev(id, 8, TaskEventKind::Started { lm, node }));
    rec.apply(ev(id, 9, TaskEventKind::finished(lm, node)));
    assert_eq!(rec.done(), 1);
    assert!(rec.unfinished().is_empty());
    assert_eq!(
        rec.into_outcome(Micros(10)).records[0].finish,
        Some(Micros(9))
    );
}

#[test]
fn a_failed_task_its_gm_retries_is_waited_for_and_may_start_again() {
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
    let id = TaskId::new(9, 0);
    rec.submitted(0, JobId(9), Micros(0));
    let (lm, node) = (LmId(0), NodeId(0));
    rec.apply(ev(id, 1, TaskEventKind::Started { lm, node }));
    let detail = "lost: no word from its worker".to_owned();
    rec.apply(ev(id, 5, TaskEventKind::failed(detail)));
    assert_eq!(rec.done(), 1);
    let reason = common::reasons::PendingReason::NoStateYet;
    rec.apply(ev(
        id,
        6,
        TaskEventKind::Requeued {
            gm: common::GmId(0),
            reason,
        },
    ));
    assert_eq!(rec.done(), 0, "retried: not ended");
    rec.apply(ev(id, 8, TaskEventKind::Started { lm, node }));
    rec.apply(ev(id, 9, TaskEventKind::finished(lm, node)));
    assert_eq!(rec.done(), 1);
    assert!(rec.started_twice().is_empty(), "one start per attempt");
    // A third start would be one too many.
    rec.apply(ev(id, 10, TaskEventKind::Started { lm, node }));
    assert_eq!(rec.started_twice().len(), 1);
}

/// The GM's `Requeued` (the retry) overtakes the LM's `Failed` (the lost run),
/// as when the LM was cut off the network: one start per run all the same, and the
/// task is waited for until its retry ends.
#[test]
fn a_retry_seen_before_the_failure_it_follows_is_one_start_per_run() {
    let (lm, node) = (LmId(0), NodeId(0));
    let id = TaskId::new(9, 0);
    let lost = || TaskEventKind::failed("lost: no word from its worker");
    let requeued = || TaskEventKind::Requeued {
        gm: common::GmId(0),
        reason: common::reasons::PendingReason::NoStateYet,
    };
    // Failed before the second start, or after it.
    for late_failure in [false, true] {
        let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
        rec.submitted(0, JobId(9), Micros(0));
        rec.apply(ev(id, 1, TaskEventKind::Started { lm, node }));
        rec.apply(ev(id, 6, requeued()));
        if late_failure {
            rec.apply(ev(id, 8, TaskEventKind::Started { lm, node }));
            rec.apply(ev(id, 5, lost()));
        } else {
            rec.apply(ev(id, 5, lost()));
            assert_eq!(rec.done(), 1);
            rec.apply(ev(id, 8, TaskEventKind::Started { lm, node }));
            assert_eq!(rec.done(), 0, "started again: not ended");
        }
        rec.apply(ev(id, 9, TaskEventKind::finished(lm, node)));
        assert_eq!(rec.done(), 1);
        assert!(rec.unfinished().is_empty());
        assert!(
            rec.started_twice().is_empty(),
            "one start per run (late failure: {late_failure})"
        );
        // A third start is one too many.
        rec.apply(ev(id, 10, TaskEventKind::Started { lm, node }));
        assert_eq!(rec.started_twice().len(), 1);
    }
}

/// A run started twice with no failure between is caught even if both runs end.
#[test]
fn two_finished_runs_without_a_failure_are_a_task_started_twice() {
    let (lm, node) = (LmId(0), NodeId(0));
    let id = TaskId::new(9, 0);
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Short)], Micros(0));
    rec.submitted(0, JobId(9), Micros(0));
    rec.apply(ev(id, 1, TaskEventKind::Started { lm, node }));
    rec.apply(ev(
        id,
        2,
        TaskEventKind::Started {
            lm,
            node: NodeId(1),
        },
    ));
    rec.apply(ev(id, 5, TaskEventKind::finished(lm, node)));
    rec.apply(ev(id, 6, TaskEventKind::finished(lm, NodeId(1))));
    assert_eq!(rec.started_twice().len(), 1);
}

#[test]
fn a_killed_queueable_task_counts_as_a_queueable_kill_and_a_preemption() {
    let mut rec = Recorder::new(&[one_task_job(TaskKind::Queueable)], Micros(0));
    let id = TaskId::new(5, 0);
    rec.submitted(0, JobId(5), Micros(0));
    let (lm, node) = (LmId(0), NodeId(0));
    rec.apply(ev(id, 1, TaskEventKind::Started { lm, node }));
    let lost = Micros(4);
    rec.apply(ev(id, 5, TaskEventKind::Preempted { lm, node, lost }));
    assert_eq!(
        (rec.counters.preemptions, rec.counters.queueable_kills),
        (1, 1)
    );
}
