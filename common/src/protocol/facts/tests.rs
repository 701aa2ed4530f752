//! The facts the drivers read instead of matching: each as the drivers' matches
//! had it before they moved here (issue 34).

use super::*;
use crate::messages::{
    CancelRequest, EndsPublished, GangRequest, LaunchBatch, LaunchRequest, PreemptedTasks,
    TaskFailure, TasksEnded,
};
use crate::protocol::kind;
use crate::{GmId, JobId, LmId, Resources};

fn spec(job: u64, index: u32) -> TaskSpec {
    TaskSpec::short(TaskId::new(job, index), Resources::new(1000, 10), Micros(5))
}

fn request(job: u64, index: u32) -> LaunchRequest {
    LaunchRequest {
        task: spec(job, index),
        node: NodeId(0),
        placement: Placement::Internal,
    }
}

fn gang(op: GangOp) -> GmToLm {
    GmToLm::Gang(GangRequest {
        gm: GmId(0),
        life: 1,
        lm: LmId(1),
        job: JobId(7),
        generation: 2,
        op,
    })
}

fn asked(message: &GmToLm) -> Vec<(TaskId, Asked)> {
    let mut seen = Vec::new();
    message.for_each_task(|t, a| seen.push((t, a)));
    seen
}

#[test]
fn a_gang_reserve_is_refused_as_a_launch_under_backlog_its_commit_never() {
    let reserve = gang(GangOp::Reserve {
        requests: vec![request(7, 0), request(7, 1)],
        hold_for: Micros(10),
    });
    assert_eq!(reserve.backlog(), Backlog::RefusedAsLaunch);
    assert_eq!(
        asked(&reserve),
        vec![
            (TaskId::new(7, 0), Asked::GangReserve),
            (TaskId::new(7, 1), Asked::GangReserve)
        ]
    );
    for op in [
        GangOp::Commit,
        GangOp::Release,
        GangOp::Stop { members: vec![] },
    ] {
        let m = gang(op);
        assert_eq!(m.backlog(), Backlog::Taken, "{}", m.describe());
        assert!(asked(&m).is_empty());
    }
    let cancel = GmToLm::Cancel(CancelRequest {
        gm: GmId(0),
        lm: LmId(1),
        job: JobId(7),
    });
    assert_eq!(cancel.backlog(), Backlog::Taken);
    assert!(asked(&cancel).is_empty());
    let launch = GmToLm::Launch(LaunchBatch {
        gm: GmId(0),
        life: 1,
        lm: LmId(1),
        seq: 3,
        resend: false,
        requests: vec![request(8, 0)],
    });
    assert_eq!(launch.backlog(), Backlog::RefusedAsLaunch);
    assert_eq!(asked(&launch), vec![(TaskId::new(8, 0), Asked::Launch)]);
    assert_eq!(launch.kind(), kind::LAUNCH);
}

#[test]
fn ends_the_gm_publishes_and_what_each_message_says_of_its_tasks() {
    let end = |index, failure| TaskEnd {
        task: TaskId::new(9, index),
        attempt: 1,
        node: NodeId(2),
        at: Micros(40),
        failure,
        used: None,
    };
    let ended = |publish| {
        LmToGm::Ended(TasksEnded {
            lm: LmId(1),
            gm: GmId(0),
            ends: vec![
                end(0, None),
                end(1, Some(TaskFailure::Lost { reason: "x".into() })),
            ],
            publish,
        })
    };
    assert!(ended(EndsPublished::ByLm).ends_gm_publishes().is_none());
    let mut by_gm = ended(EndsPublished::ByGm);
    assert_eq!(by_gm.ends_gm_publishes().map(|e| e.ends.len()), Some(2));
    by_gm.ends_gm_publishes_mut().expect("ends").ends.clear();
    assert_eq!(by_gm.ends_gm_publishes().map(|e| e.ends.len()), Some(0));
    let mut lost = 0;
    ended(EndsPublished::ByLm).for_each_task(|_, fact| {
        if let TaskFact::Ended(e) = fact {
            lost += e.failure.is_some() as usize;
        }
    });
    assert_eq!(lost, 1);

    let requeue = LmToGm::Requeue(PreemptedTasks {
        lm: LmId(1),
        gm: GmId(0),
        tasks: vec![(spec(9, 3), Micros(250))],
    });
    let mut facts = Vec::new();
    requeue.for_each_task(|t, fact| match fact {
        TaskFact::Requeued { spec, lost } => facts.push((t, spec.id, lost)),
        other => panic!("a requeue says {other:?}"),
    });
    assert_eq!(
        facts,
        vec![(TaskId::new(9, 3), TaskId::new(9, 3), Micros(250))]
    );
    assert!(requeue.notes(Side::Sender).is_empty());
}

#[test]
fn counts_by_kind() {
    let mut counts = KindCounts::default();
    counts.add(kind::LAUNCH);
    counts.add(kind::LAUNCH);
    counts.add(kind::CANCEL);
    assert_eq!(counts.get(kind::LAUNCH), 2);
    assert_eq!(counts.get(kind::CANCEL), 1);
    assert_eq!(counts.get(kind::PREEMPT), 0);
}
