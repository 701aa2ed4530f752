//! An LM that answers "busy" (it applied nothing and takes no new work for a while:
//! its broker backlog is full, or it is not ready): the GM core requeues the batch's
//! tasks at once and places them on other LMs until the LM's retry-after time is
//! over, then on that LM again, waking tasks that blocked meanwhile.

use common::cluster::{LmSpec, NodeSpec};
use common::protocol::{ClientToGm, GmToLm, LmToGm};
use common::reasons::PendingReason;
use common::{ConstraintSet, GmId, LmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{
    DecisionOutcome, GlobalMaster, GmConfig, GmInput, GmOutput, Undelivered,
};
use local_master::{LmConfig, LocalMaster};

const SECOND: Micros = Micros(1_000_000);

/// A GM of a one-GM cluster whose view holds two LMs of one 1-core node each.
fn gm_with_two_lms() -> GlobalMaster {
    let mut gm = GlobalMaster::new(GmConfig::new(GmId(0), 1, 2));
    for l in 0..2 {
        let spec = LmSpec {
            id: LmId(l),
            partitions: vec![vec![NodeSpec {
                capacity: Resources::cores(1, 1024),
                constraints: ConstraintSet::EMPTY,
            }]],
        };
        let mut lm = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0));
        gm.step(
            Micros(0),
            GmInput::Lm(LmToGm::State(lm.snapshot(Micros(0)))),
        );
    }
    gm
}

fn submit(gm: &mut GlobalMaster, at: Micros, job: u64) {
    let task = TaskSpec::short(TaskId::new(job, 0), Resources::cores(1, 10), SECOND);
    gm.step(at, GmInput::Client(ClientToGm::Submit(vec![task])));
}

/// The one launch batch of a pass, and the LM it goes to.
fn one_batch(out: &GmOutput) -> (&GmToLm, LmId) {
    let [message @ GmToLm::Launch(b)] = &out.to_lms[..] else {
        panic!("one launch batch, got {:?}", out.to_lms);
    };
    (message, b.lm)
}

#[test]
fn a_busy_lm_is_passed_by_until_its_retry_after_time() {
    let mut gm = gm_with_two_lms();
    submit(&mut gm, Micros(1), 1);
    let out = gm.step(Micros(2), GmInput::Schedule);
    let (message, busy) = one_batch(&out);
    let other = LmId(1 - busy.0);

    // Busy for 2 s: the task is back in its queue at once, with the reason.
    let back = gm.step(
        Micros(3),
        GmInput::Busy {
            request: Undelivered::of(message),
            retry_after: Micros(2 * SECOND.0),
        },
    );
    let reason = PendingReason::LmBusy { lm: busy };
    assert_eq!(back.requeued, vec![(TaskId::new(1, 0), reason)]);
    assert!(back.wants_pass);
    assert_eq!(back.next_wakeup, Some(Micros(3 + 2 * SECOND.0)));
    assert_eq!(gm.stats().lm_busy, 1);

    // The next pass places it on the other LM, though the busy one is free in the view.
    let out = gm.step(Micros(4), GmInput::Schedule);
    assert_eq!(
        one_batch(&out).1,
        other,
        "placed on the LM that is not busy"
    );

    // A second task finds no room: the busy LM is passed by, the other is full.
    submit(&mut gm, Micros(5), 2);
    let out = gm.step(Micros(6), GmInput::Schedule);
    assert!(out.to_lms.is_empty(), "nothing sent: {:?}", out.to_lms);
    assert!(
        matches!(out.decisions[..], [ref d] if matches!(d.outcome, DecisionOutcome::Requeued(_))),
        "{:?}",
        out.decisions
    );

    // Before the time is over nothing changes; at it, the LM takes work again and the
    // blocked task wakes.
    let early = gm.step(Micros(3 + 2 * SECOND.0 - 1), GmInput::Tick);
    assert!(!early.wants_pass);
    let tick = gm.step(Micros(3 + 2 * SECOND.0), GmInput::Tick);
    assert!(tick.wants_pass, "the LM is back: a pass is wanted");
    let out = gm.step(Micros(4 + 2 * SECOND.0), GmInput::Schedule);
    let (GmToLm::Launch(b), lm) = one_batch(&out) else {
        unreachable!()
    };
    assert_eq!(lm, busy, "placed on the LM whose busy time is over");
    assert_eq!(b.requests[0].task.id, TaskId::new(2, 0));
}

/// A busy answer to a batch the GM no longer waits for requeues nothing, but the LM is
/// still passed by.
#[test]
fn a_busy_answer_to_an_unknown_request_changes_nothing_but_the_lm() {
    let mut gm = gm_with_two_lms();
    let out = gm.step(
        Micros(1),
        GmInput::Busy {
            request: Undelivered::Batch {
                lm: LmId(0),
                seq: 99,
                tasks: vec![TaskId::new(7, 0)],
            },
            retry_after: SECOND,
        },
    );
    assert!(out.requeued.is_empty() && out.affected == 0);
    // LM 0 is passed by for a second all the same: a task goes to LM 1.
    submit(&mut gm, Micros(2), 1);
    let out = gm.step(Micros(3), GmInput::Schedule);
    assert_eq!(one_batch(&out).1, LmId(1));
}
