//! Unit tests of `check.rs`.

use super::*;
use common::GmId;

fn ev(task: TaskId, kind: TaskEventKind) -> TaskEvent {
    TaskEvent {
        task,
        at: Micros(1),
        kind,
    }
}

#[test]
fn a_task_that_starts_after_it_ended_ran_twice() {
    let mut c = Checker::default();
    let t = TaskId::new(1, 0);
    c.accepted(t, 0);
    let (lm, node) = (LmId(0), NodeId(1));
    c.event(&ev(t, TaskEventKind::Started { lm, node }))
        .unwrap();
    c.event(&ev(t, TaskEventKind::finished(lm, node))).unwrap();
    let e = c
        .event(&ev(t, TaskEventKind::Started { lm, node }))
        .unwrap_err();
    assert_eq!(e.0, Invariant::RanTwice);
}

#[test]
fn a_gm_end_must_match_the_stream_and_liveness_names_the_known_reason() {
    let mut c = Checker::default();
    let (a, b) = (TaskId::new(1, 0), TaskId::new(1, 1));
    c.accepted(a, 0);
    c.accepted(b, 0);
    let end = |task| TaskEnd {
        used: None,
        attempt: 1,
        task,
        node: NodeId(0),
        at: Micros(2),
        failure: None,
    };
    assert_eq!(
        c.gm_ended(0, &[end(a)]).unwrap_err().0,
        Invariant::TerminalDisagrees
    );
    let (lm, node) = (LmId(0), NodeId(0));
    c.event(&ev(a, TaskEventKind::finished(lm, node))).unwrap();
    c.gm_ended(0, &[end(a)]).unwrap();
    assert_eq!(c.liveness(false).0.unwrap().0, Invariant::Liveness);
    c.mark_known(b, Known::WorkerCrash);
    let (broken, known) = c.liveness(false);
    assert!(broken.is_none());
    assert_eq!(known[&Known::WorkerCrash], 1);
    assert!(c.liveness(true).0.is_some());
    let _ = GmId(0);
}
